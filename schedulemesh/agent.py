"""AgentActor: the base class of supervised agents, and the wrapper that supervises any actor class.

The scheduler never asks callers to wire the supervisor: it creates every agent from
`managed(actor_class)`, a subclass whose constructor binds name, labels and the supervisor
handle *before* the user's `__init__` runs and starts the heartbeat thread after it.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import socket
import threading
import time

import ray

from schedulemesh.agent_tasks import SimulatedTasks
from schedulemesh.reporting import MetricsReportingAgent


def free_port(host: str = "") -> int:
    """A TCP port that is free on this node now (bind port 0, read it back, close)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((host, 0))
        return s.getsockname()[1]


class AgentActor(MetricsReportingAgent, SimulatedTasks):
    """Base class for long-lived agents: identity, heartbeats, a metrics report and a graceful stop.

    Subclasses override `metrics()` to add figures to the heartbeat, `on_stop()` to release what they
    hold, and `on_preempt(reason)` to react before a higher-priority pool evicts them. `busy()` counts
    in-flight work so `least_busy` and `power_of_two` dispatch see the load. From the original
    ScheduleMesh: `report_metrics` / `flush_metrics` (explicit pushes, throttled by `report_interval`)
    and `invoke` / `process` / `cancel` / `get_running_tasks` (simulated work for demos and tests).
    """

    heartbeat_interval_s: float = 1.0
    max_pending_reports: int = 4
    """Heartbeat reports sent and not yet taken by the supervisor, at most (a restarting supervisor must not
    find a backlog of stale load figures; beats over the bound are dropped and counted)."""

    def __init__(
        self,
        name: str | None = None,
        labels: dict[str, str] | None = None,
        supervisor=None,
        *,
        report_interval: float = 5.0,
        max_pending_reports: int = 16,
    ):
        MetricsReportingAgent.__init__(
            self, name, labels, supervisor, report_interval=report_interval, max_pending_reports=max_pending_reports
        )
        # The scheduler binds these before __init__; explicit arguments only fill what it did not.
        if getattr(self, "_sm_name", None) is None:
            self._sm_name = name
        if getattr(self, "_sm_labels", None) is None:
            self._sm_labels = dict(labels or {})
        if getattr(self, "_sm_supervisor", None) is None:
            self._sm_supervisor = supervisor
        self.__dict__.setdefault("_sm_inflight", 0)

    # --- identity ---

    # name and labels read like plain attributes and can be assigned like them (ScheduleMesh's guide does
    # `self.name = name` in __init__); what the supervisor knows the agent by stays in _sm_name/_sm_labels.
    @property
    def name(self) -> str | None:
        """The agent's name (also its Ray actor name), unless the agent assigned its own."""
        return self.__dict__.get("_sm_own_name", self._sm_name)

    @name.setter
    def name(self, value: str | None) -> None:
        self.__dict__["_sm_own_name"] = value

    @property
    def labels(self) -> dict[str, str]:
        """Labels the agent was created with (its pool's labels plus its own), unless it assigned its own."""
        return self.__dict__.get("_sm_own_labels", self._sm_labels)

    @labels.setter
    def labels(self, value: dict[str, str]) -> None:
        self.__dict__["_sm_own_labels"] = value

    @property
    def incarnation(self) -> int:
        """0 for the first creation, +1 for each recreation by the supervisor (a replacement restores state)."""
        return getattr(self, "_sm_incarnation", 0)

    @property
    def supervisor(self):
        """Handle of the supervisor actor (None when constructed outside a scheduler)."""
        return self._sm_supervisor

    # --- load and metrics ---

    @contextlib.contextmanager
    def busy(self):
        """Count a unit of in-flight work for the duration of the block."""
        self._sm_inflight = getattr(self, "_sm_inflight", 0) + 1
        try:
            yield
        finally:
            self._sm_inflight -= 1

    def load(self) -> float:
        """Current load as dispatch sees it (default: in-flight `busy()` blocks)."""
        return float(getattr(self, "_sm_inflight", 0))

    def metrics(self) -> dict:
        """Figures reported with every heartbeat; override to add your own."""
        return {}

    # --- lifecycle hooks ---

    def on_stop(self) -> None:
        """Called by a graceful stop before the process exits."""

    def on_preempt(self, reason: str) -> None:
        """Called before a higher-priority pool evicts this agent."""

    def on_task_preempted(self, task_id: str, reason: str) -> None:
        """Called when a queued task of higher priority takes this agent's running task (task-level preemption)."""

    def task_preempted(self, task_id: str) -> bool:
        """True once the scheduler preempted this task (long tasks check it and stop cooperatively)."""
        return task_id in self.__dict__.get("_sm_preempted_tasks", set())


def takes_identity(actor_class: type) -> bool:
    """True when the class's constructor starts with (name, labels[, supervisor]), as ScheduleMesh's guide writes
    agents: the scheduler then passes them first, before actor_args / actor_kwargs."""
    try:
        params = [p for p in inspect.signature(actor_class.__init__).parameters.values()][1:]
    except (TypeError, ValueError):
        return False
    return [p.name for p in params[:2]] == ["name", "labels"]


def unwrap(actor_class):
    """The Python class behind a `@ray.remote`-decorated one (the scheduler applies its own ray options)."""
    return getattr(actor_class, "__ray_actor_class__", actor_class)


