"""Wall-time accounting per named stage."""

from __future__ import annotations

import time
from contextlib import contextmanager


class Stopwatch:
    """Accumulates wall time per named stage into a dict."""

    def __init__(self, into: dict[str, float]):
        self.into = into

    @contextmanager
    def __call__(self, name: str):
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.into[name] = self.into.get(name, 0.0) + time.perf_counter() - t0
