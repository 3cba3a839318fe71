"""Recovery of the supervisor (the scheduler head) itself: what a restarted head does first, and health
checks on demand.

Ray restarts the supervisor actor after its process dies (`max_restarts=-1`) and the constructor reloads
the state file, but nothing would call the restarted actor until some driver happened to: the
constructor therefore sends the actor its own `start()`. `start()` health-checks every agent the file
names, all at once: an agent that still runs is re-attached with a fresh metrics report (agents created
with `ray_options={"lifetime": "detached"}` outlive the head's process; the others are owned by the head
and die with it, as Ray's ownership has it); one that is gone is recreated from its stored class and
arguments. Tasks that were running on a recreated agent go back to the queue, keeping their age.

A mixin of `Supervisor`: it uses the host's `agents`, `pools`, `handles`, `queue`, `recovering` and its
`_recover`, `_monitor_loop`, `_event`, `_persist`.
"""

from __future__ import annotations

import asyncio
import time

import ray
from ray.exceptions import ActorDiedError

from schedulemesh.errors import AgentNotFound

REATTACH_TIMEOUT_S = 10.0
"""How long a restarted head waits for an agent's answer before treating it as gone."""


class RecoveryMixin:
    """start() after a (re)start of the head, reconcile() on demand, and metrics pushed from outside."""

    async def start(self) -> dict:
        """Re-attach to (or recreate) the agents of the state file once, then run the monitor loop."""
        if self._starting is None:  # one start per head process, however many callers ask
            self._starting = asyncio.ensure_future(self._start_once())
        summary = await asyncio.shield(self._starting)
        return {"pools": len(self.pools), "agents": len(self.agents), "state_path": self.state_path, **summary}

    async def _start_once(self) -> dict:
        restored = [rec for rec in self.agents.values() if rec.status not in ("stopped", "preempted", "failed")]
        for rec in restored:
            rec.status = "starting"  # unknown until it answers; heartbeats are still taken meanwhile
        answered = await asyncio.gather(*(self._reattach(rec) for rec in restored))
        reattached = [rec.name for rec, ok in zip(restored, answered) if ok]
        recreated = [rec.name for rec, ok in zip(restored, answered) if not ok and rec.status == "alive"]
        for task in self.queue.running():
            if task["agent"] is not None and task["agent"] not in reattached:
                self.queue.requeue(task["task_id"])  # its agent's work died with the old head
                self._event("task_requeued", task["agent"], task=task["task_id"], why="agent lost in a head restart")
        if restored:
            self._event("head_restart", "", reattached=reattached, recreated=recreated)
            self._persist()
        self._monitor = asyncio.get_running_loop().create_task(self._monitor_loop())
        return {"reattached": reattached, "recreated": recreated}

    async def _reattach(self, rec) -> bool:
        """True when the agent of rec's incarnation still runs (now re-attached); else it is recreated."""
        since = time.time()
        try:
            handle = ray.get_actor(rec.ray_name or rec.name, namespace=rec.namespace)
            try:
                report = await asyncio.wait_for(handle.sm_ping.remote(), REATTACH_TIMEOUT_S)
            except TimeoutError:
                # A busy agent (one call at a time) cannot answer a ping, but its heartbeat thread reaches the
                # new head: a beat of this incarnation since we asked means it is alive.
                if rec.last_heartbeat < since:
                    raise
                report = dict(rec.report)
            if report.get("incarnation", rec.incarnation) != rec.incarnation:
                raise RuntimeError("an older incarnation answered")
        except Exception:
            self.recovering.add(rec.name)
            await self._recover(rec, "gone after a supervisor restart")
            return False
        self.handles[rec.name] = handle
        rec.pid, rec.status, rec.last_heartbeat = report.get("pid", rec.pid), "alive", time.time()
        rec.take_report(report)
        self._event("reattached", rec.name, pid=rec.pid)
        return True

    async def reconcile(self, stale_after_s: float | None = None, recreate: bool = True) -> dict:
        """Health-check every alive agent now: a ping, and the age of its last heartbeat.

        An agent is stale when its actor is dead, or when it neither answers within 2 s nor has sent a
        heartbeat for `stale_after_s` (default: the supervisor's own). Stale agents are recreated (when
        `recreate`) as supervision would, without waiting for the next monitor pass. Agents that answer
        get their report (metrics) refreshed.
        """
        limit = self.stale_after_s if stale_after_s is None else float(stale_after_s)
        names = [n for n, rec in self.agents.items() if rec.status == "alive" and n not in self.recovering]
        pings = await asyncio.gather(*(self._ping_within(n, 2.0) for n in names))
        now, stale = time.time(), []
        for name, answer in zip(names, pings):
            rec = self.agents[name]
            if isinstance(answer, dict):
                rec.take_report(answer)
                rec.last_heartbeat = now
            elif answer is None or isinstance(answer, ActorDiedError) or now - rec.last_heartbeat > limit:
                stale.append(name)
        recreated = []
        if recreate:
            for name in stale:
                rec = self.agents[name]
                self.recovering.add(name)
                await self._recover(rec, "stale in a health check")
                if rec.status == "alive":
                    recreated.append(name)
        return {"checked": names, "stale": stale, "recreated": recreated}

    async def _ping_within(self, name: str, timeout_s: float) -> object:
        handle = self.handles.get(name)
        if handle is None:
            return None  # no actor to ask: as dead as one that died
        try:
            return await asyncio.wait_for(self._probe(handle), timeout_s)  # dead or restarting: the error
        except TimeoutError as exc:  # busy past the timeout: the heartbeat's age decides
            return exc

    async def update_agent_metrics(self, name: str, metrics: dict) -> dict:
        """Metrics pushed for an agent from outside its heartbeat; they overlay its own reports until replaced.

        A `load` entry is what least_busy and power_of_two compare.
        """
        rec = self.agents.get(name)
        if rec is None:
            raise AgentNotFound(f"no agent named {name!r}")
        rec.pushed = {**rec.pushed, **dict(metrics)}
        rec.take_report(rec.report)
        return rec.info()
