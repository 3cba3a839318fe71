"""The model agent: any planact engine (hf, sglang, openai, anthropic) chooses each action as JSON.

Each turn the engine reads the system prompt, the task and a short summary of the last observation, and
replies with one JSON action. A reply that is not a valid action (no JSON, bad JSON, unknown type, bad
fields) is answered by the rule agent for that step instead, and counted in `fallbacks`. A separate
patch-model engine (the CGM role) can write the patch: when the planner sends a Repair with a plan and a
target but no patch, the patch model reads the linearised working memory and the plan and writes a
unified diff, so "model decides + patch model edits" is one configuration.
"""

from __future__ import annotations

import json

from graph_planner.actions import ActionError, Repair, parse_action
from graph_planner.agents.rule import RuleAgent
from planact.engines.base import SamplingParams

SYSTEM_PROMPT = """You repair a bug in a Python repository. Reply with exactly one JSON object per turn:
{"type": "explore", "op": "find", "anchors": [names or text]}      search the code graph
{"type": "explore", "op": "read", "nodes": [node ids]}             read source with line numbers
{"type": "explore", "op": "expand", "nodes": [node ids], "hop": 1} neighbours in the graph
{"type": "memory", "ops": [{"op": "add", "node": id}]}            keep code for the patch
{"type": "repair", "apply": true, "target": id, "plan": text, "patch": unified diff}  try a fix (runs the failing tests)
{"type": "submit"}                                                  finish (all tests must pass)
Node ids look like path/to/file.py::function or path/to/file.py::Class.method."""

PATCH_PROMPT = """Write a unified diff (--- a/FILE, +++ b/FILE, @@ hunks) that carries out the plan.
Only change the code shown. Reply with the diff only."""


def summarize(obs: dict, limit: int = 3000) -> str:
    """An observation as compact JSON, cut to `limit` characters."""
    text = json.dumps(obs, default=str)
    return text if len(text) <= limit else text[:limit] + " ...[cut]"


class ModelAgent:
    """Actions from an engine, with per-step fallback to the rule agent."""

    name = "model"

    def __init__(
        self,
        engine,
        params: SamplingParams | None = None,
        patch_engine=None,
        system_prompt: str = SYSTEM_PROMPT,
        history: int = 4,
    ):
        self.engine = engine
        self.patch_engine = patch_engine
        self.params = params or SamplingParams(temperature=0.0, max_new_tokens=512)
        self.system_prompt = system_prompt
        self.history = history
        self.rule = RuleAgent()
        self.fallbacks = 0
        self.replies = 0

    def begin(self, obs: dict) -> None:
        """Start an episode."""
        self.rule.begin(obs)
        self.task = f"Problem:\n{obs['problem_statement']}\n\nRepository: {summarize(obs['repository'], 1500)}"
        self.turns: list[str] = []
        self.memory_text = ""

    def prompt(self, obs: dict) -> str:
        """The text the engine reads this turn."""
        recent = "\n".join(self.turns[-self.history :])
        return (
            f"{self.system_prompt}\n\n{self.task}\n\n{recent}\nLast observation: {summarize(obs)}\nYour action (JSON):"
        )

    def act(self, obs: dict) -> dict:
        """The next action: the model's when valid, else the rule agent's (counted)."""
        if obs.get("memory_text"):
            self.memory_text = obs["memory_text"]
        reply = self.engine.generate([self.prompt(obs)], self.params)[0][0].text
        self.replies += 1
        try:
            action = parse_action(reply)
        except ActionError as e:
            self.fallbacks += 1
            action = parse_action(self.rule.act(obs))
            self.turns.append(f"(invalid reply: {e}; the rule agent acted instead: {action.model_dump_json()})")
            return action.model_dump()
        if isinstance(action, Repair) and not action.patch and not action.edits and action.plan and self.patch_engine:
            action = action.model_copy(update={"patch": self.write_patch(action)})
        self.turns.append(f"You: {action.model_dump_json()[:500]}")
        return action.model_dump()

    def write_patch(self, action: Repair) -> str:
        """The patch model's diff for a plan over the working memory."""
        prompt = f"{PATCH_PROMPT}\n\nCode:\n{self.memory_text}\n\nTarget: {action.target}\nPlan: {action.plan}\n"
        text = self.patch_engine.generate([prompt], self.params)[0][0].text
        start = text.find("--- ")
        return text[start:] if start >= 0 else text
