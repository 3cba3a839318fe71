"""Translate schedulemesh's pool and agent records into the original ScheduleMesh's dict shapes."""

from __future__ import annotations

from schedulemesh import resources as R

CORE = ("cpu", "memory", "gpu")


def shaped(res: dict[str, float] | None) -> dict[str, float]:
    """A resource dict with cpu, memory and gpu always present (custom keys kept)."""
    res = dict(res or {})
    return {**{k: float(res.pop(k, 0.0)) for k in CORE}, **res}


def per_agent(pool: dict) -> dict[str, float] | None:
    """A pool's per-agent default (capacity / target_agents), None when target_agents is 0."""
    n = pool["target_agents"]
    return shaped(R.scale(pool["capacity"], 1.0 / n)) if n else None


def pool_view(pool: dict, placement_strategy: str = "STRICT_PACK") -> dict:
    """The original's pool dict."""
    return {
        "name": pool["name"],
        "labels": dict(pool["labels"]),
        "capacity": shaped(pool["capacity"]),
        "target_agents": pool["target_agents"],
        "placement_strategy": placement_strategy,
        "used_resources": shaped(pool["used"]),
        "reserved_resources": shaped(pool["reserved"]),
        "available_resources": shaped(pool["free"]),
        "default_agent_resources": per_agent(pool),
        "agents": list(pool.get("agents", [])),
    }


def agent_view(info: dict, created: dict | None = None, handle=None) -> dict:
    """The original's agent dict, from the supervisor's record and what create_agent was given."""
    created = created or {}
    status = {"alive": "running"}.get(info["status"], info["status"])
    return {
        "name": info["name"],
        "pool": info["pool"],
        "labels": dict(info["labels"]),
        "resources": shaped(info["resources"]),
        "actor_class_path": created.get("actor_class_path"),
        "actor_init_args": list(created.get("actor_init_args", [])),
        "actor_init_kwargs": dict(created.get("actor_init_kwargs", {})),
        "handle": handle,
        "options": dict(created.get("options", {})),
        "status": status,
        "metrics": dict(info.get("report", {})),
        "load": info.get("load", 0.0),
    }
