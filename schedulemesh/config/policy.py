"""Preemption aggressiveness levels: one word that sets the label and same-pool thresholds together.

A lower threshold preempts more readily. Values may be given as a level, an alias (`urgent`,
`default`, `batch`...) or `"env:VAR"` to read the level from an environment variable at call time.
"""

from __future__ import annotations

import os
from enum import StrEnum


class PreemptionAggressiveness(StrEnum):
    """How readily a running task is preempted: HIGH preempts on small priority gaps, LOW only on large ones."""

    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"

    @property
    def thresholds(self) -> tuple[float, float]:
        """(label_preemption_threshold, same_pool_preemption_threshold) of this level."""
        return THRESHOLDS[self]


THRESHOLDS = {
    PreemptionAggressiveness.HIGH: (0.1, 0.5),
    PreemptionAggressiveness.MEDIUM: (0.5, 1.0),
    PreemptionAggressiveness.LOW: (1.0, 3.0),
}

ALIASES = {
    "high": "high",
    "aggressive": "high",
    "urgent": "high",
    "critical": "high",
    "fast": "high",
    "medium": "medium",
    "default": "medium",
    "normal": "medium",
    "balanced": "medium",
    "moderate": "medium",
    "low": "low",
    "conservative": "low",
    "batch": "low",
    "gentle": "low",
    "lenient": "low",
}


def normalize_aggressiveness(value) -> PreemptionAggressiveness | None:
    """The level a value names (level, alias, case-insensitive), or None when it names none."""
    if isinstance(value, PreemptionAggressiveness):
        return value
    if not isinstance(value, str):
        return None
    word = ALIASES.get(value.strip().lower())
    return PreemptionAggressiveness(word) if word else None


def resolve_preemption_aggressiveness(value) -> tuple[PreemptionAggressiveness | None, str]:
    """(level or None, a hint saying where the level came from or why none); reads `"env:VAR"` values."""
    if value is None:
        return None, "no aggressiveness given"
    source = repr(value)
    if isinstance(value, str) and value.strip().lower().startswith("env:"):
        var = value.strip()[4:]
        raw = os.environ.get(var)
        if raw is None:
            return None, f"environment variable {var} is not set"
        value, source = raw, f"{var}={raw!r}"
    level = normalize_aggressiveness(value)
    if level is None:
        return (
            None,
            f"{source} is not an aggressiveness level; use one of high, medium, low or an alias "
            f"({', '.join(sorted(ALIASES))})",
        )
    return level, f"{level.value} from {source}"