class Managed:
    """What the scheduler adds to every agent class: context bound before the user's constructor, the
    heartbeat thread after it, and the `sm_*` calls the supervisor makes. `managed()` puts it first in a
    subclass of the user's class, so these names win over the user's."""

    _sm_user_class: type = object  # the class managed() wrapped
    _sm_identity: bool = False  # its constructor takes (name, labels[, supervisor]) first

    def __init__(self, _sm_ctx: dict, *args, **kwargs):
        self._sm_name = _sm_ctx["name"]
        self._sm_labels = dict(_sm_ctx["labels"])
        self._sm_supervisor = _sm_ctx["supervisor"]
        self._sm_incarnation = _sm_ctx["incarnation"]
        self._sm_interval = float(_sm_ctx.get("heartbeat_interval_s") or self.heartbeat_interval_s)
        self._sm_inflight = 0
        self._sm_pending: list = []  # ObjectRefs of reports the supervisor has not taken yet
        self._sm_pending_lock = threading.Lock()  # the heartbeat thread and sm_pending_reports both prune it
        self._sm_dropped = 0
        self._sm_stopping = threading.Event()
        user = self._sm_user_class
        if self._sm_identity:  # the guide's convention: name, labels, supervisor first
            params = list(inspect.signature(user.__init__).parameters)[1:]
            ident = (self._sm_name, dict(self._sm_labels))
            if params[2:3] == ["supervisor"]:
                ident += (self._sm_supervisor,)
            user.__init__(self, *ident, *args, **kwargs)
        else:
            user.__init__(self, *args, **kwargs)
        if not issubclass(user, AgentActor):
            AgentActor.__init__(self)
        self._sm_thread = threading.Thread(target=self._sm_heartbeat_loop, name="schedulemesh-heartbeat", daemon=True)
        self._sm_thread.start()

    def _sm_report(self) -> dict:
        try:
            extra = dict(self.metrics())
        except Exception as exc:  # a broken metrics() must not silence the heartbeat
            extra = {"metrics_error": repr(exc)}
        return {
            "pid": os.getpid(),
            "incarnation": self._sm_incarnation,
            "load": self.load(),
            "time": time.time(),
            "dropped_reports": self._sm_dropped,
            **extra,
        }

    def _sm_heartbeat_loop(self) -> None:
        while not self._sm_stopping.is_set():
            if self._sm_supervisor is not None:
                try:
                    report = self._sm_report()  # the user's metrics() runs outside the lock
                    with self._sm_pending_lock:
                        if self._sm_prune() >= self.max_pending_reports:
                            self._sm_dropped += 1  # the supervisor is not taking reports: do not pile them up
                        else:
                            self._sm_pending.append(
                                self._sm_supervisor.heartbeat.remote(self._sm_name, self._sm_incarnation, report)
                            )
                except Exception:  # supervisor restarting; the next beat tries again
                    pass
            self._sm_stopping.wait(self._sm_interval)

    def _sm_prune(self) -> int:
        """Forget the reports the supervisor has taken; returns how many are still in flight (hold the lock:
        unguarded, a beat appended between reading the list and its length made ray.wait ask for more
        refs than it was given)."""
        pending = self._sm_pending
        if pending:
            _, self._sm_pending = ray.wait(pending, num_returns=len(pending), timeout=0)
        return len(self._sm_pending)

    def sm_pending_reports(self) -> dict:
        """Reports in flight to the supervisor and beats dropped because too many were (bounded backlog)."""
        with self._sm_pending_lock:
            return {"pending": self._sm_prune(), "dropped": self._sm_dropped}

    def sm_ready(self) -> dict:
        """Where the agent runs: pid, node id and ip (answered once the constructor has finished)."""
        ctx = ray.get_runtime_context()
        return {
            "pid": os.getpid(),
            "node_id": ctx.get_node_id(),
            "ip": ray.util.get_node_ip_address(),
            "incarnation": self._sm_incarnation,
        }

    def sm_ping(self) -> dict:
        """Liveness probe with the current report."""
        return self._sm_report()

    def sm_free_port(self) -> tuple[str, int]:
        """(node ip, free port) on this agent's node: the rendezvous for a torch.distributed group."""
        return ray.util.get_node_ip_address(), free_port()

    def sm_stop(self, reason: str = "") -> None:
        """Graceful stop: stop heartbeats, run on_stop, exit the actor process."""
        self._sm_stopping.set()
        try:
            self.on_stop()
        finally:
            ray.actor.exit_actor()

    def sm_preempt_task(self, task_id: str, reason: str) -> None:
        """Record that the scheduler preempted a task of this agent, then run the hook."""
        self.__dict__.setdefault("_sm_preempted_tasks", set()).add(task_id)
        self.on_task_preempted(task_id, reason)

    def sm_preempt(self, reason: str) -> None:
        """Tell the agent it is about to be evicted (it is killed right after this returns)."""
        self._sm_stopping.set()
        self.on_preempt(reason)


def managed(actor_class: type) -> type:
    """A subclass of actor_class (and AgentActor) with Managed first: scheduler context, heartbeats, sm_* calls."""
    bases = (Managed, actor_class) + (() if issubclass(actor_class, AgentActor) else (AgentActor,))
    return type(
        actor_class.__name__,
        bases,
        {
            "_sm_user_class": actor_class,
            "_sm_identity": takes_identity(actor_class),
            "__module__": actor_class.__module__,
            "__qualname__": actor_class.__qualname__,
            "__doc__": actor_class.__doc__,
        },
    )
