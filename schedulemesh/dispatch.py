"""Choosing one agent among candidates: round_robin, least_busy, random, power_of_two, label_round_robin,
plus strategies registered by name (in code, or from a YAML file naming `module:function`)."""

from __future__ import annotations

import importlib
import random
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

from schedulemesh.errors import InvalidOptions

STRATEGIES = ("round_robin", "least_busy", "random", "power_of_two", "label_round_robin")


# name -> fn(candidates, rng) -> one candidate; candidates are agent info dicts (name, labels, load, report...).
CUSTOM: dict[str, Callable[[list[dict], random.Random], dict]] = {}


def register_strategy(name: str, fn: Callable[[list[dict], random.Random], dict]) -> None:
    """Make `fn(candidates, rng) -> candidate` choosable as `strategy=name` (built-in names cannot be replaced)."""
    if name in STRATEGIES:
        raise InvalidOptions(f"strategy {name!r} is built in and cannot be replaced")
    if not callable(fn):
        raise InvalidOptions(f"strategy {name!r}: {fn!r} is not callable")
    CUSTOM[name] = fn


def load_strategies(path: str | Path) -> list[str]:
    """Register the strategies a YAML file names: `strategies: {name: "package.module:function", ...}`."""
    import yaml

    data = yaml.safe_load(Path(path).read_text()) or {}
    entries = data.get("strategies") if isinstance(data, dict) else None
    if not isinstance(entries, dict):
        raise InvalidOptions(f"{path}: expected a mapping 'strategies: {{name: module:function}}'")
    for name, target in entries.items():
        module, _, attr = str(target).partition(":")
        try:
            fn = getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError, ValueError) as exc:
            raise InvalidOptions(f"{path}: strategies.{name}: cannot load {target!r} ({exc})") from None
        register_strategy(str(name), fn)
    return list(entries)


def check_strategy(strategy: str) -> None:
    """Refuse an unknown strategy where it is chosen, before any agent is looked up."""
    if strategy not in STRATEGIES and strategy not in CUSTOM:
        known = ", ".join([*STRATEGIES, *sorted(CUSTOM)])
        raise InvalidOptions(f"unknown strategy {strategy!r}; choose one of {known}")


def infer_label_key(candidates: list[dict]) -> str | None:
    """label_round_robin without label_key: the first label (by name) whose values differ among the candidates."""
    keys = sorted({k for a in candidates for k in a["labels"]})
    return next((k for k in keys if len({a["labels"].get(k, "") for a in candidates}) > 1), None)


class Dispatcher:
    """Keeps the per-selector counters that round-robin strategies need (one per Scheduler)."""

    def __init__(self, seed: int | None = None):
        self.rng = random.Random(seed)
        self.counters: dict[tuple, int] = defaultdict(int)

    def pick(self, candidates: list[dict], strategy: str, key: tuple = (), label_key: str | None = None) -> dict:
        """One of `candidates` (agent info dicts, sorted by name) according to `strategy`."""
        check_strategy(strategy)
        if not candidates:
            raise InvalidOptions("no candidates to choose from")
        if strategy in CUSTOM:
            chosen = CUSTOM[strategy](list(candidates), self.rng)
            if chosen not in candidates:
                raise InvalidOptions(f"strategy {strategy!r} returned something that is not one of its candidates")
            return chosen
        if strategy == "round_robin":
            return self._next(candidates, key)
        if strategy == "least_busy":
            return min(candidates, key=lambda a: (a["load"], a["name"]))
        if strategy == "random":
            return self.rng.choice(candidates)
        if strategy == "power_of_two":
            # Two random candidates, the less loaded wins: near least-busy balance without a global scan.
            pair = self.rng.sample(candidates, min(2, len(candidates)))
            return min(pair, key=lambda a: (a["load"], a["name"]))
        label_key = label_key or infer_label_key(candidates)
        if label_key is None:  # every candidate carries the same labels: nothing to rotate over but agents
            return self._next(candidates, key)
        # Rotate over the label's values first (e.g. zones), then round-robin inside the chosen value.
        values = sorted({a["labels"].get(label_key, "") for a in candidates})
        value = values[self._tick(key + ("value", label_key)) % len(values)]
        return self._next([a for a in candidates if a["labels"].get(label_key, "") == value], key + (value,))

    def _tick(self, key: tuple) -> int:
        i = self.counters[key]
        self.counters[key] += 1
        return i

    def _next(self, candidates: list[dict], key: tuple) -> dict:
        return candidates[self._tick(key) % len(candidates)]
