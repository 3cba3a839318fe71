"""Optimizers that expand a parent workflow into a child: structured edits (no API model) or an LLM (AFlow).

Both return a `Candidate` (or None when nothing new can be proposed from this parent). Neither
evaluates anything; the search validates and evaluates what they propose.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass, field

from aflow_rl import space
from aflow_rl.operators import OPERATOR_DESCRIPTIONS, extract_code, tag
from aflow_rl.policy import EditPolicy, features
from aflow_rl.workflow import prompt_constants, validate
from aflow_rl.workspace import Workspace, read_json


@dataclass
class Candidate:
    """A proposed child workflow and how it came about."""

    parent: int
    graph: str
    prompt: str
    modification: str
    edit: str | None = None  # structured edit key (or the hint given to the LLM)
    allowed: list[str] = field(default_factory=list)  # edits that were open at this state (policy training)
    features: list[float] = field(default_factory=list)
    prob: float | None = None  # probability the sampling policy gave `edit` (the PPO ratio's denominator)
    attempts: int = 1  # optimizer answers needed (LLM)
    rejected: list[str] = field(default_factory=list)  # why earlier answers were refused


def open_edits(ws: Workspace, parent: int, spec: dict, existing_specs: list[dict], tried: set[str]) -> list[space.Edit]:
    """Edits that apply to the parent, were not tried from it, and lead to a workflow not in the tree yet."""
    out = []
    for e in space.catalogue(spec["family"]):
        new = space.apply(spec, e)
        if new is not None and e.describe() not in tried and new not in existing_specs:
            out.append(e)
    return out


class StructuredOptimizer:
    """Applies one edit from the catalogue: the policy's choice, or a uniform random one (plain MCTS)."""

    def __init__(self, benchmark: str):
        self.benchmark = benchmark

    def base_spec(self, graph: str) -> tuple[dict, str]:
        """The parent's spec; a graph outside the space is re-expressed as the initial spec (said in the text)."""
        spec = space.spec_of(graph)
        if spec is not None:
            return spec, ""
        return space.initial_spec(self.benchmark), "Re-express the workflow in the structured space, then: "

    def propose(
        self, ws: Workspace, parent: int, score: float, rng: random.Random, policy: EditPolicy | None = None
    ) -> Candidate | None:
        """One child of `parent`, or None when every edit from it has been tried."""
        graph, _ = (ws.round_dir(parent) / "graph.py").read_text(), None
        spec, prefix = self.base_spec(graph)
        existing = [
            s for s in (space.spec_of((ws.round_dir(r) / "graph.py").read_text()) for r in ws.rounds_on_disk()) if s
        ]
        tried = {m.removeprefix(prefix) for m in ws.tried_modifications(parent)}
        edits = open_edits(ws, parent, spec, existing, tried)
        if not edits:
            return None
        keys = [e.key for e in edits]
        if policy is not None:
            probs = policy.probs(spec, score, keys)
            choice = rng.choices(keys, weights=[probs[k] for k in keys])[0]
        else:
            probs = {}
            choice = rng.choice(keys)
        edit = edits[keys.index(choice)]
        g, p = space.render(space.apply(spec, edit))
        return Candidate(
            parent,
            g,
            p,
            prefix + edit.describe(),
            edit.key,
            keys,
            features(spec["family"], spec, score),
            prob=probs.get(choice, 1.0 / len(keys)),
        )


OPTIMIZE_PROMPT = """You are improving an agentic workflow for the {dataset} benchmark. A workflow is a Python class
`Workflow` in graph.py whose `async __call__` chains operator calls; its prompts live in prompt.py as
module-level string constants, referenced as prompt_custom.NAME.

Parent workflow (validation score {score:.4f}):
<graph>
{graph}
</graph>
<prompt>
{prompt}
</prompt>

Operators you may use (attribute = operator.Name(self.llm) in __init__):
{operators}

Earlier modifications of this parent and the scores they reached:
{experience}

Problems the parent got wrong:
{logs}
{hint}
Make exactly one modification of at most about five lines. Use at most {max_calls} operator calls in total.
Every prompt_custom.NAME that graph.py uses must be defined in prompt.py. Keep the __call__ signature and
return (answer, self.llm.get_usage_summary()["total_cost"]).
Do not repeat any modification listed above.

Answer in exactly this format:
<modification>one sentence describing the change</modification>
<graph>the complete new graph.py</graph>
<prompt>the complete new prompt.py</prompt>
"""


