"""AFlow's operators over the engine protocol, with AFlow's call signatures.

Every operator takes an `LLM` (aflow_rl.llm) and returns a dict, as in AFlow. Model output that does
not parse never raises: the operator falls back to the raw text (or a neutral verdict) and counts the
miss in `PARSE_FAILURES`, which the evaluator reports. Code is only ever run in planact's sandbox
(through aflow_rl.code_check).

Two decisions differ from the reference code and are deliberate:
* `Custom` formats `{input}` when the instruction contains it (else instruction + input, as AFlow),
  so prompt templates can put the input where a small local model expects it.
* ScEnsemble / MdEnsemble take the majority answer when there is one (self-consistency) and only ask
  the LLM to break ties; a model that cannot follow instructions (the local Plan/Act pair) breaks
  ties by first occurrence.
"""

from __future__ import annotations

import ast
import random
import re
from collections import Counter

from aflow_rl.code_check import call_function, check_solution
from sandbox import Limits

PARSE_FAILURES: Counter = Counter()
CODE_LIMITS = Limits(timeout_s=15.0, memory_mb=512)

OPERATOR_DESCRIPTIONS = {
    "Custom": {
        "description": "Generates anything from an instruction and an input.",
        "interface": "custom(input: str, instruction: str) -> dict with key 'response'",
    },
    "AnswerGenerate": {
        "description": "Thinks step by step, then gives a final answer.",
        "interface": "answer_generate(input: str) -> dict with keys 'thought', 'answer'",
    },
    "CustomCodeGenerate": {
        "description": "Writes code for a problem and its entry point.",
        "interface": "custom_code_generate(problem: str, entry_point: str, instruction: str) "
        "-> dict with key 'response'",
    },
    "ScEnsemble": {
        "description": "Picks the most consistent of several solutions (self-consistency).",
        "interface": "sc_ensemble(solutions: list[str], problem: str) -> dict with key 'response'",
    },
    "MdEnsemble": {
        "description": "Votes several times over shuffled solutions and returns the winner.",
        "interface": "md_ensemble(solutions: list[str], problem: str) -> dict with key 'solution'",
    },
    "Programmer": {
        "description": "Writes Python defining solve(), runs it in a sandbox (3 attempts), returns code and output.",
        "interface": "programmer(problem: str, analysis: str = 'None') -> dict with keys 'code', 'output'",
    },
    "Test": {
        "description": "Runs the public examples of a code problem against a solution and repairs it on failure.",
        "interface": "test(problem: str, solution: str, entry_point: str, test_loop: int = 3) "
        "-> dict with keys 'result', 'solution'",
    },
    "Review": {
        "description": "Reviews a solution and says whether it is correct, with feedback.",
        "interface": "review(problem: str, solution: str) -> dict with keys 'review_result', 'feedback'",
    },
    "Revise": {
        "description": "Rewrites a solution using review feedback.",
        "interface": "revise(problem: str, solution: str, feedback: str) -> dict with key 'solution'",
    },
    "Format": {
        "description": "Extracts the final answer from a solution in the benchmark's answer format.",
        "interface": "format(problem: str, solution: str) -> dict with key 'solution'",
    },
}
OPERATORS = tuple(OPERATOR_DESCRIPTIONS)


def tag(text: str, name: str) -> str | None:
    """Content of <name>...</name> in model output, or None."""
    m = re.search(rf"<{name}>(.*?)</{name}>", text or "", re.S)
    return m.group(1).strip() if m else None


def parsed(text: str, name: str, operator: str) -> str | None:
    """tag(text, name), counting a parse failure against `operator` when it is missing."""
    value = tag(text, name)
    if value is None:
        PARSE_FAILURES[operator] += 1
    return value


def extract_code(text: str) -> str:
    """The last fenced code block (or the whole text when there is none)."""
    blocks = re.findall(r"```(?:python|py)?\s*\n(.*?)```", text or "", re.S)
    return (blocks[-1] if blocks else text or "").strip()


def _parses(src: str) -> bool:
    try:
        compile(src, "<candidate>", "exec", dont_inherit=True)  # compile, not parse: `return` at top level fails
        return True
    except (SyntaxError, ValueError):
        return False


def candidate_program(problem: str, solution: str) -> str:
    """The program judged for a code answer, as AFlow sanitises it: the code of the last fenced block,
    after the prompt's own code when the prompt is code (HumanEval), so helpers it defines exist; a bare
    function body completes the prompt."""
    code = extract_code(solution)
    if _parses(problem) and problem.strip():
        if _parses(code):
            return f"{problem}\n\n{code}\n"
        for body in (solution, code):  # the raw text keeps a bare body's indentation
            if _parses(problem + body):
                return problem + body
    return code


