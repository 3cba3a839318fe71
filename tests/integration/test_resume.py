"""SIGKILL a (pipelined) training run after round k completed; the same command resumes at k+1 in the same MLflow run.

The actor is frozen (`actor.train: false`) here, so the same two runs also show that a frozen role is
skipped by training and stays frozen across a resume; the planner trains in a group of two sharded ranks
(FSDP2), so they also show a trainer group restored from a checkpoint. (Two ranks against one process,
data-parallel and sharded, and a killed rank: test_trainer_group.py.)
"""

from __future__ import annotations

import os
import re
import signal
import time

import psutil
import pytest
from mlflow.tracking import MlflowClient

from planact.experience import ExperienceStore

from .conftest import read_state, run_cli, smoke_args, start_cli


@pytest.mark.slow
def test_sigkill_then_resume_without_duplicate_steps(prefect_api, tmp_path):
    args = smoke_args(
        tmp_path,
        "run_name=resume",
        "rounds=6",
        "actor.train=false",
        # Pipelined rounds (the planner trains in its own actor while the next round generates): a kill
        # lands with a round generated and recorded but its predecessor's training not yet finished.
        "pipeline.max_staleness=1",
        "planner.resources.colocate_trainer=false",
        "planner.resources.trainer_workers=2",
        "planner.resources.fsdp=true",
        "ray.num_cpus=4",
    )
    proc = start_cli(args, tmp_path / "first.log")
    deadline = time.time() + 400
    k = -1
    while time.time() < deadline and proc.poll() is None:
        k = read_state(tmp_path / "resume").get("last_completed_round", -1)
        if k >= 2:
            break
        time.sleep(0.2)
    assert proc.poll() is None, (
        "the run finished before it could be killed: " + (tmp_path / "first.log").read_text()[-2000:]
    )
    # SIGKILL of the driver alone (as the OOM killer does): no cleanup handlers run, and what it started must
    # not outlive it: Ray's daemons share its fate, its agents and workers are removed by planact.reaper.
    started = {p.pid for p in psutil.Process(proc.pid).children(recursive=True)}
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    deadline = time.time() + 20
    while (
        left := [pid for pid in started if psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie"]
    ) and time.time() < deadline:
        time.sleep(0.5)
    assert not left, [" ".join(psutil.Process(pid).cmdline())[:60] for pid in left if psutil.pid_exists(pid)]
    state = read_state(tmp_path / "resume")
    k = state["last_completed_round"]
    assert 2 <= k < 6
    run_id = state["mlflow_run_id"]

    # Resume guard: a changed model spec is refused before any work, naming the field; nothing moves.
    rc, out = run_cli(args + ["--set", "planner.tiny.num_layers=3"], tmp_path / "refused.log")
    assert rc == 2 and "planner.tiny.num_layers: 2 -> 3" in out and "Traceback" not in out, out[-2000:]
    assert read_state(tmp_path / "resume") == state

    # A safe change (evaluation cadence) is allowed and reported.
    rc, out = run_cli(args + ["--set", "tracking.eval_every=2"], tmp_path / "second.log")
    assert rc == 0, out[-3000:]
    assert "resuming with changed settings (allowed): tracking.eval_every: 1 -> 2" in out
    m = re.search(r"resuming run 'resume' after round (\d+)", out)
    assert m and int(m.group(1)) == k
    assert f"round {k + 1}/6" in out and f"round {k}/6" not in out  # resumes at k+1, completed rounds not re-run
    assert "actor is frozen (train: false): skipping its training this round" in out

    state = read_state(tmp_path / "resume")
    assert state["mlflow_run_id"] == run_id and state["last_completed_round"] == 6
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    for key in ("time/round_s", "actor/reward_mean", "planner/loss"):  # (no actor/loss: the actor is frozen)
        steps = [x.step for x in client.get_metric_history(run_id, key)]
        assert sorted(steps) == [1, 2, 3, 4, 5, 6], (key, steps)  # every round once: no gaps, no duplicates
    assert client.get_run(run_id).info.status == "FINISHED"
    table = read_state(tmp_path / "resume")["table"]
    assert [r["round"] for r in table] == [1, 2, 3, 4, 5, 6]
    assert all(r["actor/loss"] is None and r["planner/loss"] is not None for r in table)  # frozen stays frozen
    # Both runs trained the planner in its two ranks, each holding half of its parameters.
    assert {m.value for m in client.get_metric_history(run_id, "planner/trainer_workers")} == {2.0}
    assert {round(m.value, 1) for m in client.get_metric_history(run_id, "planner/param_share")} == {0.5}
    # Acknowledged experience of the rounds before the kill is still there.
    pool = ExperienceStore(tmp_path / "resume" / "experience")
    assert all(pool.query(run="resume", round=r, role="actor") for r in range(1, 7))
    stats = pool.stats()
    assert stats["rounds"] == 6 and stats["torn_lines"] == 0  # a re-run round replaced its items, none lost
