"""schedulemesh: resource pools and supervised long-lived agents on Ray.

    sched = Scheduler(namespace="demo")
    sched.create_pool("gen", labels={"role": "actor"}, resources={"cpu": 1}, target_agents=2)
    sched.create_agent("gen-0", "gen", Engine, actor_args=(path,))
    sched.choose(pool="gen", strategy="least_busy").call("generate", prompts)

No Prefect imports: flows use it through planact.agents.
"""

from schedulemesh.agent import AgentActor, free_port
from schedulemesh.dispatch import STRATEGIES, load_strategies, register_strategy
from schedulemesh.errors import (
    AgentCreationError,
    AgentNotFound,
    AlreadyExists,
    InsufficientCapacity,
    InvalidOptions,
    PoolNotFound,
    SchedulemeshError,
)
from schedulemesh.scheduler import AgentRef, Scheduler

__version__ = "0.3.0"

# The original ScheduleMesh's top-level names, imported on first use (they pull in Ray-side modules).
_LAZY = {
    "RayScheduler": "schedulemesh.core.controllers.ray_scheduler",
    "ScheduleMesh": "schedulemesh.core.controllers.schedule_mesh",
    "SimpleScheduler": "schedulemesh.simple",
    "SimpleTaskSpec": "schedulemesh.simple",
}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'schedulemesh' has no attribute {name!r}")


__all__ = [
    "AgentActor",
    "AgentCreationError",
    "AgentNotFound",
    "AgentRef",
    "AlreadyExists",
    "InsufficientCapacity",
    "InvalidOptions",
    "PoolNotFound",
    "STRATEGIES",
    "Scheduler",
    "SchedulemeshError",
    "free_port",
    "load_strategies",
    "register_strategy",
    "RayScheduler",
    "ScheduleMesh",
    "SimpleScheduler",
    "SimpleTaskSpec",
    "__version__",
]
