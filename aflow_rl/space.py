"""The structured search space: a workflow spec, its rendering to graph.py/prompt.py, and the edit catalogue.

A spec is a short list of steps plus a choice of prompt template per prompt constant. Rendered graphs
carry their spec in a `# planact-spec:` header line, so the structured-edit optimizer (and the policy's
state features) can read a parent back. Graphs without that line (hand-written, or rewritten by the
LLM optimizer) are outside this space: only the LLM optimizer expands them.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass

SPEC_TAG = "# planact-spec: "
VOTES = (1, 3, 5)

FAMILIES = {
    "planact": "planact",
    "gsm8k": "qa",
    "math": "qa",
    "hotpotqa": "qa",
    "drop": "qa",
    "humaneval": "code",
    "mbpp": "code",
}

# Prompt template banks: index 0 is the starting template. For planact they are the two prompt shapes the
# local models were trained on, and near-misses of them; the search finds out what each costs.
TEMPLATES = {
    "planact": {
        "PLAN_PROMPT": ["{input} =", "{input}=", "plan {input} ="],
        "ACT_PROMPT": ["{plan}:{input}=", "{plan}: {input}=", "{plan}:{input} ="],
    },
    "qa": {
        "SOLVE_PROMPT": [
            "Solve the problem. End with the final answer.\n\n",
            "Solve the problem step by step, checking each step. End with the final answer.\n\n",
            "Answer concisely. Give only the final answer.\n\n",
        ]
    },
    "code": {
        "CODE_PROMPT": [
            "Complete the function.",
            "Complete the function. Think about edge cases first and handle them.",
            "Complete the function; make it simple and correct.",
        ]
    },
}

INITIAL = {
    "planact": {"steps": [{"kind": "act", "votes": 1, "op": "Custom"}]},
    "qa": {"steps": [{"kind": "solve", "votes": 1, "op": "Custom"}]},
    "code": {"steps": [{"kind": "generate", "votes": 1, "op": "CustomCodeGenerate"}]},
}
ORDER = {"planact": ["plan", "act"], "qa": ["solve", "program", "review", "format"], "code": ["generate", "test"]}
OPTIONAL = {"planact": ["plan"], "qa": ["program", "review", "format"], "code": ["test"]}
VOTED = {"planact": ["plan", "act"], "qa": ["solve"], "code": ["generate"]}
REPLACEABLE = {"planact": ("act", ["Custom", "AnswerGenerate"]), "qa": ("solve", ["Custom", "AnswerGenerate"])}


def initial_spec(benchmark: str) -> dict:
    """Round 1: one generation step, one vote, template 0 everywhere."""
    fam = FAMILIES[benchmark]
    spec = copy.deepcopy(INITIAL[fam])
    spec["family"] = fam
    spec["templates"] = {name: 0 for name in TEMPLATES[fam]}
    return spec


def _step(spec: dict, kind: str) -> dict | None:
    return next((s for s in spec["steps"] if s["kind"] == kind), None)


# --- rendering ---

_HEADER = """{tag}{spec}
from aflow_rl import operators as operator
from aflow_rl.llm import create_llm_instance
import prompt as prompt_custom  # this round's prompt.py (the loader binds it)


