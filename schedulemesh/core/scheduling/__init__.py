"""The original ScheduleMesh's strategy objects: `SchedulingStrategy.select(agents)` and a registry by name.

Built-ins decide with schedulemesh.dispatch (the same code the Scheduler's `choose` runs); a strategy
registered here is also choosable by name in `Scheduler.choose` and `RayScheduler.submit_task`.
Agents are records with `name`, `labels` and optionally `metrics` ({queue_length: ...}) or `load`.
"""

from schedulemesh.core.scheduling.strategy import (
    LabelRoundRobinStrategy,
    LeastBusyStrategy,
    PowerOfTwoStrategy,
    RandomStrategy,
    RoundRobinStrategy,
    SchedulingStrategy,
    available_strategies,
    create_strategy,
    register_strategy,
    unregister_strategy,
)

__all__ = [
    "LabelRoundRobinStrategy",
    "LeastBusyStrategy",
    "PowerOfTwoStrategy",
    "RandomStrategy",
    "RoundRobinStrategy",
    "SchedulingStrategy",
    "available_strategies",
    "create_strategy",
    "register_strategy",
    "unregister_strategy",
]
