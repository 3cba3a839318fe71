"""SimpleScheduler: the original ScheduleMesh's few-call client (pools, submit with preemption, complete).

sched = SimpleScheduler()
sched.ensure_pool("train", labels={"stage": "train"}, resources={"cpu": 4})
sched.submit(task_id="job-1", pool="train", actor_class=Trainer, resources={"cpu": 2}, priority=5)
sched.complete("job-1")   # forgets the running task; the agent and its quota stay
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from schedulemesh.core.controllers.ray_scheduler import RayScheduler


@dataclass
class SimpleTaskSpec:
    """One task for SimpleScheduler.submit_spec."""

    task_id: str
    pool: str
    actor_class: type
    resources: dict[str, float]
    priority: float = 5.0
    labels: dict[str, str] | None = None
    actor_args: list | tuple | None = None
    actor_kwargs: dict[str, Any] | None = None
    agent_name: str | None = None
    ray_options: dict[str, Any] | None = None
    estimated_duration: float = 0.0
    auto_register: bool = True
    extra: dict[str, Any] = field(default_factory=dict, repr=False)

    def to_submission_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of SimpleScheduler.submit."""
        return {
            "task_id": self.task_id,
            "pool": self.pool,
            "actor_class": self.actor_class,
            "resources": dict(self.resources),
            "priority": self.priority,
            "labels": self.labels,
            "actor_args": self.actor_args,
            "actor_kwargs": self.actor_kwargs,
            "agent_name": self.agent_name,
            "estimated_duration": self.estimated_duration,
            "auto_register": self.auto_register,
            "ray_options": self.ray_options,
        }


class SimpleScheduler:
    """A RayScheduler behind a handful of calls (pass `scheduler=` to share one)."""

    def __init__(self, name: str = "schedulemesh-simple", *, scheduler: RayScheduler | None = None):
        self.scheduler = scheduler or RayScheduler(name)

    def ensure_pool(
        self,
        name: str,
        *,
        labels: dict[str, str] | None = None,
        resources: dict[str, float] | None = None,
        target_agents: int = 0,
        placement_strategy: str = "STRICT_PACK",
        pg_pool_config: dict | None = None,
    ) -> dict:
        """The pool, created when it does not exist yet ({success, pool, created})."""
        found = self.scheduler.get_pool(name)
        if found["success"]:
            return {**found, "created": False}
        made = self.scheduler.create_pool(
            name,
            labels or {},
            resources or {},
            target_agents=target_agents,
            placement_strategy=placement_strategy,
            pg_pool_config=pg_pool_config,
        )
        return {**made, "created": made["success"]}

    def submit(
        self,
        *,
        task_id: str,
        pool: str,
        actor_class: type,
        resources: dict[str, float],
        priority: float = 5.0,
        labels: dict[str, str] | None = None,
        actor_args: list | None = None,
        actor_kwargs: dict | None = None,
        agent_name: str | None = None,
        estimated_duration: float = 0.0,
        auto_register: bool = True,
        ray_options: dict | None = None,
    ) -> dict:
        """submit_task_with_preemption; on success (and auto_register) the task is registered as running."""
        result = self.scheduler.submit_task_with_preemption(
            task_id=task_id,
            pool_name=pool,
            actor_class=actor_class,
            resources=resources,
            priority=priority,
            labels=labels,
            actor_args=actor_args,
            actor_kwargs=actor_kwargs,
            ray_options=ray_options,
            agent_name=agent_name,
        )
        if result.get("success") and auto_register:
            result["task_state"] = self.scheduler.register_running_task(
                task_id, result["agent"]["name"], pool, priority, labels, estimated_duration, resources=resources
            )["task_state"]
        return result

    def submit_spec(self, spec: SimpleTaskSpec) -> dict:
        """submit() from a SimpleTaskSpec."""
        return self.submit(**spec.to_submission_kwargs())

    def submit_with_pg_preemption(
        self,
        *,
        task_id: str,
        pool: str,
        actor_class: type,
        resources: dict[str, float],
        priority: float = 5.0,
        labels: dict[str, str] | None = None,
        actor_args: list | None = None,
        actor_kwargs: dict | None = None,
        estimated_duration: float = 0.0,
        auto_register: bool = True,
        ray_options: dict | None = None,
    ) -> dict:
        """submit_task_with_pg_preemption (the agent is named after the task)."""
        return self.scheduler.submit_task_with_pg_preemption(
            task_id=task_id,
            pool_name=pool,
            actor_class=actor_class,
            resources=resources,
            priority=priority,
            labels=labels,
            actor_args=actor_args,
            actor_kwargs=actor_kwargs,
            ray_options=ray_options,
            estimated_duration=estimated_duration,
            auto_register=auto_register,
        )

    def complete(self, task_id: str) -> dict:
        """Forget a running task (the agent and its quota stay, as in the original)."""
        return self.scheduler.unregister_task(task_id)

    def configure_preemption(self, **kw) -> dict:
        """update_preemption_policy."""
        return self.scheduler.update_preemption_policy(**kw)

    def register_state_handlers(self, pool_name: str, preserver, restorer) -> dict:
        """register_state_handlers."""
        return self.scheduler.register_state_handlers(pool_name, preserver, restorer)

    def stats(self) -> dict:
        """get_preemption_stats."""
        return self.scheduler.get_preemption_stats()

    def list_agents(self, pool: str | None = None, *, include_handle: bool = False) -> dict:
        """list_agents."""
        return self.scheduler.list_agents(pool, include_handle=include_handle)

    def pg_pool_stats(self, pool_name: str | None = None) -> dict:
        """get_pg_pool_stats."""
        return self.scheduler.get_pg_pool_stats(pool_name)

    def list_pools(self) -> dict:
        """list_pools."""
        return self.scheduler.list_pools()

    def shutdown(self) -> None:
        """shutdown the scheduler (its supervisor too when this client created it)."""
        self.scheduler.shutdown()
