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
import pickle
import time
from pathlib import Path

from planact import faults
from planact.storage import atomic_write

ORCHESTRATOR_NAME = "PlanActOrchestrator"


class BarrierTimeout(RuntimeError):
    """The barrier timed out and fallback is off."""


class PlanActOrchestrator:
    """Async barrier service; many waiters block concurrently without blocking the actor.

    Each role's arrival carries its incarnation (one per flow run): when a role arrives again at a
    key from a new incarnation (a round re-run after a crash), the old record is superseded and the
    new payload is the one released. Roles send heartbeats; a waiter whose missing partner has gone
    silent for `liveness_s` is released at once (fallback or failed) instead of at the timeout.
    Released outcomes outlive payload pruning, and with `state_path` the records survive a restart.
    """

    def __init__(self, keep_rounds: int = 8, state_path: str | None = None):
        self._barriers: dict[str, dict] = {}
        self._released: dict[str, dict] = {}  # key -> {status, arrived}: outcomes kept after payloads are pruned
        self._alive: dict[tuple[str, str], float] = {}
        self._keep = keep_rounds
        self._state_path = state_path
        self._load()

    def heartbeat(self, scope: str, role: str) -> None:
        """`role` of run `scope` is alive now."""
        self._alive[(scope, role)] = time.monotonic()

    async def arrive(
        self,
        key: str,
        role: str,
        payload=None,
        expected: tuple[str, ...] = ("planner", "actor"),
        timeout_s: float = 1800.0,
        fallback: bool = True,
        incarnation: str | None = None,
        liveness_s: float = 0.0,
    ) -> dict:
        """Record `role` at barrier `key` and wait for its release; returns status, payloads and wait time."""
        t0 = time.monotonic()
        scope = key.rsplit("/", 2)[0]
        self.heartbeat(scope, role)
        b = self._barriers.get(key)
        if b is None and key in self._released:  # released long ago, payloads pruned: the same outcome again
            old = self._released[key]
            return {"status": old["status"], "payloads": {}, "wait_s": 0.0, "arrived": old["arrived"], "pruned": True}
        if b is not None and incarnation is not None and b["incarnations"].get(role, incarnation) != incarnation:
            self._release(b, "superseded")  # waiters of the dead incarnation return; this arrival starts afresh
            b = None
        if b is None:
            b = self._barriers[key] = {
                "arrived": {},
                "incarnations": {},
                "event": asyncio.Event(),
                "status": None,
                "releases": 0,
                "created": time.time(),
                "dead": [],
            }
        self._prune()
        if b["status"] is None:
            b["arrived"][role] = payload
            b["incarnations"][role] = incarnation
            faults.point("orchestrator.mid_arrive")  # an arrival recorded in memory, the barrier not released
            if set(expected) <= set(b["arrived"]):
                self._release(b, "complete", key)
            else:
                self._save()
        deadline = t0 + timeout_s
        while b["status"] is None:
            step = min(1.0, max(0.0, deadline - time.monotonic()))
            try:
                await asyncio.wait_for(b["event"].wait(), timeout=step)
            except TimeoutError:
                dead = self._dead(scope, [r for r in expected if r not in b["arrived"]], liveness_s)
                if b["status"] is None and (dead or time.monotonic() >= deadline):
                    b["dead"] = dead
                    self._release(b, "fallback" if fallback else "failed", key)
        return {
            "status": b["status"],
            "payloads": dict(b["arrived"]),
            "wait_s": time.monotonic() - t0,
            "arrived": sorted(b["arrived"]),
            "dead": list(b["dead"]),
        }

    def _dead(self, scope: str, missing: list[str], liveness_s: float) -> list[str]:
        """Missing roles that were alive once and have been silent for longer than `liveness_s`."""
        if liveness_s <= 0:
            return []
        now = time.monotonic()
        return [r for r in missing if (scope, r) in self._alive and now - self._alive[(scope, r)] > liveness_s]

    def _release(self, b: dict, status: str, key: str | None = None) -> None:
        b["status"] = status
        b["releases"] += 1
        b["event"].set()
        if key is not None:
            self._released[key] = {"status": status, "arrived": sorted(b["arrived"])}
            self._save()

    def _prune(self) -> None:
        # Payloads are whole rounds of plans: keep only the most recent barriers (outcomes stay in _released).
        if len(self._barriers) > self._keep * 4:
            for key in sorted(self._barriers, key=lambda k: self._barriers[k]["created"])[: -self._keep * 4]:
                if self._barriers[key]["status"] is not None:
                    del self._barriers[key]

    def _save(self) -> None:
        if not self._state_path:
            return
        records = {
            k: {f: b[f] for f in ("arrived", "incarnations", "status", "releases", "created", "dead")}
            for k, b in self._barriers.items()
        }
        atomic_write(self._state_path, pickle.dumps({"barriers": records, "released": self._released}))

    def _load(self) -> None:
        if not self._state_path or not Path(self._state_path).is_file():
            return
        state = pickle.loads(Path(self._state_path).read_bytes())
        self._released = state["released"]
        for k, rec in state["barriers"].items():
            event = asyncio.Event()
            if rec["status"] is not None:
                event.set()
            self._barriers[k] = {**rec, "event": event}

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


def get_or_create_orchestrator(namespace: str, state_path: str | None = None):
    """The detached orchestrator actor in `namespace` (created on first use by either role; restored from
    `state_path` when a previous one died)."""
    import ray

    cls = ray.remote(PlanActOrchestrator)
    return cls.options(
        name=ORCHESTRATOR_NAME,
        namespace=namespace,
        lifetime="detached",
        get_if_exists=True,
        max_concurrency=1000,
        num_cpus=0,
    ).remote(state_path=state_path)


def orchestrator_state(cfg) -> Path:
    """Where the orchestrator of `cfg`'s namespace keeps its barrier records (beside the runs)."""
    return Path(cfg.checkpoint.root) / ".orchestrator" / f"{cfg.barrier.namespace}.pkl"


def resolve_barrier(result: dict) -> dict:
    """Raise BarrierTimeout for a failed release; pass other outcomes through."""
    if result["status"] == "failed":
        raise BarrierTimeout(f"barrier timed out after {result['wait_s']:.1f}s; arrived: {result['arrived']}")
    return result
