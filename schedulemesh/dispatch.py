"""Choosing one agent among candidates: round_robin, least_busy, random, power_of_two, label_round_robin."""

from __future__ import annotations

import random
from collections import defaultdict

from schedulemesh.errors import InvalidOptions

STRATEGIES = ("round_robin", "least_busy", "random", "power_of_two", "label_round_robin")


def check_strategy(strategy: str) -> None:
    """Refuse an unknown strategy where it is chosen, before any agent is looked up."""
    if strategy not in STRATEGIES:
        raise InvalidOptions(f"unknown strategy {strategy!r}; choose one of {', '.join(STRATEGIES)}")


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
