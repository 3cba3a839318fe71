"""No silent phase: a long phase (the held-out evaluation over N tasks, the warm start's steps) reports k of n
with an ETA to the callback its library function takes, and the task layer's callback prints the line."""

from __future__ import annotations

import time
from types import SimpleNamespace

from graph_planner.team.context import NodeView, TaskContext
from graph_planner.team.evaluate import evaluate_team
from planact.progress import FileProgress, PhaseUpdate, read_progress
from tasks.progress import task_progress

SRC = "def lo(a, b):\n    if a < b:\n        return a\n    return b\n"


class _Sandbox:
    """Judges every edit unsolved, a few milliseconds each (the real one runs the tests)."""

    def __init__(self):
        self.stats = {"test_runs": 0, "full_runs": 0, "cache_hits": 0, "tampering": 0, "unjudged": 0}

    def judge_many(self, jobs, mode, origin="model", on_judged=None):
        verdicts = []
        for _ in jobs:
            time.sleep(0.002)
            verdicts.append({"resolved": False})
            if on_judged is not None:
                on_judged(verdicts[-1])
        return verdicts


class _Actor:
    def choose(self, requests, **kwargs):
        return [[SimpleNamespace(meta={"ranking": [0]})] for _ in requests]


def _env(splits: dict[str, list[str]]):
    """The repair env's surface that evaluate_team reads: splits, contexts, the greedy plan, the sandbox."""
    ctx = {
        i: TaskContext(i, s, "m.py::lo", ["t::test_lo"], "", [NodeView("m.py::lo", "m.py", 1, SRC, [2])])
        for s, ids in splits.items()
        for i in ids
    }
    env = SimpleNamespace(
        r=SimpleNamespace(
            eval_unseen_functions=10,
            eval_unseen_packages=10,
            eval_unseen_2025=10,
            eval_real=10,
            eval_budget=2,
            proposals=0,
        ),
        cfg=SimpleNamespace(seed=0),
        split={"unseen_functions": [], "unseen_packages": [], "unseen_2025": [], **splits},
        ctx=ctx,
        # no repository behind them: the reachable share finds no gold fix (git fails), nothing else reads them
        tasks={
            i: SimpleNamespace(meta={"file": "m.py", "function": "lo"}, repo_dir="/nonexistent", base_commit="x")
            for i in ctx
        },
        sandbox=_Sandbox(),
        free=False,
    )
    env.plan = lambda batch, planner, seed, greedy: [[{"target": "m.py::lo"}] for _ in batch]
    env.actor_requests = lambda batch, plans: [("fix lo", ["a"]) for _ in batch]
    env._view = lambda i, target: ctx[i].nodes[0]
    return env


def test_the_held_out_evaluation_reports_k_of_n_with_an_eta_and_the_console_shows_it(capsys, monkeypatch):
    import graph_planner.team.evaluate as evaluate

    monkeypatch.setattr(evaluate, "EPISODE_BATCH", 2)  # a real split's 170 tasks report in batches, not at the end
    env = _env({"unseen_functions": ["a__1", "a__2", "b__1"], "unseen_packages": ["c__1", "c__2"]})
    seen: list[PhaseUpdate] = []
    console = task_progress("evaluate")  # what tasks/plan_act.py passes: the console line (+ Prefect artifact)

    def report(update: PhaseUpdate) -> None:
        seen.append(update)
        console(update)

    metrics = evaluate_team(env, None, _Actor(), progress=report)
    assert metrics["unseen_functions/tasks"] == 3.0 and metrics["unseen_packages/tasks"] == 2.0
    # First the team's episodes, task by task in batches (2 + 1 of one split, 2 of the other) ...
    episodes = [u for u in seen if u.what == "held-out evaluation: team episodes (5 tasks)"]
    assert [(u.done, u.total) for u in episodes] == [(0, 5), (2, 5), (3, 5), (5, 5)]
    assert episodes[2].note == "unseen_functions" and episodes[3].note == "unseen_packages"
    # ... then every edit judged, one by one: the team's one edit a task, the rule's and random's two each.
    judged = [u for u in seen if u.what.startswith("held-out evaluation: edits judged")]
    assert judged[0].what == "held-out evaluation: edits judged (25 edits, 5 tasks)"
    assert [u.done for u in judged] == list(range(26)) and {u.total for u in judged} == {25}
    assert len(seen) == len(episodes) + len(judged)
    for phase in (episodes, judged):
        assert phase[0].eta_s is None  # announced before anything finished: no estimate yet
        assert all(u.eta_s is not None and u.eta_s >= 0 for u in phase[1:]) and phase[-1].eta_s == 0
    assert judged[3].note == "unseen_functions: team" and judged[-1].note == "unseen_packages: random"
    out = capsys.readouterr().out
    assert "held-out evaluation: team episodes (5 tasks) 0/5, 0.0 min so far" in out  # named before it starts
    assert (
        "[####################] held-out evaluation: edits judged (25 edits, 5 tasks) 25/25 (unseen_packages: random)"
        in out
    )
    assert "| ETA 0.0 min" in out


