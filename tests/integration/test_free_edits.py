"""Free-form edits (env.repair.decoding: free) through the real judge: the sandbox's candidate path, the
patch check, real pytest with the target function in the call jail.

A reply is text a model wrote, judged only on a task with the call jail (graph_planner.provenance): the
minilib corpus here is built with `jail: true`. The positive control (a scripted model replying with each
task's gold fix in the format) scores 1; on the unjailed gadget task every reply, hostile or the gold one, is
unjudged and nothing runs (full-power forges on a jailed task: test_verdict_jail.py); replies from the OpenAI
and Anthropic engines come from loopback stand-ins of their HTTP APIs (tests/servers/loopback.py: no internet
here), the real SDKs on both sides of the wire.
"""

from __future__ import annotations

import json

import pytest

from graph_planner.free_edit import dedent, fence, gold_reply, task_target
from graph_planner.free_eval import engine_replies, evaluate_free
from graph_planner.judge import base_text
from graph_planner.tasks import load_tasks
from graph_planner.team import free
from graph_planner.team.evaluate import solve_rates
from planact.engine_config import AnthropicConfig, OpenAIConfig
from planact.engines.api import AnthropicEngine, OpenAIEngine
from planact.engines.base import Completion

from ..servers.loopback import anthropic_server, openai_server
from .gadget_package import FAMILIES, FORGE
from .repair_fixture import build_minilib, gadget_task


@pytest.fixture(scope="module")
def minilib(tmp_path_factory):
    # binop alone: the same three tasks (mean, window, scale; no comparison mutant of clamp is kept) from the
    # build the model-agent, attack and reach tests share, instead of a build of its own (~10 CPU-s) per session
    # (with the jail: its qualification runs once per session, each verdict then one jailed run instead of two)
    return build_minilib(tmp_path_factory.mktemp("free-minilib"), kinds=["binop"], jail=True)


@pytest.fixture(scope="module")
def gadgets(tmp_path_factory):
    """The verdict attacks' package (every gadget the check's holes used) and its `spread` task."""
    return gadget_task(tmp_path_factory.mktemp("free-gadgets"))


def test_the_scripted_gold_model_solves_every_task_and_a_wrong_reply_scores_0(minilib, tmp_path, capsys):
    from graph_planner.cli import main

    tasks = load_tasks(minilib)
    assert len(tasks) >= 3 and all(t.jail for t in tasks)
    out = tmp_path / "gold.json"
    assert (
        main(["evaluate", "--agent", "gold-free", "--tasks", str(minilib), "--workers", "2", "--json", str(out)]) == 0
    )
    printed = capsys.readouterr().out
    last = printed.strip().splitlines()[-1]
    n = len(tasks)
    assert last.startswith(f"solve rate 1.000 ({n}/{n})") and "malformed 0, refused 0, unjudged 0" in last
    # not silent while it decodes and judges: the replies, then each verdict, k of n
    assert f"free-form replies {n}/{n}" in printed and f"free-form edits judged {n}/{n} (solved)" in printed
    episodes = json.loads(out.read_text())["episodes"]
    assert all(r["resolved"] and r["malformed"] == r["refused"] == 0 for r in episodes), episodes

    def unchanged(ts, prompts):  # the buggy function sent back as it is: a well-formed reply, still wrong
        return [fence(task_target(t)[1]) for t in ts]

    results = evaluate_free(tasks, unchanged, workers=2, test_cpu_s=10)
    assert not any(r["resolved"] for r in results) and sum(r["malformed"] for r in results) == 0


def _body(task, body: str) -> str:
    """The buggy `spread` with `body` run first, written as a reply."""
    _, source = task_target(task)
    head, rest = source.split("\n", 1)
    return fence(head + "\n" + "".join(f"    {line}\n" for line in body.splitlines()) + rest)


# Beside the seven families of holes the verdict attacks use: the direct routes a model would try first.
DIRECT = {
    "exec via builtins": "EXEC = __builtins__['exec']",
    "__import__": "EXEC = __import__('builtins').exec",
    "open /proc/self": "open('/proc/self/environ').read()\nEXEC = print",
    "frames": "EXEC = sys._getframe(1).f_globals['__builtins__']['exec']",
    "exec a string": "exec('import os')\nEXEC = print",
}


