"""PlanActOrchestrator: the per-(run, round) barrier where the planner and actor meet.

A named, detached Ray actor in an explicit namespace (create_orchestrator).
Each barrier key ("<run>/<round>/<phase>") records which roles arrived with
what payload and is released exactly once: when every expected role has
arrived ("complete"), or when a waiter's timeout passes first ("fallback" or
"failed", as configured). A role arriving after the release gets the recorded
outcome, so a late planner learns its plans were not used.
"""

from __future__ import annotations

import asyncio
import time

ORCHESTRATOR_NAME = "PlanActOrchestrator"


class BarrierTimeout(RuntimeError):
    """The barrier timed out and fallback is off."""


class PlanActOrchestrator:
    """Async barrier service; many waiters block concurrently without blocking the actor."""

    def __init__(self, keep_rounds: int = 8):
        self._barriers: dict[str, dict] = {}
        self._keep = keep_rounds

    async def arrive(self, key: str, role: str, payload=None, expected: tuple[str, ...] = ("planner", "actor"),
                     timeout_s: float = 1800.0, fallback: bool = True) -> dict:
        """Record `role` at barrier `key` and wait for its release; returns status, payloads and wait time."""
        t0 = time.monotonic()
        b = self._barriers.setdefault(key, {"arrived": {}, "event": asyncio.Event(), "status": None,
                                            "releases": 0, "created": time.time()})
        self._prune()
        if b["status"] is None:
            b["arrived"][role] = payload
            if set(expected) <= set(b["arrived"]):
                self._release(b, "complete")
        if b["status"] is None:
            try:
                await asyncio.wait_for(b["event"].wait(), timeout=timeout_s)
            except asyncio.TimeoutError:
                if b["status"] is None:
                    self._release(b, "fallback" if fallback else "failed")
        return {"status": b["status"], "payloads": dict(b["arrived"]), "wait_s": time.monotonic() - t0,
                "arrived": sorted(b["arrived"])}

    def _release(self, b: dict, status: str) -> None:
        b["status"] = status
        b["releases"] += 1
        b["event"].set()

    def _prune(self) -> None:
        # Payloads are whole rounds of plans: keep only the most recent barriers.
        if len(self._barriers) > self._keep * 4:
            for key in sorted(self._barriers, key=lambda k: self._barriers[k]["created"])[: -self._keep * 4]:
                if self._barriers[key]["status"] is not None:
                    del self._barriers[key]

    def info(self, key: str) -> dict | None:
        """Status, arrived roles and release count of a barrier (None if unknown)."""
        b = self._barriers.get(key)
        if b is None:
            return None
        return {"status": b["status"], "arrived": sorted(b["arrived"]), "releases": b["releases"]}

    def ping(self) -> str:
        """Liveness check."""
        return "ok"


def barrier_key(run_name: str, round_idx: int, phase: str) -> str:
    """Key of one barrier: a run's round and phase ('plans' or 'feedback')."""
    return f"{run_name}/{round_idx}/{phase}"


def get_or_create_orchestrator(namespace: str):
    """The detached orchestrator actor in `namespace` (created on first use by either role)."""
    import ray

    cls = ray.remote(PlanActOrchestrator)
    return cls.options(name=ORCHESTRATOR_NAME, namespace=namespace, lifetime="detached", get_if_exists=True,
                       max_concurrency=1000, num_cpus=0).remote()


def resolve_barrier(result: dict) -> dict:
    """Raise BarrierTimeout for a failed release; pass other outcomes through."""
    if result["status"] == "failed":
        raise BarrierTimeout(f"barrier timed out after {result['wait_s']:.1f}s; arrived: {result['arrived']}")
    return result
