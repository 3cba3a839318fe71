"""Resource requests: one normalised dict {cpu, gpu, memory (MB), <custom>...} and its Ray spelling."""

from __future__ import annotations

from collections.abc import Mapping

from schedulemesh.errors import InsufficientCapacity, InvalidOptions

# Built-in keys; every other key is a Ray custom resource.
BUILTIN = ("cpu", "gpu", "memory")
EPS = 1e-9

# Options create_agent passes through to `ActorClass.options`. Resources are not among them: they go
# through `resources=` so the pool ledger sees every unit an agent holds.
RAY_OPTIONS = frozenset(
    {
        "max_restarts",
        "max_task_retries",
        "max_concurrency",
        "max_pending_calls",
        "lifetime",
        "name",
        "namespace",
        "runtime_env",
        "scheduling_strategy",
        "get_if_exists",
        "concurrency_groups",
        "label_selector",
        "accelerator_type",
        "enable_task_events",
        "placement_group",
        "placement_group_bundle_index",
        "placement_group_capture_child_tasks",
        "object_store_memory",
    }
)
RESOURCE_OPTIONS = {"num_cpus": "cpu", "num_gpus": "gpu", "memory": "memory", "resources": "<custom>"}


def normalize(resources: Mapping[str, float] | None) -> dict[str, float]:
    """Validate a resource request and drop zero entries."""
    out: dict[str, float] = {}
    for key, value in (resources or {}).items():
        if not isinstance(key, str) or not key:
            raise InvalidOptions(f"resource names must be non-empty strings, got {key!r}")
        try:
            v = float(value)
        except (TypeError, ValueError):
            raise InvalidOptions(f"resource {key!r} must be a number, got {value!r}") from None
        if v < 0:
            raise InvalidOptions(f"resource {key!r} must be >= 0, got {v:g}")
        if v > 0:
            out[key.lower() if key.lower() in BUILTIN else key] = v
    return out


def add(a: Mapping[str, float], b: Mapping[str, float], sign: float = 1.0) -> dict[str, float]:
    """a + sign*b, dropping entries that reach zero."""
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0.0) + sign * v
        if abs(out[k]) < EPS:
            del out[k]
    return out


def scale(a: Mapping[str, float], n: float) -> dict[str, float]:
    """Every amount times n."""
    return {k: v * n for k, v in a.items() if v * n > 0}


def shortfall(request: Mapping[str, float], available: Mapping[str, float]) -> dict[str, float]:
    """Per resource, how much of the request `available` cannot cover (empty when it fits)."""
    return {k: v - available.get(k, 0.0) for k, v in request.items() if v > available.get(k, 0.0) + EPS}


def describe_shortfall(
    where: str, short: Mapping[str, float], request: Mapping[str, float], available: Mapping[str, float]
) -> str:
    """'cpu short by 0.5 (requested 1, free 0.5)' for every short resource."""
    parts = [
        f"{k} short by {v:g} (requested {request[k]:g}, free {max(available.get(k, 0.0), 0.0):g})"
        for k, v in sorted(short.items())
    ]
    return f"Insufficient {where} capacity for requested resources: " + "; ".join(parts)


def require(where: str, request: Mapping[str, float], available: Mapping[str, float]) -> None:
    """Raise InsufficientCapacity naming each short resource when request does not fit."""
    short = shortfall(request, available)
    if short:
        raise InsufficientCapacity(describe_shortfall(where, short, request, available))


def from_ray(ray_resources: Mapping[str, float]) -> dict[str, float]:
    """Ray's resource dict (CPU, GPU, memory in bytes, custom) in schedulemesh units."""
    out = {}
    for k, v in ray_resources.items():
        if k == "CPU":
            out["cpu"] = float(v)
        elif k == "GPU":
            out["gpu"] = float(v)
        elif k == "memory":
            out["memory"] = float(v) / 2**20
        elif k == "object_store_memory" or k.startswith("node:") or k.startswith("bundle_group"):
            continue
        else:
            out[k] = float(v)
    return out