def normalise(answer: str) -> str:
    """Key used to count votes: whitespace-collapsed, case-folded."""
    return " ".join(str(answer).split()).lower()


class Operator:
    """Base: holds the LLM; subclasses implement `__call__`."""

    def __init__(self, llm, name: str | None = None):
        self.llm = llm
        self.name = name or type(self).__name__


class Custom(Operator):
    """instruction + input -> response (or instruction.format(input=...) when it has an {input} slot)."""

    async def __call__(self, input: str, instruction: str) -> dict:
        prompt = instruction.replace("{input}", input) if "{input}" in instruction else instruction + input
        return {"response": await self.llm(prompt)}


class AnswerGenerate(Operator):
    """Step-by-step thought, then an answer in tags."""

    async def __call__(self, input: str) -> dict:
        text = await self.llm(
            f"{input}\n\nThink step by step inside <thought></thought>, then give only the final "
            "answer inside <answer></answer>."
        )
        answer = parsed(text, "answer", "AnswerGenerate")
        return {"thought": tag(text, "thought") or "", "answer": text.strip() if answer is None else answer}


class CustomCodeGenerate(Operator):
    """Code for a problem's entry point, extracted from a fenced block."""

    async def __call__(self, problem: str, entry_point: str, instruction: str) -> dict:
        text = await self.llm(
            f"{instruction}\n\n{problem}\n\nWrite the complete function `{entry_point}` in one ```python block."
        )
        return {"response": extract_code(text)}


async def _vote(llm, solutions: list[str], problem: str, counter_key: str) -> str:
    if not solutions:
        return ""
    counts = Counter(normalise(s) for s in solutions)
    ranked = counts.most_common()
    if len(ranked) == 1 or ranked[0][1] > ranked[1][1] or not llm.follows_instructions:
        return next(s for s in solutions if normalise(s) == ranked[0][0])
    tied = [next(s for s in solutions if normalise(s) == k) for k, c in ranked if c == ranked[0][1]]
    letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    listing = "\n".join(f"{letters[i]}: {s}" for i, s in enumerate(tied[:26]))
    text = await llm(
        f"Problem:\n{problem}\n\nCandidate solutions:\n{listing}\n\nWhich candidate is most consistent "
        "with the others and most likely correct? Answer with the letter inside <choice></choice>."
    )
    choice = (tag(text, "choice") or "").strip().upper()[:1]
    if choice and choice in letters[: len(tied)]:
        return tied[letters.index(choice)]
    PARSE_FAILURES[counter_key] += 1
    return tied[0]


class ScEnsemble(Operator):
    """Self-consistency: the majority solution; the LLM breaks ties."""

    async def __call__(self, solutions: list[str], problem: str) -> dict:
        return {"response": await _vote(self.llm, list(solutions), problem, "ScEnsemble")}


class MdEnsemble(Operator):
    """Several votes over shuffled orderings; the most voted solution wins."""

    def __init__(self, llm, name: str | None = None, vote_count: int = 5):
        super().__init__(llm, name)
        self.vote_count = vote_count

    async def __call__(self, solutions: list[str], problem: str) -> dict:
        solutions = list(solutions)
        rng = random.Random(len(solutions))
        votes = Counter()
        for _ in range(self.vote_count):
            order = solutions[:]
            rng.shuffle(order)
            votes[normalise(await _vote(self.llm, order, problem, "MdEnsemble"))] += 1
        best = votes.most_common(1)[0][0] if votes else ""
        return {"solution": next((s for s in solutions if normalise(s) == best), "")}


class Programmer(Operator):
    """LLM writes `solve()`; it runs in the sandbox; errors are fed back, up to 3 attempts."""

    async def __call__(self, problem: str, analysis: str = "None") -> dict:
        feedback, code = "", ""
        for _ in range(3):
            text = await self.llm(
                f"Problem:\n{problem}\n\nAnalysis:\n{analysis}\n{feedback}\nWrite Python code that "
                "defines solve() returning the answer, in one ```python block. No input(), no files, "
                "no network."
            )
            code = extract_code(text)
            res = call_function(code, "solve", limits=CODE_LIMITS)
            if res.ok:
                return {"code": code, "output": "" if res.value is None else str(res.value)}
            feedback = f"\nYour previous code failed ({res.status}): {res.detail}\n"
        return {"code": code, "output": "Error: " + feedback.strip()}


