"""The run controller's order of steps, with the session's real bookkeeping (state file, round table, checkpoint
and evaluation schedule) and stages that record what they were asked to do (no Ray, no Prefect, no models).

What a user would notice: a checkpoint or a held-out evaluation at the wrong round, a resume that warms up
again or replays finished rounds, a failed run left "running" in MLflow."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest

from planact.config import load_config
from planact.controller import RunController
from planact.session import TrainingSession
from planact.storage import RunState


class _Tracker:
    uri, run_id = "file:///nowhere", "run-1"

    def __init__(self):
        self.metrics, self.status = [], None

    def log_metrics(self, metrics, step):
        self.metrics.append((step, dict(metrics)))

    def logged_steps(self, key):
        return [s for s, m in self.metrics if key in m]

    def finish(self, status):
        self.status = status

    def set_tags(self, tags):
        pass

    def log_table(self, rows, name):
        pass

    def log_artifact(self, path, where=None):
        pass

    def run_url(self):
        return "http://mlflow/run-1"


class _Stages:
    """Records each step; round r's success is r / 10."""

    preload = ()

    def __init__(self, fail_at_round: int | None = None):
        self.calls, self.fail_at_round = [], fail_at_round

    def agents_progress(self):
        return None

    def warm_start(self, groups, seed, files):
        self.calls.append(("warm_start", sorted(g.role for g in groups)))
        return {g.role: [{"step": 1, "loss": 1.0}] for g in groups}

    def checkpoint(self, r, groups, folder, versions):
        self.calls.append(("checkpoint", r))
        return folder

    def evaluate(self, r, planner, actor):
        self.calls.append(("evaluate", r))
        return {"pass@1": 0.5 + r / 100}

    def rounds(self, planner, actor, pool, incarnation):
        stages = self

        class Driver:
            def play(self, r):
                if r == stages.fail_at_round:
                    raise RuntimeError(f"round {r} failed")
                stages.calls.append(("round", r))
                yield {"round": r, "metrics": {"success": r / 10, "time/round_s": 1.0}}

            def drain(self):
                return iter(())

        return Driver()

    def register(self, uri, run_id, folder, round_idx, heldout, roles):
        self.calls.append(("register", round_idx))
        return {role: 1 for role in roles}

    def publish(self, markdown, key):
        self.calls.append(("publish", key))


def _controller(tmp_path, stages, *overrides) -> RunController:
    cfg = load_config(
        "configs/smoke.yaml",
        [f"checkpoint.root={tmp_path}", "run_name=ctl", "rounds=5", "checkpoint.every=2", "tracking.eval_every=4"]
        + list(overrides),
    )
    session = TrainingSession.__new__(TrainingSession)  # its bookkeeping, without Ray or MLflow behind it
    groups = {r: SimpleNamespace(role=r, trainer=f"{r}-trainer", engines=[]) for r in ("planner", "actor")}
    session.__dict__.update(
        cfg=cfg,
        run_dir=cfg.run_dir(),
        state=RunState(cfg.run_dir()),
        roles=["planner", "actor"],
        tracker=_Tracker(),
        experience=None,
        incarnation="i",
        pending=[],
        rollouts=[],
        evals={},
        _round_s=[],
        role_groups=[],
        registered={},
        weight_versions={},
        owns_ray=False,
        _beating=threading.Event(),
    )
    session.run_dir.mkdir(parents=True, exist_ok=True)
    session.ensure_agents = lambda preload=(), progress=None: (groups["planner"], groups["actor"])
    session.restore = lambda planner, actor: session.state.data["last_completed_round"]
    controller = RunController.__new__(RunController)
    controller.cfg, controller.stages, controller.session = cfg, stages, session
    return controller


def test_a_fresh_run_warms_up_then_checkpoints_and_evaluates_on_schedule(tmp_path):
    stages = _Stages()
    run = _controller(tmp_path, stages, "tracking.register_models=true")
    summary = run.run()
    assert stages.calls == [
        ("warm_start", ["actor", "planner"]),
        ("checkpoint", 0),
        ("evaluate", 0),
        ("round", 1),
        ("round", 2),
        ("checkpoint", 2),
        ("round", 3),
        ("round", 4),
        ("checkpoint", 4),
        ("evaluate", 4),
        ("round", 5),
        ("checkpoint", 5),  # the last round is always checkpointed and evaluated
        ("evaluate", 5),
        ("register", 5),
        ("publish", "planact-ctl-both"),
    ]
    state = RunState(run.session.run_dir).data
    assert state["last_completed_round"] == 5 and [row["round"] for row in state["table"]] == [1, 2, 3, 4, 5]
    assert run.session.tracker.status == "FINISHED"
    assert summary["rounds_completed"] == 5 and summary["delta/pass@1"] == pytest.approx(0.05)
    # Each round's metrics reach MLflow once, at its own step, when its checkpoint made it durable.
    assert run.session.tracker.logged_steps("time/round_s") == [1, 2, 3, 4, 5]


def test_a_resumed_run_restores_and_plays_only_the_rounds_after_its_checkpoint(tmp_path):
    first = _Stages(fail_at_round=4)
    with pytest.raises(RuntimeError, match="round 4 failed"):
        _controller(tmp_path, first).run()
    killed = RunState(tmp_path / "ctl").data
    # Round 3 ran but its checkpoint (every 2 rounds) never came: the run resumes after round 2.
    assert killed["last_completed_round"] == 2 and [r["round"] for r in killed["table"]] == [1, 2]

    again = _Stages()
    run = _controller(tmp_path, again)
    run.run()
    assert ("warm_start", ["actor", "planner"]) not in again.calls and ("checkpoint", 0) not in again.calls
    assert [c for c in again.calls if c[0] == "round"] == [("round", 3), ("round", 4), ("round", 5)]
    assert [r["round"] for r in RunState(tmp_path / "ctl").data["table"]] == [1, 2, 3, 4, 5]


def test_a_failing_round_marks_the_mlflow_run_failed(tmp_path):
    run = _controller(tmp_path, _Stages(fail_at_round=1))
    with pytest.raises(RuntimeError):
        run.run()
    assert run.session.tracker.status == "FAILED"
