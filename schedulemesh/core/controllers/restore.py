"""Ending a RayScheduler's supervisor, and the health answer after a restore from `state_path`.

The original restores pools and queued tasks from `state_path` when a new RayScheduler of the same name
starts, and its `ensure_agent_health` then finds the restored agent records silent and recreates them.
planact's head does that recreation itself as it starts (schedulemesh.recovery), before any call, so
agents answer sooner; the first `ensure_agent_health` afterwards names those agents as stale, recovered
and recreated, which is what code written for the original reads.
"""

from __future__ import annotations

import time
from typing import Any

import ray

NAME_FREE_TIMEOUT_S = 30.0


def end_supervisor(scheduler: Any, name: str, timeout_s: float = NAME_FREE_TIMEOUT_S) -> None:
    """Kill the supervisor and what is left of its agents, then wait until its actor name is free.

    Agents the supervisor created die with it (it owns them) except detached ones, killed here by name.
    The wait lets a new RayScheduler of the same name start a fresh supervisor instead of finding the
    dying one."""
    standing = scheduler.list_agents()  # names and namespaces, while the supervisor can still say
    ray.kill(scheduler.supervisor, no_restart=True)
    for info in standing:
        try:
            ray.kill(ray.get_actor(info["ray_name"], namespace=info["namespace"]), no_restart=True)
        except ValueError:  # gone with its owner already
            pass
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            ray.get_actor(name, namespace=scheduler.namespace)
        except ValueError:
            return
        time.sleep(0.05)
    raise TimeoutError(f"supervisor {name!r} still registered {timeout_s:g}s after it was killed")


def _merged(*names: list[str]) -> list[str]:
    return list(dict.fromkeys(n for group in names for n in group))


def health_answer(reconciled: dict, restored: list[str]) -> dict:
    """ensure_agent_health's {stale, recovered, recreated, timestamp} from the core's reconcile result."""
    return {
        "stale": _merged(reconciled["checked"], restored),
        "recovered": _merged(reconciled["stale"], restored),
        "recreated": _merged(reconciled["recreated"], restored),
        "timestamp": time.time(),
    }