def test_replies_on_a_task_without_the_jail_are_unjudged_and_nothing_runs(gadgets, tmp_path):
    """The gadget task has no call jail: no reply is asked for, hostile or the gold one, none is screened or
    run; each scores 0 as unjudged, counted apart from the solve rate."""
    from graph_planner.evaluate import summarize
    from graph_planner.provenance import UNJUDGED

    assert not gadgets.jail
    hostile = {**{f"family {k}": v for k, v in FAMILIES.items()}, **DIRECT}
    replies = [gold_reply(gadgets), *(_body(gadgets, hostile[n] + "\n" + FORGE) for n in sorted(hostile))]
    asked = []

    def replier(ts, ps):
        asked.extend(ps)
        return replies[: len(ts)]

    results = evaluate_free([gadgets] * len(replies), replier, workers=2, test_cpu_s=10, telemetry_dir=tmp_path)
    assert asked == [] and not list(tmp_path.iterdir())  # no prompt, no judgement, no test run
    for r in results:
        assert not r["resolved"] and r["unjudged"] == 1 and not r["judged"] and r["test_runs"] == 0, r
        assert r["refused"] == r["malformed"] == 0 and r["error"] == UNJUDGED, r
    summary = summarize(results)
    assert summary["unjudged"] == summary["tasks"] == len(replies) and summary["judged"] == 0


def test_malformed_replies_score_0_and_are_counted(minilib):
    tasks = load_tasks(minilib)[:3]
    # the target function returning a 1,000-term sum: it parses, but every recursive walk of it overflowed
    # Python's stack (review 21: a RecursionError out of the patch check ended the whole evaluation)
    head = dedent(task_target(tasks[0])[1]).split("\n", 1)[0]
    deep = fence(f"{head}\n    return {'1 + ' * 999}1\n")
    wrong = ["no code at all", "```python\nimport os\n```", "```python\ndef other(x):\n    return x\n```", deep]
    results = evaluate_free([*tasks, tasks[0]], lambda ts, ps: wrong, workers=1, test_cpu_s=10)
    assert [r["malformed"] for r in results] == [1, 1, 1, 1] and not any(r["resolved"] for r in results)
    assert "no closed ```python code block" in results[0]["error"] and "defines 'other'" in results[2]["error"]
    assert "nested deeper than" in results[3]["error"]


def _served(tasks, prompts_seen):
    """A stand-in model: the gold reply to the first task's prompt, prose without code to the others."""
    gold = {task_target(t)[0].split("::")[1]: gold_reply(t) for t in tasks[:1]}

    def answer(prompt, n, body):
        prompts_seen.append(prompt)
        reply = next((g for name, g in gold.items() if f"The function to fix, {name} " in prompt), "I cannot.")
        return [(f"Here is the corrected function:\n{reply}", "stop", [])] * n

    return answer


@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_openai_and_anthropic_engines_drive_a_free_form_reply_end_to_end(minilib, api, monkeypatch):
    tasks = load_tasks(minilib)[:2]
    seen: list[str] = []
    if api == "openai":
        with openai_server(_served(tasks, seen), key=None) as srv:
            engine = OpenAIEngine(
                OpenAIConfig(base_url=srv.url + "/v1", model="stand-in", api_key_env="", max_retries=0)
            )
            results = evaluate_free(tasks, engine_replies(engine, 512), test_cpu_s=10)
    else:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
        with anthropic_server(_served(tasks, seen)) as srv:
            engine = AnthropicEngine(AnthropicConfig(base_url=srv.url, model="stand-in", max_retries=0))
            results = evaluate_free(tasks, engine_replies(engine, 512), test_cpu_s=10)
    assert [r["resolved"] for r in results] == [True, False] and [r["malformed"] for r in results] == [0, 1]
    # each task's prompt (sent concurrently) holds its failing tests' output, its function and the format
    assert len(seen) == 2
    for task in tasks:
        source = task_target(task)[1]
        (prompt,) = [p for p in seen if f"```python\n{dedent(source).rstrip()}\n```" in p]
        assert task.fail_to_pass[0] in prompt and "```python code block" in prompt
        assert base_text(task, task.meta["file"]).count(source) == 1


