"""Supervision and preemption, the half of the Supervisor that keeps agents alive (or evicts them).

A mixin of `Supervisor`: it works on the host's `agents`, `pools`, `handles`, `probes`, `recovering`
and its `_spawn`, `_event`, `_persist`.
"""

from __future__ import annotations

import asyncio
import logging
import time

import ray
from ray.exceptions import ActorDiedError, ActorUnavailableError

from schedulemesh import resources as R
from schedulemesh.pool import Pool
from schedulemesh.records import AgentRecord

log = logging.getLogger("schedulemesh")


class SupervisionMixin:
    """Heartbeats, the monitor loop, recreation of dead or silent agents, and priority preemption."""

    async def heartbeat(self, name: str, incarnation: int, report: dict) -> None:
        """An agent's periodic report; beats from an older incarnation are ignored."""
        rec = self.agents.get(name)
        if rec is None or rec.incarnation != incarnation or rec.status not in ("alive", "starting"):
            return
        if rec.pid is not None and report.get("pid") not in (None, rec.pid):
            rec.ray_restarts += 1  # Ray's own max_restarts brought the actor back in a new process
            self._event("ray_restart", name, old_pid=rec.pid, pid=report["pid"])
            rec.pid = report["pid"]
        rec.last_heartbeat = time.time()
        rec.take_report(report)

    async def _monitor_loop(self) -> None:
        last = time.time()
        while True:
            await asyncio.sleep(self.check_interval_s)
            now = time.time()
            # The head itself did not run for a while (stopped, swapped out, or starved on a loaded machine):
            # beats sent meanwhile are still queued, so that stretch is not the agents' silence. Without this, a
            # stalled head condemned every healthy agent on waking (seen in CI: four agents recreated at once).
            # Only the excess over a normal pass is discounted, so under steady load a silent agent still
            # accumulates silence every pass and is replaced.
            excess = now - last - (self.check_interval_s + self._stall_allowance())
            if excess > 0:
                self._stalls.append((now, excess))
                self._stalls = [s for s in self._stalls if now - s[0] < self._stall_memory_s()]
            last = now
            try:
                self._check_once()
            except Exception:  # supervision must outlive any one bad record
                log.exception("schedulemesh monitor pass failed")

    def _stall_allowance(self) -> float:
        """How much later than planned a monitor pass may run before the delay counts as the head's stall."""
        return max(1.0, self.stale_after_s / 4)

    def _stall_memory_s(self) -> float:
        # Long enough to cover the longest silence limit any agent has.
        return 2 * max(self.stale_after_s, self.ready_timeout_s) + 60

    def _silence(self, rec: AgentRecord, now: float) -> float:
        """Seconds an agent has been silent while the head was awake to hear it."""
        stalled = sum(excess for woke, excess in self._stalls if woke > rec.last_heartbeat)
        return now - rec.last_heartbeat - stalled

    def _check_once(self) -> None:
        now = time.time()
        for name, rec in list(self.agents.items()):
            if name in self.recovering or rec.status not in ("alive", "recovering"):
                continue
            if rec.status == "recovering":  # an earlier recreation attempt failed: try again
                self.recovering.add(name)
                asyncio.ensure_future(self._recover(rec, rec.last_error or "recreation pending"))
                continue
            dead = False
            probe = self.probes.get(name)
            if probe is not None and probe.done():
                dead = isinstance(probe.result(), ActorDiedError)
                probe = None
            if probe is None and name in self.handles:
                # One outstanding probe per agent: a busy agent queues it instead of piling up pings.
                self.probes[name] = asyncio.ensure_future(self._probe(self.handles[name]))
            silent = self._silence(rec, now) > self._silence_limit(rec)
            if dead or silent:
                why = "actor died" if dead else f"no heartbeat for {now - rec.last_heartbeat:.1f}s"
                self.recovering.add(name)
                asyncio.ensure_future(self._recover(rec, why))

    def _silence_limit(self, rec: AgentRecord) -> float:
        """Seconds without a heartbeat before an agent counts as lost."""
        # An agent with Ray's own max_restarts goes silent while Ray brings it back in a new process; that is
        # an agent start, so it gets the time any start gets. Recreating it sooner kills the restart Ray is
        # doing (seen on a loaded 2-core machine, where a restart outlasted a short stale_after_s). When Ray
        # has spent its restarts, the probe reports the actor dead and recovery starts without this wait.
        if rec.ray_options.get("max_restarts", 0):
            return max(self.stale_after_s, self.ready_timeout_s)
        return self.stale_after_s

    @staticmethod
    async def _probe(handle) -> object:
        # The outcome, never raised: ActorDiedError means dead; ActorUnavailableError means Ray's own
        # max_restarts is bringing it back, which is not ours to handle.
        try:
            return await handle.sm_ping.remote()
        except (ActorDiedError, ActorUnavailableError) as exc:
            return exc
        except Exception as exc:
            return exc

    def _discard(self, name: str) -> None:
        """Kill what is left of an agent's actor and forget its handle and probe."""
        old = self.handles.pop(name, None)
        if old is not None:
            try:
                ray.kill(old, no_restart=True)
            except Exception:  # already gone
                pass
        self.probes.pop(name, None)

    async def _recover(self, rec: AgentRecord, why: str) -> None:
        """Kill what is left of the agent and recreate it from its stored class and arguments."""
        t0 = time.time()
        try:
            pool = self.pools.get(rec.pool)
            alive = [a for a in self.agents.values() if a.pool == rec.pool and a.status == "alive" and a is not rec]
            if pool is None or (pool.target_agents and len(alive) >= pool.target_agents):
                # The pool is at its target without this agent: it stays down, and what it held is freed
                # (its ledger entry and placement bundle), or the pool would refuse new agents for good.
                rec.status = "stopped"
                self._discard(rec.name)
                if pool is not None:
                    pool.release(rec.resources)
                    pool.give_bundle(rec.name)
                self._event("stopped", rec.name, why=f"{why}; pool {rec.pool!r} is at its target without it")
                self._persist()
                return
            if rec.recreations >= self.max_recreations:
                rec.status, rec.last_error = "failed", f"gave up after {rec.recreations} recreations ({why})"
                self._event("recovery_failed", rec.name, why=rec.last_error)
                return
            rec.status = "recovering"
            self._discard(rec.name)
            rec.incarnation += 1
            rec.recreations += 1
            try:
                await self._spawn(rec)
            except Exception as exc:
                rec.status, rec.last_error = "recovering", str(exc)  # the next monitor pass tries again
                self._event("recovery_failed", rec.name, why=str(exc))
                return
            rec.last_recovery_s = time.time() - t0
            log.warning("schedulemesh: recreated agent %s (%s) in %.2fs", rec.name, why, rec.last_recovery_s)
            self._event("recreated", rec.name, why=why, seconds=rec.last_recovery_s, incarnation=rec.incarnation)
            self._persist()
        finally:
            self.recovering.discard(rec.name)

    async def _preempt_for(self, name: str, pool: Pool, request: dict[str, float]) -> None:
        """Evict agents of lower-priority pools until the cluster has room for `request` (victims told first).

        Free room is read from Ray's cluster-wide available resources, so on several nodes an eviction
        may free room on a node the new agent cannot use; Ray then keeps it pending until room appears.
        """
        short = R.shortfall(request, R.from_ray(ray.available_resources()))
        if not short:
            return
        victims = sorted(
            (
                a
                for a in self.agents.values()
                if a.status == "alive" and a.pool in self.pools and self.pools[a.pool].priority < pool.priority
            ),
            key=lambda a: (self.pools[a.pool].priority, -a.created_at),
        )
        chosen, freed = [], {}
        for victim in victims:
            if not R.shortfall(short, freed):
                break
            if any(victim.resources.get(k, 0) > 0 for k in short):
                chosen.append(victim)
                freed = R.add(freed, victim.resources)
        if not chosen or R.shortfall(short, freed):
            return  # nothing (enough) to evict: the new agent waits for room like any Ray actor
        for victim in chosen:
            reason = f"preempted by agent {name!r} of pool {pool.name!r} (priority {pool.priority})"
            handle = self.handles.pop(victim.name, None)
            if handle is not None:
                try:
                    await asyncio.wait_for(handle.sm_preempt.remote(reason), 10)
                except Exception:  # a victim that cannot answer is evicted all the same
                    pass
                ray.kill(handle, no_restart=True)
            victim.status = "preempted"
            self.pools[victim.pool].release(victim.resources)
            self.pools[victim.pool].give_bundle(victim.name)
            self.probes.pop(victim.name, None)
            self._event("preempted", victim.name, by=name, reason=reason)
        self._persist()
