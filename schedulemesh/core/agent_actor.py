"""`schedulemesh.core.agent_actor.AgentActor`: the original ScheduleMesh's agent, usable as a Ray actor class.

In the original it is `@ray.remote` over `MetricsReportingAgent`, so callers write
`AgentActor.options(num_cpus=1).remote(name, labels)` and pass it as `actor_class`. ScheduleMesh's
agent-configuration guide also subclasses it (`@ray.remote class ModelServerAgent(AgentActor)`), which Ray
forbids for a real actor class. Here it stays a plain class (subclassable, what the scheduler wraps and
supervises) whose metaclass answers `AgentActor.options(...)` and `AgentActor.remote(...)` with Ray's own
actor class of it: both spellings work.
"""

from __future__ import annotations

from typing import Any

import ray

from schedulemesh.agent import AgentActor as _PlanactAgentActor

_RAY_NAMES = ("options", "remote")
_actor_classes: dict[type, Any] = {}  # class -> its ray.remote actor class, made once (Ray exports it once)


class RemoteClass(type):
    """Metaclass: `Cls.options(**o).remote(...)` and `Cls.remote(...)` create Ray actors of `Cls`."""

    def __getattr__(cls, name: str) -> Any:
        # Only reached when normal lookup fails, so nothing a class defines is shadowed. The class Ray derives
        # when it decorates a subclass (`__ray_actor_class__` in its own dict) must not seem to have these names:
        # Ray would warn that it overwrites them, and it brings its own.
        if name in _RAY_NAMES and "__ray_actor_class__" not in cls.__dict__:
            return getattr(ray_actor_class(cls), name)
        raise AttributeError(f"type object {cls.__name__!r} has no attribute {name!r}")


def ray_actor_class(cls: type) -> Any:
    """`ray.remote(cls)`, made once per class."""
    if cls not in _actor_classes:
        _actor_classes[cls] = ray.remote(cls)
    return _actor_classes[cls]


class AgentActor(_PlanactAgentActor, metaclass=RemoteClass):
    """`AgentActor(name, labels, supervisor=None, *, report_interval=5.0, max_pending_reports=16)`: invoke,
    process, cancel, get_running_tasks, report_metrics; `AgentActor.options(...).remote(name, labels)` makes one."""


__all__ = ["AgentActor", "RemoteClass", "ray_actor_class"]
