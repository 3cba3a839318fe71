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
