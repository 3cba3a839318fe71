"""The barrier's rules, exercised on the plain class (the Ray actor wraps the same code)."""

import asyncio

import pytest

from planact.orchestrator import BarrierTimeout, PlanActOrchestrator, resolve_barrier


def run(coro):
    return asyncio.run(coro)


def test_released_once_when_both_roles_arrive():
    async def go():
        o = PlanActOrchestrator()
        a = asyncio.create_task(o.arrive("r/1/plans", "actor", None, timeout_s=5))
        await asyncio.sleep(0.05)
        b = await o.arrive("r/1/plans", "planner", ["plan"], timeout_s=5)
        a = await a
        return o, a, b

    o, a, b = run(go())
    assert a["status"] == b["status"] == "complete"
    assert a["payloads"]["planner"] == ["plan"]
    assert o.info("r/1/plans")["releases"] == 1


def test_timeout_falls_back_or_fails():
    async def go(fallback):
        o = PlanActOrchestrator()
        res = await o.arrive("r/2/plans", "actor", None, timeout_s=0.1, fallback=fallback)
        late = await o.arrive("r/2/plans", "planner", ["late"], timeout_s=5)
        return o, res, late

    o, res, late = run(go(True))
    assert res["status"] == "fallback" and late["status"] == "fallback"  # the late planner learns it missed
    assert "planner" not in res["payloads"] and o.info("r/2/plans")["releases"] == 1
    _, res, _ = run(go(False))
    with pytest.raises(BarrierTimeout, match="timed out"):
        resolve_barrier(res)


def test_a_rerun_round_gets_the_new_incarnations_payload():
    async def go():
        o = PlanActOrchestrator()
        first = asyncio.gather(
            o.arrive("r/3/plans", "planner", ["old"], timeout_s=5, incarnation="A"),
            o.arrive("r/3/plans", "actor", None, timeout_s=5, incarnation="A"),
        )
        await first
        # The run was killed after round 3's barrier and resumed (incarnation B): round 3 runs again.
        again = await asyncio.gather(
            o.arrive("r/3/plans", "planner", ["new"], timeout_s=5, incarnation="B"),
            o.arrive("r/3/plans", "actor", None, timeout_s=5, incarnation="B"),
        )
        return again

    planner, actor = run(go())
    assert actor["status"] == "complete" and actor["payloads"]["planner"] == ["new"]  # used to return ["old"]


def test_a_dead_partner_is_detected_within_seconds_not_at_the_timeout():
    import time

    async def go():
        o = PlanActOrchestrator()
        o.heartbeat("r", "planner")  # the planner job was alive ... and then died (no more heartbeats)
        t0 = time.monotonic()
        res = await o.arrive("r/4/plans", "actor", None, timeout_s=1800, liveness_s=1.5)
        return res, time.monotonic() - t0

    res, waited = run(go())
    assert res["status"] == "fallback" and res["dead"] == ["planner"]
    assert waited < 5  # not 1800 s


def test_a_late_arrival_after_pruning_gets_the_same_outcome():
    async def go():
        o = PlanActOrchestrator(keep_rounds=1)
        res = await o.arrive("r/1/plans", "actor", None, timeout_s=0.05)  # released as fallback
        for i in range(2, 10):  # later rounds push round 1's payloads out
            await asyncio.gather(
                o.arrive(f"r/{i}/plans", "planner", [i], timeout_s=5),
                o.arrive(f"r/{i}/plans", "actor", None, timeout_s=5),
            )
        late = await o.arrive("r/1/plans", "planner", ["late"], timeout_s=0.5)
        return o, res, late

    o, res, late = run(go())
    assert o.info("r/1/plans") is None  # pruned
    assert res["status"] == late["status"] == "fallback"  # one key, one outcome (it used to wait and re-release)


def test_barrier_records_survive_an_orchestrator_restart(tmp_path):
    state = str(tmp_path / "orch.pkl")

    async def first():
        o = PlanActOrchestrator(state_path=state)
        await asyncio.gather(
            o.arrive("r/5/plans", "planner", ["p"], timeout_s=5), o.arrive("r/5/plans", "actor", None, timeout_s=5)
        )

    async def second():
        return await PlanActOrchestrator(state_path=state).arrive("r/5/plans", "actor", None, timeout_s=5)

    run(first())
    res = run(second())  # a new actor process restored from the state file
    assert res["status"] == "complete" and res["payloads"]["planner"] == ["p"] and res["wait_s"] < 1


class _Handle:
    """A stand-in for the Ray handle of the orchestrator: `arrive.remote(...)` runs the plain class's method."""

    def __init__(self):
        self.orchestrator = PlanActOrchestrator()
        self.arrive = self
        self.calls = []

    def remote(self, *args):
        self.calls.append(args)
        return asyncio.run(self.orchestrator.arrive(*args))


@pytest.mark.parametrize("fallback", [True, False])
def test_the_barrier_task_passes_the_runs_fallback_setting_and_a_timeout_fails_the_round(
    fallback, monkeypatch, tmp_path
):
    """The run's `barrier.fallback_on_timeout` reaches the orchestrator: an absent partner is a fallback round, or
    (off) a BarrierTimeout out of the round's barrier task, which fails the run. (A whole two-job run with an
    absent partner and fallback on: tests/integration/test_two_job.py.)"""
    import ray

    import tasks.plan_act as plan_act
    from planact.config import RunConfig

    handle = _Handle()
    monkeypatch.setattr(plan_act, "get_or_create_orchestrator", lambda *a: handle)
    monkeypatch.setattr(ray, "get", lambda refs: refs)
    cfg = RunConfig.model_validate(
        {
            "run_name": "alone",
            "agent_role": "actor",
            "checkpoint": {"root": str(tmp_path)},
            "barrier": {"timeout_s": 0.1, "fallback_on_timeout": fallback},
        }
    )
    if fallback:
        assert plan_act.barrier.fn(cfg, 1, "actor").data["status"] == "fallback"
    else:
        with pytest.raises(BarrierTimeout, match="timed out"):
            plan_act.barrier.fn(cfg, 1, "actor")
    (call,) = handle.calls
    assert call[0] == "alone/1/plans" and call[1] == "actor" and call[5] is fallback and call[4] == 0.1