def optimizer_request(
    ws: Workspace,
    parent: int,
    score: float,
    rng: random.Random,
    benchmark: str,
    failure_logs: int,
    max_calls: int,
    hint: str | None = None,
) -> str:
    """AFlow's optimizer request for one expansion: parent code, operators, experience, failure samples, hint."""
    graph, prompt = (ws.round_dir(parent) / "graph.py").read_text(), (ws.round_dir(parent) / "prompt.py").read_text()
    node = ws.processed_experience().get(str(parent), {})
    exp_lines = [
        f"- {'succeeded' if b == 'success' else 'failed'} ({v['score']:.4f}): {v['modification']}"
        for b in ("success", "failure")
        for v in node.get(b, {}).values()
    ]
    logs = read_json(ws.round_dir(parent) / "log.json", [])
    sample = rng.sample(logs, min(failure_logs, len(logs)))
    ops = "\n".join(f"- {n}: {d['description']} Interface: {d['interface']}" for n, d in OPERATOR_DESCRIPTIONS.items())
    return OPTIMIZE_PROMPT.format(
        dataset=benchmark,
        score=score,
        graph=graph,
        prompt=prompt,
        operators=ops,
        experience="\n".join(exp_lines) or "- none yet",
        logs="\n".join(json.dumps(x)[:600] for x in sample) or "- none recorded",
        hint=f"\nSuggested direction: {hint}\n" if hint else "",
        max_calls=max_calls,
    )


class LLMOptimizer:
    """AFlow's optimizer: an LLM rewrites graph and prompt; invalid answers are repaired or re-asked."""

    def __init__(self, llm_cfg, benchmark: str, attempts: int = 3, failure_logs: int = 3, max_calls: int = 10):
        from planact.engines.api import AnthropicEngine, OpenAIEngine

        if llm_cfg.kind not in ("openai", "anthropic"):
            raise ValueError("search.optimizer_llm.kind must be 'openai' or 'anthropic' for the LLM optimizer")
        api = llm_cfg.openai if llm_cfg.kind == "openai" else llm_cfg.anthropic
        self.engine = (
            OpenAIEngine(api, name="optimizer") if llm_cfg.kind == "openai" else AnthropicEngine(api, name="optimizer")
        )
        self.cfg, self.benchmark = llm_cfg, benchmark
        self.attempts, self.failure_logs, self.max_calls = attempts, failure_logs, max_calls

    def ask(self, text: str) -> str:
        """One answer of the optimizer model to a request (the engine retries transient API errors)."""
        from planact.engines.base import SamplingParams

        params = SamplingParams(temperature=self.cfg.temperature, max_new_tokens=self.cfg.max_new_tokens, n=1)
        return self.engine.generate([text], params)[0][0].text

    def build_prompt(self, ws: Workspace, parent: int, score: float, rng: random.Random, hint: str | None) -> str:
        """The request for one expansion (parent code, operators, experience, failure samples, optional hint)."""
        return optimizer_request(ws, parent, score, rng, self.benchmark, self.failure_logs, self.max_calls, hint)

    @staticmethod
    def repair(answer: str, parent_prompt: str) -> tuple[str | None, str | None, str | None, list[str]]:
        """Pull modification/graph/prompt out of an answer, fixing what can be fixed; list what cannot."""
        problems = []
        modification = tag(answer, "modification")
        graph = tag(answer, "graph")
        if graph is None:  # some models drop the tags and send a fenced block
            code = extract_code(answer)
            graph = code if "class Workflow" in code else None
        prompt = tag(answer, "prompt")
        if graph is not None:
            graph = extract_code(graph) if "```" in graph else graph
        if prompt is not None and "```" in prompt:
            prompt = extract_code(prompt)
        if prompt is None:
            prompt = parent_prompt
        if graph is not None:
            # Names the graph uses but the new prompt.py lacks: take them from the parent when it has them.
            used = set(re.findall(r"prompt_custom\.([A-Za-z_][A-Za-z0-9_]*)", graph))
            try:
                have, parent_have = prompt_constants(prompt), prompt_constants(parent_prompt)
                missing = [n for n in sorted(used - set(have)) if n in parent_have]
                prompt += "".join(f"\n{n} = {json.dumps(parent_have[n])}\n" for n in missing)
            except SyntaxError:
                pass
        if not modification:
            problems.append("no <modification>")
        if graph is None:
            problems.append("no <graph>")
        return modification, graph, prompt, problems

    def propose(
        self,
        ws: Workspace,
        parent: int,
        score: float,
        rng: random.Random,
        hint: str | None = None,
        hint_key: str | None = None,
    ) -> Candidate | None:
        """Ask up to `attempts` times for a valid, new modification; None when every answer was refused."""
        parent_prompt = (ws.round_dir(parent) / "prompt.py").read_text()
        tried = ws.tried_modifications(parent)
        base = self.build_prompt(ws, parent, score, rng, hint)
        rejected: list[str] = []
        for attempt in range(1, self.attempts + 1):
            request = base if not rejected else base + "\nYour previous answer was refused: " + rejected[-1] + "\n"
            modification, graph, prompt, problems = self.repair(self.ask(request), parent_prompt)
            if not problems:
                v = validate(graph, prompt, self.max_calls)
                problems = v.errors
            if not problems and modification in tried:
                problems = [f"modification already tried from round {parent}: {modification!r}"]
            if problems:
                rejected.append("; ".join(problems))
                continue
            return Candidate(parent, graph, prompt, modification, hint_key, attempts=attempt, rejected=rejected)
        return Candidate(parent, "", "", "", hint_key, attempts=self.attempts, rejected=rejected) if rejected else None


def accepted(c: Candidate | None) -> bool:
    """True when an optimizer produced a usable child."""
    return c is not None and bool(c.graph)
