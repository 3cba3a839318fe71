"""Small statistics the benchmarks share."""

from __future__ import annotations

import math


def sign_test(better: int, worse: int) -> float:
    """Two-sided exact sign test over the paired seeds that differ (ties dropped): how often chance splits this
    unevenly."""
    n, k = better + worse, min(better, worse)
    if n == 0:
        return 1.0
    return min(1.0, 2 * sum(math.comb(n, i) for i in range(k + 1)) / 2**n)
