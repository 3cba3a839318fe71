"""`RayScheduler`: the original ScheduleMesh's dict-returning scheduler, over planact's Scheduler.

Code written against ScheduleMesh checks `result["success"]` and reads `result["pool"]`,
`result["agent"]`, `result["agents"]`, `result["error"]`; planact's `Scheduler` returns values and
raises typed errors. This facade translates one into the other; pools, ledgers, agents, supervision,
queues and dispatch are the same core. A queue `label` names a pool (each pool has one priority
queue); the agent for a chosen task is picked among the pool's agents matching the task's labels with
the strategy given at submission. The preemption registry and placement-group pools are in
`preemption_calls` (kept by this object, see docs/schedulemesh.md, "Coming from ScheduleMesh").
Resources come in either of the original's forms (custom amounts nested under `custom` or top-level) and
go out nested (`views`). With `state_path`, `shutdown()` keeps the state file and a new RayScheduler of
the same name restores pools, queues and agents from it (`restore`).
"""

from __future__ import annotations

import time
import uuid
from functools import wraps
from typing import Any

import ray

from schedulemesh import dispatch
from schedulemesh import resources as R
from schedulemesh.core.config import get_scheduling_config
from schedulemesh.core.controllers.facade_state import FacadeState
from schedulemesh.core.controllers.preemption_calls import PreemptionCalls
from schedulemesh.core.controllers.restore import end_supervisor, health_answer
from schedulemesh.core.controllers.views import CORE, agent_view, flat, pool_view, shaped
from schedulemesh.core.scheduling import available_strategies
from schedulemesh.errors import SchedulemeshError
from schedulemesh.pg_pools import PGPools
from schedulemesh.rules import PreemptionPolicy
from schedulemesh.scheduler import Scheduler

FAILURES = (SchedulemeshError, ValueError, TypeError, KeyError, ray.exceptions.RayError)


def dict_result(fn):
    """Wrap a method so it returns {success: True, ...} or {success: False, error} (the original never raises)."""

    @wraps(fn)
    def wrapper(self, *args, **kwargs) -> dict:
        self._live()
        try:
            return {"success": True, **fn(self, *args, **kwargs)}
        except FAILURES as err:
            if isinstance(err, Refused):
                raise
            return {"success": False, "error": str(err)}

    return wrapper


class Refused(ValueError):
    """What the original raises instead of answering {success: False}: an unknown strategy, a PG spec too big."""


def _class_path(cls: type) -> str:
    cls = getattr(cls, "__ray_actor_class__", cls)
    return f"{cls.__module__}.{cls.__qualname__}"


