"""The model agent against a loopback stand-in of the OpenAI chat API (the real one needs the internet):
valid actions are taken, malformed JSON and invalid actions fall back to the rule agent and are counted,
and a patch-model engine writes the diff when the planner sends only a plan."""

from __future__ import annotations

import itertools
import json

import pytest

from graph_planner.agents import run_episode
from graph_planner.agents.model import ModelAgent
from graph_planner.env import EnvLimits, PlannerEnv
from graph_planner.evaluate import run_slot, summarize
from graph_planner.tasks import load_tasks
from planact.engine_config import OpenAIConfig
from planact.engines.api import OpenAIEngine

from ..servers.loopback import openai_server
from .repair_fixture import build_minilib


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return build_minilib(tmp_path_factory.mktemp("model-agent"), kinds=["binop"])


def _engine(url: str) -> OpenAIEngine:
    return OpenAIEngine(OpenAIConfig(base_url=url + "/v1", model="stand-in", api_key_env="", max_retries=0))


def test_valid_malformed_and_invalid_replies(corpus):
    replies = itertools.cycle(
        [
            '{"type": "explore", "op": "find", "anchors": ["mean"]}',
            "I think the bug is in mean {not json",
            '{"type": "explore", "op": "teleport", "anchors": []}',
            '```json\n{"type": "memory", "ops": [{"op": "add", "node": "minilib/core.py::mean"}]}\n```',
        ]
    )
    seen = []

    def answer(prompt, n, body):
        seen.append(prompt)
        return [(next(replies), "stop", [])] * n

    tasks = load_tasks(corpus)[:2]
    with openai_server(answer, key=None) as server:
        results = run_slot(tasks, "model", EnvLimits(steps=8, test_cpu_s=10), engine=_engine(server.url))
    summary = summarize(results)
    assert summary["tasks"] == 2 and all(r["steps"] == 8 for r in results)  # the episodes ran to their budget
    assert summary["fallbacks"] == 8  # 2 bad replies in every 4: 4 of 8 steps, in each of 2 episodes
    assert summary["malformed"] == 0  # a fallback action is valid: nothing malformed reached the env
    assert "minilib/core.py" in seen[1]  # the model read the find results in its next prompt


def test_patch_model_writes_the_diff_for_the_planners_plan(corpus, tmp_path):
    task = next(t for t in load_tasks(corpus) if t.meta["function"] == "mean")
    plan = {"type": "repair", "apply": True, "target": "minilib/core.py::mean", "plan": "undo the operator change"}
    planner_replies = iter(
        [
            json.dumps({"type": "memory", "ops": [{"op": "add", "node": "minilib/core.py::mean"}]}),
            json.dumps(plan),
            '{"type": "submit"}',
        ]
    )
    prompts = []

    def planner(prompt, n, body):
        return [(next(planner_replies), "stop", [])]

    def patcher(prompt, n, body):
        prompts.append(prompt)
        return [("Here is the fix:\n" + task.gold_patch, "stop", [])]

    env = PlannerEnv(limits=EnvLimits(test_cpu_s=10), telemetry=tmp_path / "t.jsonl")
    try:
        with openai_server(planner, key=None) as p, openai_server(patcher, key=None) as q:
            agent = ModelAgent(_engine(p.url), patch_engine=_engine(q.url))
            stats = run_episode(env, task, agent)
    finally:
        env.runtime.close()
    assert stats["resolved"] and agent.fallbacks == 0
    assert "minilib/core.py::mean" in prompts[0] and "undo the operator change" in prompts[0]  # memory + plan
