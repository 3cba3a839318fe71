"""Translate between schedulemesh's resource dicts and records and the original ScheduleMesh's shapes.

The core keeps one flat resource dict ({cpu, gpu, memory, <custom>: amount}); the original writes custom
amounts nested, `{cpu, memory, gpu, custom: {name: amount}}`, and also accepts them as top-level keys.
`flat` takes either form in; `shaped` gives the nested form out.
"""

from __future__ import annotations

from collections.abc import Mapping

from schedulemesh import resources as R
from schedulemesh.errors import InvalidOptions

CORE = ("cpu", "memory", "gpu")


def flat(res: Mapping | None) -> dict[str, float] | None:
    """The core's flat dict from the original's resource dict (nested `custom` and top-level custom keys)."""
    if res is None:
        return None
    out = {k: v for k, v in res.items() if k != "custom"}
    nested = res.get("custom") or {}
    if not isinstance(nested, Mapping):
        raise InvalidOptions(f"resources['custom'] must be a dict of custom resources, got {nested!r}")
    for key, value in nested.items():
        if key in out and out[key] != value:  # both spellings of one resource must agree
            raise InvalidOptions(f"custom resource {key!r} given twice: {out[key]!r} and custom[{key!r}]={value!r}")
        out[key] = value
    return R.normalize(out)


def shaped(res: Mapping | None) -> dict:
    """The original's resource dict: cpu, memory and gpu always present, custom amounts under `custom`."""
    res = flat(res) or {}
    return {**{k: float(res.get(k, 0.0)) for k in CORE}, "custom": {k: v for k, v in res.items() if k not in CORE}}


def per_agent(pool: dict) -> dict | None:
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
