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

__all__ = ["AgentActor", "AgentCreationError", "AgentNotFound", "AgentRef", "AlreadyExists", "InsufficientCapacity",
           "InvalidOptions", "PoolNotFound", "STRATEGIES", "Scheduler", "SchedulemeshError", "free_port",
           "load_strategies", "register_strategy"]
