"""Choosing one agent among candidates: round_robin, least_busy, random, power_of_two, label_round_robin."""

from __future__ import annotations

import random
from collections import defaultdict

from schedulemesh.errors import InvalidOptions

STRATEGIES = ("round_robin", "least_busy", "random", "power_of_two", "label_round_robin")


class Dispatcher:
    """Keeps the per-selector counters that round-robin strategies need (one per Scheduler)."""

    def __init__(self, seed: int | None = None):
        self.rng = random.Random(seed)
        self.counters: dict[tuple, int] = defaultdict(int)

    def pick(self, candidates: list[dict], strategy: str, key: tuple = (), label_key: str | None = None) -> dict:
        """One of `candidates` (agent info dicts, sorted by name) according to `strategy`."""
        if strategy not in STRATEGIES:
            raise InvalidOptions(f"unknown strategy {strategy!r}; choose one of {', '.join(STRATEGIES)}")
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
        if not label_key:
            raise InvalidOptions("label_round_robin needs label_key= (the label whose values are rotated over)")
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
