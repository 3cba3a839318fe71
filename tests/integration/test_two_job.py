"""Two-job mode: a planner flow run and an actor flow run meet at the orchestrator on one Ray cluster."""

from __future__ import annotations

import time

import pytest

from .conftest import SMOKE, cli_env, kill_tree, read_state, run_cli, start_cli

# Clusters from `ray start` (Ray 2.60) require token auth from drivers that connect by ip:port.
ENV = cli_env(RAY_AUTH_MODE="token")


def _args(tmp_path, ray_head, run, role, *extra):
    return ["--config", SMOKE, "--set", f"checkpoint.root={tmp_path}", "--set", f"run_name={run}",
            "--set", f"agent_role={role}", "--set", f"ray.address={ray_head}", *(x for e in extra for x in ("--set", e))]


@pytest.mark.slow
def test_planner_and_actor_jobs_meet_and_both_train(prefect_api, ray_head, tmp_path):
    planner = start_cli(_args(tmp_path, ray_head, "two", "planner", "barrier.timeout_s=300"), tmp_path / "p.log", env=ENV)
    time.sleep(2)  # the actor job may start later: the barrier waits
    actor = start_cli(_args(tmp_path, ray_head, "two", "actor", "barrier.timeout_s=300"), tmp_path / "a.log", env=ENV)
    try:
        assert planner.wait(timeout=480) == 0, (tmp_path / "p.log").read_text()[-3000:]
        assert actor.wait(timeout=480) == 0, (tmp_path / "a.log").read_text()[-3000:]
    finally:
        kill_tree(planner.pid)
        kill_tree(actor.pid)
    ps, as_ = read_state(tmp_path / "two", "planner"), read_state(tmp_path / "two", "actor")
    assert ps["last_completed_round"] == 2 and as_["last_completed_round"] == 2
    assert ps["mlflow_run_id"] != as_["mlflow_run_id"]  # one MLflow run per flow run
    for row in ps["table"] + as_["table"]:
        assert row["fallback"] == 0.0  # every round met at the barrier
    assert all(row["planner/loss"] is not None for row in ps["table"])  # planner trained on the actor's feedback
    assert all(row["actor/reward_mean"] is not None for row in as_["table"])
    assert (tmp_path / "two" / "checkpoints" / "round_00002" / "planner").is_dir()
    assert (tmp_path / "two" / "checkpoints" / "round_00002" / "actor").is_dir()


@pytest.mark.slow
def test_absent_partner_times_out_into_fallback_or_failure(prefect_api, ray_head, tmp_path):
    # Actor job alone: no plans arrive; with fallback it executes without a plan and tags the rounds.
    rc, out = run_cli(_args(tmp_path, ray_head, "alone-a", "actor", "barrier.timeout_s=2"), tmp_path / "a.log", env=ENV)
    assert rc == 0, out[-3000:]
    assert [r["fallback"] for r in read_state(tmp_path / "alone-a", "actor")["table"]] == [1.0, 1.0]

    # Planner job alone: the actor's feedback never arrives; with fallback the rounds are tagged, planner untrained.
    rc, out = run_cli(_args(tmp_path, ray_head, "alone-p", "planner", "barrier.timeout_s=2"), tmp_path / "p.log", env=ENV)
    assert rc == 0, out[-3000:]
    assert [r["fallback"] for r in read_state(tmp_path / "alone-p", "planner")["table"]] == [1.0, 1.0]

    # Fallback off: the round fails with a barrier timeout.
    rc, out = run_cli(_args(tmp_path, ray_head, "alone-f", "actor", "barrier.timeout_s=2",
                            "barrier.fallback_on_timeout=false"), tmp_path / "f.log", env=ENV)
    assert rc != 0 and "BarrierTimeout" in out