class Workflow:
    def __init__(self, name: str, llm_config, dataset: str) -> None:
        self.name = name
        self.dataset = dataset
        self.llm = create_llm_instance(llm_config)
{ops}
"""

_ATTR = {
    "Custom": "custom",
    "AnswerGenerate": "answer_generate",
    "ScEnsemble": "sc_ensemble",
    "Programmer": "programmer",
    "Review": "review",
    "Revise": "revise",
    "Format": "format",
    "CustomCodeGenerate": "custom_code_generate",
    "Test": "test",
}


def _gen(op: str, inp: str, instruction: str) -> str:
    if op == "AnswerGenerate":
        return f'(await self.answer_generate(input={instruction}.replace("{{input}}", {inp})))["answer"]'
    return f'(await self.custom(input={inp}, instruction={instruction}))["response"]'


def _voted(var: str, expr: str, votes: int, problem: str) -> list[str]:
    if votes == 1:
        return [f"{var} = {expr}"]
    return [
        f"{var}_candidates = [{expr} for _ in range({votes})]",
        f'{var} = (await self.sc_ensemble(solutions={var}_candidates, problem={problem}))["response"]',
    ]


def render(spec: dict) -> tuple[str, str]:
    """graph.py and prompt.py source for a spec."""
    fam = spec["family"]
    body: list[str] = []
    ops = set()
    if fam == "planact":
        body.append('instruction, data = problem.rsplit(": ", 1)')
        plan_step, act = _step(spec, "plan"), _step(spec, "act")
        if plan_step:
            ops.add("Custom")
            body += _voted(
                "plan", _gen("Custom", "instruction", "prompt_custom.PLAN_PROMPT"), plan_step["votes"], "instruction"
            )
        else:
            body.append('plan = ""')
        body.append('act_prompt = prompt_custom.ACT_PROMPT.replace("{plan}", plan.strip())')
        ops.add(act["op"])
        body += _voted("answer", _gen(act["op"], "data", "act_prompt"), act["votes"], "problem")
        sig = "problem: str"
    elif fam == "qa":
        solve = _step(spec, "solve")
        ops.add(solve["op"])
        body += _voted("answer", _gen(solve["op"], "problem", "prompt_custom.SOLVE_PROMPT"), solve["votes"], "problem")
        if _step(spec, "program"):
            ops.add("Programmer")
            body.append("program = await self.programmer(problem=problem, analysis=answer)")
            body.append('if program["output"] and not str(program["output"]).startswith("Error"):')
            body.append('    answer = answer + "\\nProgram output: " + str(program["output"])')
        if _step(spec, "review"):
            ops |= {"Review", "Revise"}
            body.append("review = await self.review(problem=problem, solution=answer)")
            body.append('if not review["review_result"]:')
            body.append(
                "    answer = (await self.revise(problem=problem, solution=answer, "
                'feedback=review["feedback"]))["solution"]'
            )
        if _step(spec, "format"):
            ops.add("Format")
            body.append('answer = (await self.format(problem=problem, solution=answer))["solution"]')
        sig = "problem: str"
    else:
        gen = _step(spec, "generate")
        ops.add("CustomCodeGenerate")
        expr = (
            "(await self.custom_code_generate(problem=problem, entry_point=entry_point, "
            'instruction=prompt_custom.CODE_PROMPT))["response"]'
        )
        body += _voted("answer", expr, gen["votes"], "problem")
        if _step(spec, "test"):
            ops.add("Test")
            body.append(
                'answer = (await self.test(problem=problem, solution=answer, entry_point=entry_point))["solution"]'
            )
        sig = "problem: str, entry_point: str"
    if any(s["votes"] > 1 for s in spec["steps"]):
        ops.add("ScEnsemble")
    op_lines = "\n".join(f"        self.{_ATTR[o]} = operator.{o}(self.llm)" for o in sorted(ops))
    graph = _HEADER.format(tag=SPEC_TAG, spec=json.dumps(spec, sort_keys=True), ops=op_lines)
    graph += f"\n    async def __call__(self, {sig}):\n"
    graph += "".join(f"        {line}\n" for line in body)
    graph += '        return answer, self.llm.get_usage_summary()["total_cost"]\n'
    prompt = "".join(
        f"{name} = {json.dumps(TEMPLATES[fam][name][i])}\n\n" for name, i in sorted(spec["templates"].items())
    )
    return graph, prompt


def spec_of(graph_src: str) -> dict | None:
    """The spec a rendered graph carries, or None for graphs outside the structured space."""
    first = graph_src.splitlines()[0] if graph_src else ""
    if not first.startswith(SPEC_TAG):
        return None
    try:
        return json.loads(first[len(SPEC_TAG) :])
    except json.JSONDecodeError:
        return None


# --- edits (the policy's action space) ---


@dataclass(frozen=True)
class Edit:
    """One structured modification: add / remove a step, set an ensemble size, replace an operator, swap a template."""

    kind: str  # add | remove | votes | op | template
    target: str  # step kind or prompt name
    value: int | str | None = None

    @property
    def key(self) -> str:
        """Stable id (policy output index, dedupe key)."""
        return f"{self.kind}:{self.target}:{self.value}"

    def describe(self) -> str:
        """The <modification> text written to experience.json."""
        if self.kind == "add":
            return f"Add a {self.target} step."
        if self.kind == "remove":
            return f"Remove the {self.target} step."
        if self.kind == "votes" and self.value == 1:
            return f"Sample the {self.target} step once (no ensemble)."
        if self.kind == "votes":
            return f"Sample the {self.target} step {self.value} times and keep the self-consistent answer (ScEnsemble)."
        if self.kind == "op":
            return f"Use the {self.value} operator for the {self.target} step."
        return f"Swap {self.target} for template {self.value}."


def catalogue(family: str) -> list[Edit]:
    """Every edit of a family, in a fixed order (the policy's logits follow it)."""
    edits = [Edit("add", k) for k in OPTIONAL[family]] + [Edit("remove", k) for k in OPTIONAL[family]]
    edits += [Edit("votes", k, v) for k in VOTED[family] for v in VOTES]
    if family in REPLACEABLE:
        step, ops = REPLACEABLE[family]
        edits += [Edit("op", step, o) for o in ops]
    edits += [Edit("template", name, i) for name, bank in TEMPLATES[family].items() for i in range(len(bank))]
    return edits


def apply(spec: dict, edit: Edit) -> dict | None:
    """The edited spec, or None when the edit does not apply or changes nothing."""
    new = copy.deepcopy(spec)
    step = _step(new, edit.target)
    if edit.kind == "add":
        if step:
            return None
        new["steps"].append({"kind": edit.target, "votes": 1, "op": ""})
        new["steps"].sort(key=lambda s: ORDER[new["family"]].index(s["kind"]))
    elif edit.kind == "remove":
        if not step:
            return None
        new["steps"].remove(step)
    elif edit.kind == "votes":
        if not step or step["votes"] == edit.value:
            return None
        step["votes"] = edit.value
    elif edit.kind == "op":
        if not step or step["op"] == edit.value:
            return None
        step["op"] = edit.value
    else:
        if new["templates"].get(edit.target) == edit.value:
            return None
        new["templates"][edit.target] = edit.value
    return new
