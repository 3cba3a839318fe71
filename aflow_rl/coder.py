"""The offline code executor: a simulated coder of known skill that answers from each problem's candidate programs.

No model a CPU can train here writes HumanEval code, and no API model can be reached offline, so the
local executor answers a code benchmark the way a fallible coder would, from a finite set per problem:
the reference solution and token-level mutants of it (graph_planner's mutation operators: flipped
comparisons, off-by-one constants and bounds, swapped operators and arguments). A fresh request draws
the reference with probability `skill` and otherwise one mutant uniformly (temperature reshapes the
draw: p_i^(1/T); T = 0 always answers the likeliest). A request that shows it a solution and a failing
public test (AFlow's Test operator) draws again among the programs other than the one shown: the
coder "fixes" by trying something else, not by reading the failure.

What it measures: how much a workflow (ensembles voting on identical programs, the Test step running
the docstring's examples in the sandbox) raises the pass rate of a coder whose single-shot accuracy is
known, as a real coder's workflow search would. What it does not: any real model's HumanEval score.
Some mutants behave like the reference (equivalent mutants) and pass; the benchmark's own tests decide.
Draws are seeded per request (aflow_rl.llm's request seeds), so evaluations replay exactly.
"""

from __future__ import annotations

import hashlib
import math
import random
import re
from functools import lru_cache

from aflow_rl.benchmarks import load_problems
from aflow_rl.operators import extract_code
from graph_planner.corpus.mutate import TOKEN_LEVEL, mutants

_REPAIR = re.compile(r"fails a public test", re.I)


def candidates(problem: dict, count: int) -> list[str]:
    """The reference program first, then up to `count` of its token-level mutants (a fixed choice per problem)."""
    reference = problem["question"] + problem["answer"]
    try:
        pool = [m.source for m in mutants("solution.py", reference, {problem["entry_point"]}, TOKEN_LEVEL)]
    except SyntaxError:  # a reference that does not parse on this Python: the coder only knows it
        pool = []
    rng = random.Random(hashlib.sha1(problem["id"].encode()).hexdigest())
    return [reference] + (rng.sample(pool, count) if len(pool) > count else pool)


def _key(code: str) -> str:
    return " ".join(code.split())


class CandidateCoder:
    """An engine with the executor batcher's interface: `await generate(prompt, temperature, seed)`."""

    def __init__(self, problems: list[dict], skill: float, mutants_per_problem: int):
        self.skill, self.count = skill, mutants_per_problem
        self.problems = problems
        self.calls = self.unknown = 0

    def _problem(self, prompt: str) -> dict | None:
        return next((p for p in self.problems if p["question"].strip() and p["question"].strip() in prompt), None)

    def _pool(self, problem: dict) -> list[str]:
        return _pool(self.count, problem["id"], problem["question"], problem["answer"], problem["entry_point"])

    async def generate(self, prompt: str, temperature: float, seed: int | None = None) -> tuple[str, dict]:
        """One program for the problem in the prompt, in a fenced block; '' when no known problem is asked about."""
        self.calls += 1
        problem = self._problem(prompt)
        if problem is None:
            self.unknown += 1
            return "", {"prompt_tokens": len(prompt.split()), "completion_tokens": 0}
        pool = self._pool(problem)
        weights = [self.skill] + [(1 - self.skill) / max(1, len(pool) - 1)] * (
            len(pool) - 1
        )  # relative: [skill] alone draws 1
        if _REPAIR.search(prompt):  # the Test step's fix request: anything but the program it was shown
            shown = _key(extract_code(prompt.split("Solution:", 1)[-1]))
            keep = [i for i, code in enumerate(pool) if _key(code) != shown] or list(range(len(pool)))
            pool, weights = [pool[i] for i in keep], [weights[i] for i in keep]
        rng = random.Random(seed if seed is not None else self.calls)
        if temperature <= 0:
            pick = max(range(len(pool)), key=lambda i: (weights[i], -i))
        else:
            scaled = [math.exp(math.log(w) / temperature) if w > 0 else 0.0 for w in weights]
            pick = rng.choices(range(len(pool)), weights=scaled)[0]
        text = f"```python\n{pool[pick]}\n```"
        return text, {"prompt_tokens": len(prompt.split()), "completion_tokens": len(text.split())}


@lru_cache(maxsize=4096)
def _pool(count: int, pid: str, question: str, answer: str, entry_point: str) -> list[str]:
    return candidates({"id": pid, "question": question, "answer": answer, "entry_point": entry_point}, count)


def coder_for(benchmark: str, data_path: str | None, skill: float, mutants_per_problem: int) -> CandidateCoder:
    """The candidate coder over a code benchmark's problems."""
    return CandidateCoder(load_problems(benchmark, data_path), skill, mutants_per_problem)