def test_the_warm_start_reports_every_step_and_its_plateau(tiny_model_dir):
    from planact.config import WarmStartConfig
    from planact.models import load_model
    from planact.rl.sft import sft

    model, tok = load_model(tiny_model_dir)
    demos = [(tok.encode("sort 3 1 2 ="), tok.encode("1 2 3")) for _ in range(20)]
    seen: list[PhaseUpdate] = []
    sft(model, tok.pad_token_id, demos, WarmStartConfig(steps=5, batch_size=4), progress=seen.append, what="warm")
    assert [(u.done, u.total) for u in seen] == [(k, 5) for k in range(6)]
    assert all(u.eta_s is not None for u in seen[1:])
    # Stopped at the plateau (no 90% improvement after the first held-out check): the last line says so, 2 of 2.
    seen.clear()
    plateau = WarmStartConfig(steps=50, batch_size=4, patience=1, eval_every=1, heldout=8, min_delta=0.9)
    sft(model, tok.pad_token_id, demos, plateau, progress=seen.append, what="warm")
    assert (seen[-1].done, seen[-1].total, seen[-1].eta_s) == (2, 2, 0.0)
    assert seen[-1].note.startswith("plateau of the held-out loss")


def test_a_phase_inside_an_agent_reaches_the_waiting_task_through_its_file(tmp_path):
    path = tmp_path / "progress" / "warm-start-actor.json"
    write = FileProgress(path, every_s=60.0)
    write(PhaseUpdate("localisation contexts", 0, 40, 0.0, None))
    write(PhaseUpdate("localisation contexts", 1, 40, 3.0, 117.0))  # within every_s: not written
    assert read_progress(path) == PhaseUpdate("localisation contexts", 0, 40, 0.0, None)
    write(PhaseUpdate("localisation contexts", 40, 40, 120.0, 0.0))  # the last always is
    assert read_progress(path).done == 40 and read_progress(tmp_path / "none.json") is None


def test_a_long_phase_prints_a_bounded_number_of_lines_and_a_short_one_two(capsys):
    from planact.progress import PhasePrinter

    printer = PhasePrinter()
    for k in range(1001):  # a corpus's 1,000 localisation contexts over 50 minutes
        printer(PhaseUpdate("localisation contexts", k, 1000, 3.0 * k, 3.0 * (1000 - k) if k else None))
    lines = capsys.readouterr().out.splitlines()
    assert 10 <= len(lines) <= 22 and lines[0].endswith("localisation contexts 0/1000, 0.0 min so far")
    assert lines[-1].startswith("[####################] localisation contexts 1000/1000, 50.0 min so far")
    assert any(ln.endswith("localisation contexts 500/1000, 25.0 min so far | ETA 25.0 min") for ln in lines)
    for k in range(3):  # registering two roles in a second
        printer(PhaseUpdate("registration", k, 2, 0.4 * k, 0.4 * (2 - k) if k else None))
    assert len(capsys.readouterr().out.splitlines()) == 2