def test_the_repair_team_scores_free_replies_and_counts_malformed_and_refused(minilib, tmp_path):
    """env.repair.decoding free: the round's actor answers are texts; a gold reply earns 1, a malformed and
    a refused one 0, and the round's metrics count them (actor/malformed, actor/refused). Its corpus passes
    the preflight (jailed training tasks); the same rows without the jail fail it, naming the field."""
    from planact.config import validate_config
    from planact.config_base import ConfigError
    from planact.envs.base import make_env

    train = tmp_path / "corpus"
    train.mkdir()
    for p in minilib.iterdir():  # the same tasks, as training tasks: the team trains on its train split
        (train / p.name).symlink_to(p)
    (train / "heldout.jsonl").unlink()
    rows = [json.loads(line) for line in (minilib / "heldout.jsonl").read_text().splitlines() if line.strip()]
    (train / "train.jsonl").write_text("".join(json.dumps({**r, "split": "train"}) + "\n" for r in rows))
    cfg = validate_config(
        {
            "checkpoint": {"root": str(tmp_path)},
            "env": {
                "kind": "repair",
                "tasks_per_round": 1,
                "repair": {
                    "corpus": str(train),
                    "decoding": "free",
                    "kinds": ["binop", "comparison"],
                    "unseen_function_frac": 0.0,
                    "workers": 2,
                },
            },
            "actor": {"engine": "openai", "train": False, "sampling": {"max_new_tokens": 512}},
        }
    )
    bare = tmp_path / "bare"  # the same tasks, none qualified: a free run must not start on them
    bare.mkdir()
    (bare / "train.jsonl").write_text(
        "".join(
            json.dumps({**r, "split": "train", "planact_env": {**r["planact_env"], "jail": None}}) + "\n" for r in rows
        )
    )
    with pytest.raises(ConfigError, match=r"decoding 'free'.*jail.*jail_qualify"):
        cfg.env.repair.model_copy(update={"corpus": str(bare)}).preflight(cfg)
    cfg.env.repair.preflight(cfg)
    env = make_env(cfg)
    assert env.actor_method == "generate" and env.left_out == {}
    tid = next(i for i in env.split["train"] if env.ctx[i].target_rank >= 0)
    task, target = env.tasks[tid], env.ctx[tid].target
    turn = Completion([1], [2], [-0.1], " repair 1", "stop", 0)
    plans = [[{"task_id": tid, "read": [target], "turns": [{"obs": "o", "completion": turn}], "target": target}]]
    (prompt,) = env.actor_requests([{"task_id": tid}], plans)
    assert isinstance(prompt, str) and "```python" in prompt
    replies = [gold_reply(task), "no block", _resigned(env, tid)]
    answers = [[Completion([1], [2], [-0.1], text, "stop", 0) for text in replies]]
    res = env.score([{"task_id": tid}], plans, answers)
    assert [s["reward"] for s in res.actor_samples] == [1.0, 0.0, 0.0]
    assert res.metrics["actor/malformed"] == 1.0 and res.metrics["actor/refused"] == 1.0
    assert res.metrics["sandbox/unjudged"] == 0.0
    assert res.metrics["success"] == pytest.approx(1 / 3)
    assert [p for p, _ in env.demonstrations("actor", 2, __import__("random").Random(0))][0].startswith("A bug")
    # held-out evaluation's team: the greedy plan, then one greedy reply per task (here the gold one)
    first = [i for i in env.split["train"] if env.ctx[i].target_rank == 0]
    ids = [first[0], next(i for i in first if env.ctx[i].target != env.ctx[first[0]].target)]
    attempts, targets, malformed = free.team_order(env, ids, _Planner(), _Actor([gold_reply(env.tasks[ids[0]])]))
    assert targets == {i: env.ctx[i].target for i in ids} and malformed == 1 and attempts[ids[1]] == []
    assert solve_rates(env, attempts, 1) == {1: 0.5}  # the gold reply solves its task, the malformed one not


class _Planner:
    """A scripted planner: reads the top-ranked function, then repairs it."""

    def choose(self, requests, temperature=None, *, n, seed=None):
        out = []
        for _, options in requests:
            k = options.index(" repair 1") if " repair 1" in options else options.index(" read 1")
            out.append([Completion([1], [2], [-0.1], options[k], "stop", 0, {"choice": k})] * n)
        return out


class _Actor:
    """A scripted patch model: a reply to the prompt that shows the function it defines, else prose."""

    def __init__(self, replies):
        self.replies = replies

    def generate(self, prompts, temperature=None, *, n, seed=None):
        texts = [next((r for r in self.replies if _shows(p, r)), "no code") for p in prompts]
        return [[Completion([1], [2], [-0.1], t, "stop", 0)] * n for t in texts]


def _shows(prompt: str, reply: str) -> bool:
    """The prompt is about the function the reply defines (its def line)."""
    return reply.split("\n")[1].split("(")[0] in prompt


def _resigned(env, tid) -> str:
    """The target with a parameter added: on a jailed task the check judges structure alone, and refuses it."""
    view = env._view(tid, env.ctx[tid].target)
    head, rest = view.source.split("\n", 1)
    return fence(head.replace("):", ", hook=print):", 1) + "\n" + rest)
