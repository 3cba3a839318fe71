"""Two-job mode when the partner never comes: barrier timeouts into fallback rounds (with fallback off, a
BarrierTimeout: tests/unit/test_orchestrator.py drives the barrier task with such a run's config).

(The two jobs meeting is tested through their deployments: test_deployments.py.)
"""

from __future__ import annotations

import pytest

from .conftest import SMOKE, kill_tree, read_state, start_cli, token_env


def _args(tmp_path, ray_head, run, role, *extra):
    return [
        "--config",
        SMOKE,
        "--set",
        f"checkpoint.root={tmp_path}",
        "--set",
        f"run_name={run}",
        "--set",
        f"agent_role={role}",
        "--set",
        f"ray.address={ray_head}",
        *(x for e in extra for x in ("--set", e)),
    ]


@pytest.mark.slow
def test_absent_partner_times_out_into_fallback_rounds(prefect_api, ray_head, tmp_path):
    # Two independent runs at once (each waits on a partner that never comes): actor alone with fallback
    # executes without a plan and tags the rounds; planner alone with fallback tags its round and stays
    # untrained. (With fallback off the round fails with a BarrierTimeout: the barrier task's own test in
    # tests/unit/test_orchestrator.py, which drives it with the run's config; a third run here until 2026-12-01.)
    jobs = {
        # (pipelined: the actor job's fallback rounds overlap its training too)
        "alone-a": _args(
            tmp_path,
            ray_head,
            "alone-a",
            "actor",
            "barrier.timeout_s=2",
            "pipeline.max_staleness=1",
            "actor.resources.colocate_trainer=false",
        ),
        "alone-p": _args(tmp_path, ray_head, "alone-p", "planner", "barrier.timeout_s=2", "rounds=1"),
    }
    procs = {run: start_cli(args, tmp_path / f"{run}.log", env=token_env()) for run, args in jobs.items()}
    try:
        codes = {run: p.wait(timeout=480) for run, p in procs.items()}
    finally:
        for p in procs.values():
            kill_tree(p.pid)
    logs = {run: (tmp_path / f"{run}.log").read_text() for run in jobs}
    assert codes["alone-a"] == 0, logs["alone-a"][-3000:]
    assert [r["fallback"] for r in read_state(tmp_path / "alone-a", "actor")["table"]] == [1.0, 1.0]
    assert codes["alone-p"] == 0, logs["alone-p"][-3000:]
    assert [r["fallback"] for r in read_state(tmp_path / "alone-p", "planner")["table"]] == [1.0]
