"""`RayScheduler`: the original ScheduleMesh's dict-returning facade, over planact's Scheduler.

Code written against ScheduleMesh checks `result["success"]` and reads `result["pool"]`,
`result["agent"]`, `result["agents"]`, `result["error"]`; planact's `Scheduler` returns values and
raises typed errors. This facade translates one into the other and adds nothing else: pools, agents,
supervision, queues and dispatch are the same core. A queue `label` names a pool (each pool has one
priority queue); the agent for a chosen task is picked among the pool's agents matching the task's
labels with the strategy given at submission.

Not on this facade (planact's `Scheduler` has its own forms of some): placement-group pools
(`pg_pool_config`, `configure_pg_pool`), the original's preemption and state-handler calls,
`ensure_agent_health`. Calling one raises AttributeError; `pg_pool_config` with `enable` is refused
as `{"success": False, "error": ...}`.
"""

from __future__ import annotations

from functools import wraps
from typing import Any

import ray

from schedulemesh.errors import SchedulemeshError
from schedulemesh.scheduler import Scheduler


def _dict_result(fn):
    # The original reports failures in the result, never as exceptions.
    @wraps(fn)
    def wrapper(*args, **kwargs) -> dict:
        try:
            return {"success": True, **fn(*args, **kwargs)}
        except (SchedulemeshError, ValueError, TypeError, ray.exceptions.RayError) as err:
            return {"success": False, "error": str(err)}
    return wrapper


class RayScheduler:
    """The original's scheduler entry point: every call returns `{"success": bool, ...}`."""

    def __init__(self, name: str = "schedulemesh-supervisor", *, namespace: str | None = None,
                 detached: bool = False, max_restarts: int = -1, max_task_retries: int = 0,
                 state_path: str | None = None):
        # planact's supervisor is always a detached, restartable named actor; `detached`, `max_restarts`
        # and `max_task_retries` are accepted for compatibility.
        self.name = name
        self.scheduler = Scheduler(namespace or ray.get_runtime_context().namespace, name=name, state_path=state_path)
        self._strategies: dict[str, str] = {}

    @classmethod
    def attach(cls, name: str = "schedulemesh-supervisor", *, namespace: str | None = None) -> "RayScheduler":
        """Attach to a running supervisor by name (planact's Scheduler attaches when it exists)."""
        return cls(name, namespace=namespace)

    @_dict_result
    def create_pool(self, name: str, labels: dict[str, str], resources: dict[str, float], *, target_agents: int = 0,
                    placement_strategy: str | None = None, pg_pool_config: dict | None = None) -> dict:
        """{"success", "pool"}. A placement group (PACK, STRICT_PACK, ...) is made only when a strategy is given."""
        if pg_pool_config and pg_pool_config.get("enable"):
            raise ValueError("pg_pool_config: placement-group pools are not part of planact's schedulemesh")
        return {"pool": self.scheduler.create_pool(name, labels, resources, target_agents=target_agents,
                                                   placement_strategy=placement_strategy)}

    @_dict_result
    def list_pools(self) -> dict:
        """{"success", "pools"}."""
        return {"pools": self.scheduler.list_pools()}

    @_dict_result
    def get_pool(self, name: str) -> dict:
        """{"success", "pool"}."""
        return {"pool": self.scheduler.get_pool(name)}

    @_dict_result
    def create_agent(self, name: str, pool: str, actor_class: type, *, resources: dict[str, float] | None = None,
                     ray_options: dict[str, Any] | None = None, actor_args: list | None = None,
                     actor_kwargs: dict[str, Any] | None = None) -> dict:
        """{"success", "agent"}: the agent's record once its constructor finished."""
        self.scheduler.create_agent(name, pool, actor_class, resources=resources, ray_options=ray_options,
                                    actor_args=tuple(actor_args or ()), actor_kwargs=dict(actor_kwargs or {}))
        return {"agent": self.scheduler.agent_info(name)}

    @_dict_result
    def list_agents(self, pool: str | None = None, *, include_handle: bool = False) -> dict:
        """{"success", "agents"} (with each live agent's Ray handle when asked)."""
        agents = self.scheduler.list_agents(pool)
        if include_handle:
            for a in agents:
                try:
                    a["handle"] = self.scheduler.get_agent(a["name"]).handle
                except ValueError:  # not alive right now
                    a["handle"] = None
        return {"agents": agents}

    @_dict_result
    def delete_agent(self, name: str, *, force: bool = False, destroy_pg: bool = True) -> dict:
        """{"success"}: the agent is stopped (killed at once with force) and its resources released."""
        self.scheduler.delete_agent(name, graceful=not force)
        return {}

    @_dict_result
    def submit_task(self, label: str, payload: Any, *, labels: dict[str, str] | None = None,
                    strategy: str | None = None, priority: float = 0.0, task_id: str | None = None) -> dict:
        """{"success", "task_id", "queue_length", "strategy", "priority"}: queued on pool `label`."""
        strategy = (strategy or "round_robin").strip().lower()
        task_id = self.scheduler.submit_task(label, payload, priority=priority, labels=labels, task_id=task_id)
        self._strategies[task_id] = strategy
        return {"task_id": task_id, "queue_length": len(self.scheduler.pending_tasks(label)), "strategy": strategy,
                "priority": priority}

    def choose_task(self, label: str) -> dict:
        """{"success", "task", "task_id", "priority", "agent", "queue_length", "strategy"}; success False when the
        queue is empty or no agent matches the task's labels (the task then stays queued)."""
        try:
            pending = self.scheduler.pending_tasks(label)
            if not pending:
                return {"success": False, "queue_length": 0}
            head = pending[0]
            strategy = self._strategies.get(head["task_id"], "round_robin")
            agent = self.scheduler.choose(pool=label, labels=head["labels"] or None, strategy=strategy)
            task = self.scheduler.choose_task(label, agent.name)
        except (SchedulemeshError, ValueError, ray.exceptions.RayError) as err:
            return {"success": False, "queue_length": len(self.scheduler.pending_tasks(label)), "error": str(err)}
        self._strategies.pop(task["task_id"], None)
        return {"success": True, "task": task["payload"], "task_id": task["task_id"], "priority": task["priority"],
                "agent": self.scheduler.agent_info(agent.name), "queue_length": len(pending) - 1, "strategy": strategy}

    @_dict_result
    def update_agent_metrics(self, name: str, metrics: dict[str, Any]) -> dict:
        """{"success", "agent"}: metrics pushed for an agent (`load` steers least_busy / power_of_two)."""
        return {"agent": self.scheduler.update_agent_metrics(name, metrics)}

    @_dict_result
    def reconcile_agents(self, timeout: float = 120.0, recreate: bool = True) -> dict:
        """{"success", "stale", "recreated", "checked"}: agents silent for `timeout` s (or dead) recreated now."""
        return self.scheduler.reconcile(timeout, recreate)

    def shutdown(self) -> None:
        """Nothing to stop here: planact's supervisor is detached and shared; delete pools to free them."""