class RayScheduler(PreemptionCalls):
    """The original's scheduler entry point: every call returns `{"success": bool, ...}`."""

    def __init__(
        self,
        name: str = "schedulemesh-supervisor",
        *,
        namespace: str | None = None,
        detached: bool = False,
        max_restarts: int = -1,
        max_task_retries: int = 0,
        state_path: str | None = None,
        _owned: bool = True,
    ):
        # planact's supervisor is always a named, detached, restartable actor (it must outlive drivers to
        # supervise); `detached`, `max_restarts`, `max_task_retries` are accepted and recorded.
        if not ray.is_initialized():
            ray.init()
        self.name = name
        self.options = {"detached": detached, "max_restarts": max_restarts, "max_task_retries": max_task_retries}
        self.state_path = state_path
        self.scheduler = Scheduler(namespace or ray.get_runtime_context().namespace, name=name, state_path=state_path)
        self._owned, self._closed = _owned, False
        self.facade = FacadeState.load(state_path)
        self._strategies = self.facade.strategies  # task id -> strategy given at submission
        self._placement = self.facade.placement  # pool -> placement_strategy given at creation
        self._created = self.facade.created  # agent -> class path, init args/kwargs, options
        # Agents the head recreated from the state file as it started: ensure_agent_health reports them once.
        self._restored: list[str] = list(self.scheduler.status.get("recreated", [])) if state_path else []
        self.policy = PreemptionPolicy()
        self.running: dict = {}  # task id -> rules.RunningTask
        self.history: list[dict] = []
        self.handlers: dict[str, tuple] = {}
        self.pg_pools = PGPools()

    @classmethod
    def attach(
        cls, name: str = "schedulemesh-supervisor", *, namespace: str | None = None, state_path: str | None = None
    ) -> RayScheduler:
        """Bind to a running supervisor by name without owning it (shutdown then leaves it running)."""
        return cls(name, namespace=namespace, state_path=state_path, _owned=False)

    def _live(self) -> None:
        if self._closed:
            raise RuntimeError(f"RayScheduler {self.name!r} was shut down")

    def supervisor_handle(self):
        """The supervisor actor's Ray handle."""
        self._live()
        return self.scheduler.supervisor

    def shutdown(self) -> None:
        """Stop the supervisor with its agents and placement groups if this object created it.

        Without state_path its pools go too; with one they stay in the state file for a later restore."""
        self._live()
        self._closed = True
        if not self._owned:
            return
        if self.state_path:
            # PG-pool groups are this object's and end here: their agents could not be restored into them.
            for agent in list(self.pg_pools.by_agent):
                self.scheduler.delete_agent(agent, graceful=False)
        for pool in list(self.pg_pools.configs):
            self.pg_pools.destroy_pool(pool)
        if not self.state_path:
            for pool in self.scheduler.list_pools():
                self.scheduler.delete_pool(pool["name"], force=True)
        end_supervisor(self.scheduler, self.name)

    # --- pools ---

    def _check_cluster(self, capacity: dict[str, float]) -> dict:
        total = R.from_ray(ray.cluster_resources())
        committed: dict[str, float] = {}
        for pool in self.scheduler.list_pools():
            committed = R.add(committed, {k: v for k, v in pool["capacity"].items() if k in CORE})
        available = {k: total.get(k, 0.0) - committed.get(k, 0.0) for k in CORE}
        short = {k: capacity.get(k, 0.0) for k in CORE if capacity.get(k, 0.0) > available[k] + R.EPS}
        if short:
            raise ValueError(
                "Insufficient cluster capacity: "
                + "; ".join(f"{k} requested {v:g}, available {max(available[k], 0.0):g}" for k, v in short.items())
            )
        return {"total": shaped(total), "committed": shaped(committed), "available": available}

    @dict_result
    def create_pool(
        self,
        name: str,
        labels: dict[str, str],
        resources: dict[str, float],
        *,
        target_agents: int = 0,
        placement_strategy: str = "STRICT_PACK",
        pg_pool_config: dict | None = None,
    ) -> dict:
        """{success, pool, cluster[, pg_pool_config_result]}; `resources` is per agent when target_agents > 0."""
        spec = flat(resources) or {}
        pg = dict(pg_pool_config or {})
        for hp in pg.get("high_priority_pg_specs") or []:
            short = R.shortfall(R.normalize({k: v for k, v in hp.items() if k != "custom_resources"}), spec)
            if short:
                # The original raises here rather than answering: a misconfiguration, not a capacity state.
                raise Refused(
                    f"pool {name!r}: high-priority placement group spec {hp} exceeds the pool's resources "
                    f"{resources} ({', '.join(sorted(short))})"
                )
        if any(p["name"] == name for p in self.scheduler.list_pools()):
            raise ValueError(f"pool {name!r} exists already")
        cluster = self._check_cluster(R.scale(spec, target_agents) if target_agents else spec)
        pool = self.scheduler.create_pool(name, labels, spec, target_agents=target_agents)
        self._placement[name] = placement_strategy
        self.facade.save()
        out = {"pool": pool_view(pool, placement_strategy), "cluster": cluster}
        if pg and pg.get("enable", True):
            pg.pop("enable", None)
            pg.setdefault("pg_strategy", placement_strategy)
            out["pg_pool_config_result"] = self.pg_pools.configure(name, **pg)
        return out

    def _pool_view(self, pool: dict) -> dict:
        return pool_view(pool, self._placement.get(pool["name"], "STRICT_PACK"))

    @dict_result
    def get_pool(self, name: str) -> dict:
        """{success, pool}."""
        return {"pool": self._pool_view(self.scheduler.get_pool(name))}

    @dict_result
    def list_pools(self) -> dict:
        """{success, pools}."""
        return {"pools": [self._pool_view(p) for p in self.scheduler.list_pools()]}

    # --- agents ---

    def _spawn(
        self,
        name: str,
        pool: str,
        actor_class: type,
        resources: dict | None,
        ray_options: dict | None,
        actor_args,
        actor_kwargs,
        labels: dict | None = None,
    ) -> dict:
        """Create through the core (reserve -> create -> commit, rolled back on failure); the agent view."""
        self.scheduler.create_agent(
            name,
            pool,
            actor_class,
            resources=flat(resources),
            ray_options=ray_options,
            actor_args=tuple(actor_args or ()),
            actor_kwargs=dict(actor_kwargs or {}),
            labels=labels,
        )
        info = self.scheduler.agent_info(name)
        self._created[name] = {
            "actor_class_path": _class_path(actor_class),
            "actor_init_args": list(actor_args or ()),
            "actor_init_kwargs": dict(actor_kwargs or {}),
            "options": {**R.to_ray_options(info["resources"]), **(ray_options or {})},
        }
        self.facade.save()
        return agent_view(info, self._created[name], self.scheduler.get_agent(name).handle)

    @dict_result
    def create_agent(
        self,
        name: str,
        pool: str,
        actor_class: type,
        *,
        resources: dict[str, float] | None = None,
        ray_options: dict[str, Any] | None = None,
        actor_args: list | None = None,
        actor_kwargs: dict[str, Any] | None = None,
    ) -> dict:
        """{success, agent}: the agent once its constructor finished (quota rolled back if it failed)."""
        return {"agent": self._spawn(name, pool, actor_class, resources, ray_options, actor_args, actor_kwargs)}

    def delete_agent(self, name: str, *, force: bool = False, destroy_pg: bool = True) -> dict:
        """{success, agent}: actor stopped (at once with force), quota returned, its placement group freed."""
        self._live()
        try:
            self.scheduler.delete_agent(name, graceful=not force)
        except FAILURES as err:
            if not force:
                return {"success": False, "error": str(err)}
        self.pg_pools.release(name, destroy=destroy_pg)
        if self._created.pop(name, None) is not None:
            self.facade.save()
        return {"success": True, "agent": name}

    @dict_result
    def list_agents(self, pool: str | None = None, *, include_handle: bool = False) -> dict:
        """{success, agents} (with each live agent's Ray handle when asked)."""
        out = []
        for info in self.scheduler.list_agents(pool):
            handle = None
            if include_handle:
                try:
                    handle = self.scheduler.get_agent(info["name"]).handle
                except ValueError:  # not alive right now
                    handle = None
            out.append(agent_view(info, self._created.get(info["name"]), handle))
        return {"agents": out}

    def ensure_agent_health(self, timeout: float = 120.0, recreate: bool = True) -> dict:
        """{stale, recovered, recreated, timestamp}: agents silent for `timeout` s (or dead) recreated now.

        `stale` lists every agent examined, as the original's does; `recovered` the ones found stale. The
        first answer after a restore from state_path also names the agents the head recreated as it started."""
        self._live()
        restored, self._restored = self._restored, []
        return health_answer(self.scheduler.reconcile(timeout, recreate), restored)

    # --- queues ---

    @dict_result
    def submit_task(
        self,
        label: str,
        payload: Any,
        *,
        labels: dict[str, str] | None = None,
        strategy: str | None = None,
        priority: float = 0.0,
        task_id: str | None = None,
    ) -> dict:
        """{success, task_id, queue_length, strategy, priority, submit_latency_ms}: queued on pool `label`."""
        start = time.perf_counter()
        strategy = check_strategy(strategy)
        task_id = self.scheduler.submit_task(
            label, payload, priority=priority, labels=labels, task_id=task_id or f"task-{uuid.uuid4().hex[:8]}"
        )
        self._strategies[task_id] = strategy
        self.facade.save()
        return {
            "task_id": task_id,
            "queue_length": len(self.scheduler.pending_tasks(label)),
            "strategy": strategy,
            "priority": priority,
            "submit_latency_ms": (time.perf_counter() - start) * 1000,
        }

    def choose_task(self, label: str) -> dict:
        """{success, task, task_id, priority, agent, queue_length, strategy, schedule_latency_ms}; success False
        when the queue is empty or no agent matches the head task's labels (the task then stays queued)."""
        self._live()
        start = time.perf_counter()
        try:
            pending = self.scheduler.pending_tasks(label)
            if not pending:
                return {"success": False, "queue_length": 0}
            head = pending[0]
            strategy = self._strategies.get(head["task_id"]) or check_strategy(None)
            agent = self.scheduler.choose(pool=label, labels=head["labels"] or None, strategy=strategy)
            task = self.scheduler.choose_task(label, agent.name)
        except FAILURES as err:
            return {"success": False, "queue_length": len(self.scheduler.pending_tasks(label)), "error": str(err)}
        if self._strategies.pop(task["task_id"], None) is not None:
            self.facade.save()
        info = self.scheduler.agent_info(agent.name)
        return {
            "success": True,
            "task": task["payload"],
            "task_id": task["task_id"],
            "priority": task["priority"],
            "agent": agent_view(info, self._created.get(agent.name)),
            "queue_length": len(pending) - 1,
            "strategy": strategy,
            "schedule_latency_ms": (time.perf_counter() - start) * 1000,
        }

    @dict_result
    def update_agent_metrics(self, name: str, metrics: dict[str, Any]) -> dict:
        """{success}: metrics replace the agent's pushed ones and count as a heartbeat."""
        self.scheduler.update_agent_metrics(name, metrics)
        return {}

    @dict_result
    def reconcile_agents(self, timeout: float = 120.0, recreate: bool = True) -> dict:
        """{success, stale, recreated, checked}: planact's form of ensure_agent_health."""
        return self.scheduler.reconcile(timeout, recreate)


def check_strategy(strategy: str | None) -> str:
    """The strategy name to use (the configured default for None); raises ValueError for an unknown one."""
    name = (strategy or get_scheduling_config().default_strategy).strip().lower()
    # The original's registry (where the configuration may have disabled a built-in), or one registered with
    # planact's dispatch.register_strategy.
    if name not in available_strategies() and name not in dispatch.CUSTOM:
        known = ", ".join(sorted({*available_strategies(), *dispatch.CUSTOM}))
        raise Refused(f"unknown strategy {name!r}; choose one of {known}")
    return name


__all__ = ["RayScheduler", "Refused"]