def to_ray_options(resources: Mapping[str, float]) -> dict:
    """num_cpus / num_gpus / memory (bytes) / resources={custom} for ActorClass.options."""
    opts: dict = {"num_cpus": resources.get("cpu", 0.0), "num_gpus": resources.get("gpu", 0.0)}
    if resources.get("memory"):
        opts["memory"] = int(resources["memory"] * 2**20)
    custom = {k: v for k, v in resources.items() if k not in BUILTIN}
    if custom:
        opts["resources"] = custom
    return opts


def to_bundle(resources: Mapping[str, float]) -> dict[str, float]:
    """A placement-group bundle in Ray's spelling (CPU, GPU, memory bytes, custom), zero entries dropped."""
    opts = to_ray_options(resources)
    bundle = {
        "CPU": opts["num_cpus"],
        "GPU": opts["num_gpus"],
        "memory": opts.get("memory", 0),
        **opts.get("resources", {}),
    }
    return {k: v for k, v in bundle.items() if v}


def split_ray_options(ray_options: Mapping | None) -> tuple[dict, dict[str, float]]:
    """(the other options, checked; the resources they name in Ray's spelling, as a request).

    ScheduleMesh's guide allows num_cpus / num_gpus / memory (bytes) / resources={custom} in ray_options,
    overridden by `resources=`: they become part of the agent's request so the pool ledger sees them.
    """
    opts = dict(ray_options or {})
    request: dict[str, float] = {}
    if "num_cpus" in opts:
        request["cpu"] = opts.pop("num_cpus")
    if "num_gpus" in opts:
        request["gpu"] = opts.pop("num_gpus")
    if "memory" in opts:
        request["memory"] = float(opts.pop("memory")) / 2**20
    custom = opts.pop("resources", None) or {}
    if not isinstance(custom, Mapping):
        raise InvalidOptions(f"ray_options['resources'] must be a dict of custom resources, got {custom!r}")
    request.update(custom)
    return check_ray_options(opts), normalize(request)


def check_ray_options(ray_options: Mapping | None) -> dict:
    """Reject unknown keys (and resource keys: split_ray_options moves those into the request) by name."""
    opts = dict(ray_options or {})
    for key in opts:
        if key in RESOURCE_OPTIONS:
            raise InvalidOptions(
                f"ray_options[{key!r}] is a resource: pass it in resources= as "
                f"{RESOURCE_OPTIONS[key]!r} so the pool ledger accounts for it"
            )
        if key not in RAY_OPTIONS:
            raise InvalidOptions(f"unknown ray_options key {key!r}; allowed: {', '.join(sorted(RAY_OPTIONS))}")
    if opts.get("lifetime") not in (None, "detached", "non_detached"):
        raise InvalidOptions(f"ray_options['lifetime'] must be 'detached' or 'non_detached', got {opts['lifetime']!r}")
    for key in ("max_restarts", "max_task_retries"):
        if key in opts and (not isinstance(opts[key], int) or opts[key] < -1):
            raise InvalidOptions(f"ray_options[{key!r}] must be an int >= -1, got {opts[key]!r}")
    strategy = opts.get("scheduling_strategy")
    if isinstance(strategy, str) and strategy not in ("DEFAULT", "SPREAD"):
        hint = (
            " (NODE_AFFINITY needs the node: pass ray.util.scheduling_strategies.NodeAffinitySchedulingStrategy("
            "node_id=..., soft=...))"
            if strategy == "NODE_AFFINITY"
            else ""
        )
        raise InvalidOptions(
            f"ray_options['scheduling_strategy'] as a string must be 'DEFAULT' or 'SPREAD', got {strategy!r}{hint}"
        )
    if "max_concurrency" in opts and (not isinstance(opts["max_concurrency"], int) or opts["max_concurrency"] < 1):
        raise InvalidOptions(f"ray_options['max_concurrency'] must be an int >= 1, got {opts['max_concurrency']!r}")
    return opts
