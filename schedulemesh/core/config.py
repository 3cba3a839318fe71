"""Scheduling configuration of the original ScheduleMesh: the default strategy and strategies to import.

Looked up once (cached) from the file named by `SCHEDULEMESH_CONFIG`, else `./schedulemesh.yaml`,
else the defaults below:

    scheduling:
      default_strategy: least_busy
      strategies:
        - {name: most_free_gpu, import: "mypkg.dispatch:MostFreeGpu", enabled: true}

Each enabled entry's `import` (a SchedulingStrategy subclass or a factory of labels) is registered
under its name, so `create_strategy(name)`, ScheduleMesh proxies and RayScheduler queues can use it; an
entry with `enabled: false` removes that name from the registry (a built-in too), so it is neither listed
nor choosable. The registry reads the configuration before it answers (`available_strategies`,
`create_strategy`), so the file applies even when nobody asked for the configuration first.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import yaml

from schedulemesh.core.scheduling.strategy import disable_strategy, on_lookup, register_strategy, registered


@dataclass(frozen=True)
class StrategyEntry:
    """One strategy of the configuration."""

    name: str
    import_path: str = ""
    enabled: bool = True


@dataclass(frozen=True)
class SchedulingConfig:
    """The default strategy and the configured strategies."""

    default_strategy: str = "least_busy"
    strategies: tuple[StrategyEntry, ...] = field(default_factory=tuple)
    source: str = "defaults"


def _load(path: Path) -> SchedulingConfig:
    data = yaml.safe_load(path.read_text()) or {}
    section = data.get("scheduling", data) if isinstance(data, dict) else {}
    if not isinstance(section, dict):
        raise ValueError(f"{path}: 'scheduling' must be a mapping")
    entries = []
    for i, item in enumerate(section.get("strategies") or []):
        if not isinstance(item, dict) or "name" not in item:
            raise ValueError(f"{path}: scheduling.strategies[{i}] needs a name")
        entries.append(StrategyEntry(str(item["name"]), str(item.get("import") or ""), bool(item.get("enabled", True))))
    config = SchedulingConfig(str(section.get("default_strategy") or "least_busy"), tuple(entries), str(path))
    for entry in config.strategies:
        if not entry.enabled:
            disable_strategy(entry.name)
        elif entry.import_path:
            module, _, attr = entry.import_path.partition(":")
            try:
                factory = getattr(importlib.import_module(module), attr)
            except (ImportError, AttributeError, ValueError) as exc:
                raise ValueError(
                    f"{path}: strategy {entry.name!r}: cannot import {entry.import_path!r} ({exc})"
                ) from None
            register_strategy(entry.name, factory, replace=True)
    if config.default_strategy not in registered():
        raise ValueError(
            f"{path}: default_strategy {config.default_strategy!r} is not one of {', '.join(registered())}"
        )
    return config


_reading = False  # set while the file is read: the registry must not ask for the configuration then


@lru_cache(maxsize=1)
def get_scheduling_config() -> SchedulingConfig:
    """The configuration (read once; `reset_scheduling_config()` makes the next call read again)."""
    global _reading
    _reading = True
    try:
        env = os.environ.get("SCHEDULEMESH_CONFIG")
        for candidate in ([Path(env)] if env else []) + [Path.cwd() / "schedulemesh.yaml"]:
            if candidate.is_file():
                return _load(candidate)
        return SchedulingConfig(strategies=tuple(StrategyEntry(n) for n in registered()))
    finally:
        _reading = False


def apply_scheduling_config() -> None:
    """Read the configuration unless it is being read now (what the strategy registry calls before answering)."""
    if not _reading:
        get_scheduling_config()


def reset_scheduling_config() -> None:
    """Clear the cache only (registered strategies stay registered)."""
    get_scheduling_config.cache_clear()


on_lookup(apply_scheduling_config)  # the registry reads the configuration before answering