def public_examples(problem: str, entry_point: str) -> list[str]:
    """The public tests in a problem statement: doctest examples (`>>> f(x)` + expected line, HumanEval)
    and `assert f(...)` lines (MBPP states its first test that way)."""
    tests, lines = [], problem.splitlines()
    for i, line in enumerate(lines):
        s = line.strip()
        if s.startswith(">>>") and entry_point in s and i + 1 < len(lines):
            expected = lines[i + 1].strip()
            if expected and not expected.startswith(">>>"):
                tests.append(f"assert {s[3:].strip()} == {expected}")
        elif s.startswith("assert ") and entry_point in s:
            tests.append(s)
    return tests


class Test(Operator):
    """Run the problem's public examples; on failure ask the LLM to fix the solution, up to test_loop times."""

    async def __call__(self, problem: str, solution: str, entry_point: str, test_loop: int = 3) -> dict:
        tests = public_examples(problem, entry_point)
        if not tests:
            return {"result": True, "solution": solution}
        check = "def check():\n" + "".join(f"    {t}\n" for t in tests)
        for _ in range(test_loop):
            res = check_solution(
                candidate_program(problem, solution),
                check,
                entry_point,
                prompt=problem,
                limits=CODE_LIMITS,
                memo=getattr(self.llm, "answers_from_known_programs", False),
            )
            if res.ok:
                return {"result": True, "solution": solution}
            text = await self.llm(
                f"Problem:\n{problem}\n\nSolution:\n```python\n{solution}\n```\nIt fails a public "
                f"test: {res.detail}\nReturn the corrected complete solution in one ```python block."
            )
            solution = extract_code(text)
        return {"result": False, "solution": solution}


class Review(Operator):
    """A verdict and feedback on a solution; unparseable output counts as approval (and a parse failure)."""

    async def __call__(self, problem: str, solution: str) -> dict:
        text = await self.llm(
            f"Problem:\n{problem}\n\nSolution:\n{solution}\n\nIs the solution correct? Answer "
            "<review_result>true</review_result> or false, and <feedback>...</feedback>."
        )
        verdict = parsed(text, "review_result", "Review")
        return {"review_result": (verdict or "true").lower().startswith("t"), "feedback": tag(text, "feedback") or ""}


class Revise(Operator):
    """A rewritten solution that takes the feedback into account."""

    async def __call__(self, problem: str, solution: str, feedback: str) -> dict:
        text = await self.llm(
            f"Problem:\n{problem}\n\nSolution:\n{solution}\n\nFeedback:\n{feedback}\n\nRewrite the "
            "solution, fixing what the feedback says. Put it inside <solution></solution>."
        )
        out = parsed(text, "solution", "Revise")
        return {"solution": text.strip() if out is None else out}


class Format(Operator):
    """The final answer alone, as the benchmark expects it."""

    async def __call__(self, problem: str, solution: str) -> dict:
        text = await self.llm(
            f"Problem:\n{problem}\n\nSolution:\n{solution}\n\nGive only the final answer, with no "
            "explanation, inside <answer></answer>."
        )
        out = parsed(text, "answer", "Format")
        return {"solution": solution if out is None else out}


def operator_calls(source: str) -> list[str]:
    """Operator calls a graph's code makes, as attribute names; a call inside `range(N)` loops counts N times.

    Counted statically (no code runs), so ensemble sizes written as literals count toward the limit.
    """
    calls: list[str] = []

    def visit(node: ast.AST, mult: int) -> None:
        if isinstance(node, (ast.For, ast.comprehension)):
            n = _range_literal(node.iter)
            mult = mult * (n or 1)
        if isinstance(node, ast.ListComp | ast.GeneratorExp | ast.SetComp):
            for gen in node.generators:
                n = _range_literal(gen.iter)
                mult = mult * (n or 1)
        if isinstance(node, ast.Await) and isinstance(node.value, ast.Call):
            f = node.value.func
            if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "self":
                calls.extend([f.attr] * mult)
        for child in ast.iter_child_nodes(node):
            if not isinstance(child, ast.comprehension):
                visit(child, mult)

    visit(ast.parse(source), 1)
    return calls


def _range_literal(node: ast.AST) -> int | None:
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "range"
        and len(node.args) == 1
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, int)
    ):
        return node.args[0].value
    return None
