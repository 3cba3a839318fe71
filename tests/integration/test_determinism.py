"""Same seed, same machine: a Plan/Act run repeated gives bit-identical metric histories.

Two runs of the smoke config (two actor engine replicas, so generation fans out over Ray) in separate
folders, at the same time; every metric except wall-clock timings must match exactly, step by step, and so must the
rollouts each round logged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from .conftest import cli_env, kill_tree, read_state, smoke_args, start_cli


def _timing(key: str) -> bool:
    """Wall-clock figures (seconds, rates) differ run to run by nature."""
    return key.startswith("time/") or key.endswith(("_s", "per_s", "_seconds"))


def _history(root, run_name: str) -> tuple[dict, list]:
    state = read_state(root / run_name)
    client = MlflowClient(f"sqlite:///{root / 'mlflow.db'}")
    run = client.get_run(state["mlflow_run_id"])
    metrics = {
        k: [(m.step, m.value) for m in sorted(client.get_metric_history(run.info.run_id, k), key=lambda m: m.step)]
        for k in run.data.metrics
        if not _timing(k)
    }
    rollouts = json.loads(Path(client.download_artifacts(run.info.run_id, "rollouts.json", str(root))).read_text())
    return metrics, rollouts


@pytest.mark.slow
def test_same_seed_twice_gives_identical_metric_histories(prefect_api, tmp_path):
    # Side by side (each run mostly waits on its start-up): also shows two runs do not disturb each other.
    procs = {
        k: start_cli(
            smoke_args(tmp_path / f"run{k}", "run_name=det", "actor.resources.replicas=2"),
            tmp_path / f"run{k}.log",
            env=cli_env(),
        )
        for k in (1, 2)
    }
    histories = []
    for k, proc in procs.items():
        try:
            rc = proc.wait(timeout=600)
        finally:
            kill_tree(proc.pid)
        assert rc == 0, (tmp_path / f"run{k}.log").read_text()[-3000:]
        histories.append(_history(tmp_path / f"run{k}", "det"))
    (m1, r1), (m2, r2) = histories
    assert len(m1) >= 30 and "heldout/pass_at_1" in m1 and "actor/loss" in m1  # losses, rewards, held-out figures
    assert m1 == m2, sorted(k for k in m1 if m1[k] != m2.get(k))
    assert r1 and r1 == r2  # the logged rollouts: same prompts, same sampled texts
