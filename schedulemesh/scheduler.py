"""Scheduler: the public entry point (driver side). Every call goes to the one supervisor actor."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import ray
from ray.exceptions import RayTaskError

from schedulemesh.agent import unwrap
from schedulemesh.dispatch import Dispatcher, check_strategy, load_strategies
from schedulemesh.errors import AgentNotFound, SchedulemeshError
from schedulemesh.supervisor import Supervisor

SUPERVISOR_NAME = "schedulemesh-supervisor"


@dataclass(frozen=True)
class AgentRef:
    """A named agent. `handle` is looked up on every use, so a recreated agent is reached transparently."""

    name: str
    namespace: str
    ray_name: str | None = None  # the Ray actor's name when ray_options gave it another one

    @property
    def handle(self):
        """The Ray actor handle of the agent's current incarnation."""
        return ray.get_actor(self.ray_name or self.name, namespace=self.namespace)

    def call(self, method: str, *args, timeout: float | None = None, **kwargs):
        """Call a method on the agent and wait for its result."""
        return ray.get(getattr(self.handle, method).remote(*args, **kwargs), timeout=timeout)


def _ref(info: dict) -> AgentRef:
    return AgentRef(info["name"], info["namespace"], info.get("ray_name"))


class Scheduler:
    """Pools with resource ledgers and supervised agents on the connected Ray cluster.

    Creating a Scheduler starts the supervisor (a detached actor named `name` in `namespace`) or
    attaches to the running one, so a new driver process sees the pools and agents created by an
    earlier one. With `state_path`, a supervisor that was itself killed restores pools and recreates
    agents from that file. Supervision settings apply when this call starts the supervisor.
    """

    def __init__(
        self,
        namespace: str = "schedulemesh",
        *,
        name: str = SUPERVISOR_NAME,
        state_path: str | Path | None = None,
        check_interval_s: float = 1.0,
        stale_after_s: float = 15.0,
        ready_timeout_s: float = 120.0,
        heartbeat_interval_s: float = 1.0,
        max_recreations: int = 10,
        seed: int | None = None,
        aging_per_s: float = 0.1,
        strategies: str | Path | None = None,
    ):
        if not ray.is_initialized():
            raise SchedulemeshError("Ray is not initialised: call ray.init(...) (or connect to a cluster) first")
        self.namespace = namespace
        self.supervisor = (
            ray.remote(Supervisor)
            .options(
                name=name,
                namespace=namespace,
                lifetime="detached",
                get_if_exists=True,
                num_cpus=0,
                max_concurrency=1000,
                max_restarts=-1,
                max_task_retries=-1,
            )
            .remote(
                namespace,
                str(state_path) if state_path else None,
                check_interval_s,
                stale_after_s,
                ready_timeout_s,
                heartbeat_interval_s,
                max_recreations,
                aging_per_s,
            )
        )
        self.status = ray.get(self.supervisor.start.remote())
        self.dispatcher = Dispatcher(seed)
        if strategies:  # a YAML file: strategies: {name: "module:function"}
            load_strategies(strategies)

    def _call(self, method: str, *args, **kwargs):
        try:
            return ray.get(getattr(self.supervisor, method).remote(*args, **kwargs))
        except RayTaskError as exc:
            # Give the caller schedulemesh's own error with its message, not Ray's remote traceback.
            cause = getattr(exc, "cause", None)
            if isinstance(cause, (SchedulemeshError, TimeoutError)):
                raise cause from None
            raise

    # --- pools ---

    def create_pool(
        self,
        name: str,
        labels: dict[str, str] | None = None,
        resources: dict[str, float] | None = None,
        *,
        target_agents: int = 0,
        placement_strategy: str | None = None,
        priority: int = 0,
        node_labels: dict[str, str] | None = None,
        exist_ok: bool = False,
    ) -> dict:
        """Create a pool. resources: {cpu, gpu, memory (MB), <custom>}; per agent when target_agents > 0.

        placement_strategy (PACK, STRICT_PACK, SPREAD, STRICT_SPREAD) reserves a placement group of
        target_agents bundles so the pool's agents are gang-placed; node_labels pins agents to nodes
        carrying those Ray node labels.
        """
        return self._call(
            "create_pool", name, labels, resources, target_agents, placement_strategy, priority, node_labels, exist_ok
        )

    def get_pool(self, name: str) -> dict:
        """Labels, ledger (capacity, used, reserved, free) and agent names of a pool."""
        return self._call("get_pool", name)

    def list_pools(self, labels: dict[str, str] | None = None) -> list[dict]:
        """Every pool (whose labels match)."""
        return self._call("list_pools", labels)

    def delete_pool(self, name: str, force: bool = False) -> None:
        """Delete a pool (force=True stops its agents first)."""
        self._call("delete_pool", name, force)

    # --- agents ---

    def create_agent(
        self,
        name: str,
        pool: str,
        actor_class: type,
        *,
        resources: dict[str, float] | None = None,
        ray_options: dict | None = None,
        actor_args: tuple | list = (),
        actor_kwargs: dict | None = None,
        labels: dict[str, str] | None = None,
    ) -> AgentRef:
        """Create a supervised agent in a pool; returns once its constructor has finished."""
        actor_class = unwrap(actor_class)  # a @ray.remote class: the scheduler applies the options itself
        info = self._call(
            "create_agent",
            name,
            pool,
            actor_class,
            resources,
            ray_options,
            tuple(actor_args or ()),
            actor_kwargs,
            labels,
        )
        return _ref(info)

    def get_agent(self, name: str) -> AgentRef:
        """A reference to an existing agent."""
        return _ref(self._call("get_agent", name))

    def agent_info(self, name: str) -> dict:
        """What the supervisor knows of an agent: status, pid, node, incarnation, load, recreations."""
        return self._call("get_agent", name)

    def list_agents(self, pool: str | None = None, labels: dict[str, str] | None = None) -> list[dict]:
        """Agent records of a pool (or all), filtered by labels."""
        return self._call("list_agents", pool, labels)

    def delete_agent(self, name: str, graceful: bool = True) -> None:
        """Stop an agent (running its on_stop when graceful) and free its pool resources."""
        self._call("delete_agent", name, graceful)

    def wait_alive(self, name: str, min_incarnation: int = 0, timeout_s: float = 60.0) -> dict:
        """Block until the agent is up (at incarnation >= min_incarnation, e.g. after a recreation)."""
        return self._call("wait_alive", name, min_incarnation, timeout_s)

    def events(self, since: float = 0.0) -> list[dict]:
        """Supervision events (recreated, ray_restart, deleted, recovery_failed, head_restart, reattached...)."""
        return self._call("events_since", since)

    def reconcile(self, stale_after_s: float | None = None, recreate: bool = True) -> dict:
        """Health-check every alive agent now; {checked, stale, recreated} (see Supervisor.reconcile)."""
        return self._call("reconcile", stale_after_s, recreate)

    def update_agent_metrics(self, name: str, metrics: dict) -> dict:
        """Push metrics for an agent (a `load` entry steers least_busy / power_of_two); returns its record."""
        return self._call("update_agent_metrics", name, metrics)

    # --- calling agents ---

    def choose(
        self,
        pool: str | None = None,
        labels: dict[str, str] | None = None,
        strategy: str = "round_robin",
        label_key: str | None = None,
    ) -> AgentRef:
        """One alive agent of a pool / label selector by strategy (see schedulemesh.dispatch.STRATEGIES)."""
        check_strategy(strategy)
        candidates = [a for a in self.list_agents(pool, labels) if a["status"] == "alive"]
        if not candidates:
            raise AgentNotFound(f"no alive agent matches pool={pool!r} labels={labels!r}")
        key = (pool, tuple(sorted((labels or {}).items())), strategy)
        chosen = self.dispatcher.pick(candidates, strategy, key, label_key)
        return _ref(chosen)

    def broadcast(
        self,
        method: str,
        *args,
        pool: str | None = None,
        labels: dict[str, str] | None = None,
        timeout: float | None = None,
        **kwargs,
    ) -> dict[str, object]:
        """Call `method` on every alive matching agent; {agent name: result}."""
        refs = {
            a["name"]: getattr(_ref(a).handle, method).remote(*args, **kwargs)
            for a in self.list_agents(pool, labels)
            if a["status"] == "alive"
        }
        values = ray.get(list(refs.values()), timeout=timeout)
        return dict(zip(refs, values))

    def rendezvous(self, name: str) -> tuple[str, int]:
        """(ip, free port) bound on the agent's own node: the master address of a torch.distributed group."""
        return self.get_agent(name).call("sm_free_port")

    # --- task queue and task-level preemption (see schedulemesh.queueing) ---

    def submit_task(
        self,
        pool: str,
        payload=None,
        *,
        priority: float = 0.0,
        labels: dict[str, str] | None = None,
        task_id: str | None = None,
    ) -> str:
        """Queue work for a pool at a priority (it ages while it waits); returns the task id."""
        return self._call("submit_task", pool, payload, priority, labels, task_id)

    def choose_task(self, pool: str, agent: str | None = None) -> dict | None:
        """The pool's next task by effective priority, now running on `agent`; None when none is queued."""
        return self._call("choose_task", pool, agent)

    def complete_task(self, task_id: str) -> None:
        """Report a task finished."""
        self._call("complete_task", task_id)

    def pending_tasks(self, pool: str) -> list[dict]:
        """Queued tasks in hand-out order."""
        return self._call("pending_tasks", pool)

    def running_tasks(self, pool: str | None = None) -> list[dict]:
        """Tasks handed out and not yet completed."""
        return self._call("running_tasks", pool)

    def set_preemption_policy(
        self,
        min_priority_gap: float = 1.0,
        protected: dict[str, str] | None = None,
        preemptible: dict[str, str] | None = None,
    ) -> dict:
        """Rules of task preemption: the priority gap needed, labels that protect a task or make it preemptible."""
        return self._call("set_preemption_policy", min_priority_gap, protected, preemptible)

    def evaluate_preemption(self, pool: str) -> dict | None:
        """{task, victim} when the pool's next task may preempt a running one, else None (nothing is changed)."""
        return self._call("evaluate_preemption", pool)

    def execute_preemption(self, pool: str, reason: str = "") -> dict | None:
        """Preempt that victim: its agent is told (on_task_preempted) and the victim is requeued."""
        return self._call("execute_preemption", pool, reason)

    def wait_for_agent(self, name: str, timeout_s: float = 60.0) -> AgentRef:
        """A reference once an agent of that name answers (e.g. while the supervisor recreates it)."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                info = self.wait_alive(name, 0, max(0.1, deadline - time.monotonic()))
                return _ref(info)
            except AgentNotFound:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
