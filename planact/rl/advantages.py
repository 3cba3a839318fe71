"""Group-relative advantages on plain lists: no torch, so a flow's driver can score a round without
importing it (torch's import is ~2 CPU-s per process, and every run's driver scores rounds)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence


def normalise(values: Sequence[float], std_normalize: bool, eps: float, singleton: str = "zero") -> list[float]:
    """(v - mean) / (std + eps) over one group; a group of equal values gets exactly 0.

    `singleton` says what a group of one gets: "zero" (no baseline to compare with) or "identity" (its raw
    value, mean 0 and std 1). Equal values are tested, not left to the arithmetic: equal non-dyadic values
    (0.1, 0.1, 0.1) leave a mean that is off in the last bit, and that residue over eps is a spurious signal.
    """
    if len(values) == 1:
        return [float(values[0])] if singleton == "identity" else [0.0]
    if max(values) == min(values):
        return [0.0] * len(values)
    mean = statistics.fmean(values)
    if not std_normalize:
        return [v - mean for v in values]
    std = statistics.stdev(values)
    return [(v - mean) / (std + eps) for v in values]


def group_advantages(rewards: Sequence[float], std_normalize: bool = True, eps: float = 1e-6) -> list[float]:
    """GRPO's A_i = r_i - mean(group), optionally / (std(group) + eps), for one group of rewards."""
    return normalise(rewards, std_normalize, eps, "zero")
