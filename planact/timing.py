"""Wall-time accounting per named stage."""

from __future__ import annotations

import gc
import time
from contextlib import contextmanager

import psutil


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


def freeze_heap() -> None:
    """Exempt everything alive now from the cyclic garbage collector's full passes (`gc.freeze`).

    A training driver holds a large heap that never changes (torch, Ray, Prefect, pydantic, the config),
    and every full collection walked all of it: ~350 ms at a time, one every few rounds, measured in
    benchmarks/round_overhead.py. Objects made later are still collected as usual; garbage first.
    """
    gc.collect()
    gc.freeze()


def thaw_heap() -> None:
    """Hand the frozen objects back to the collector (a notebook's session ends; its run's cycles may go)."""
    gc.unfreeze()


def host_cpu_seconds() -> float:
    """CPU seconds every process of this machine has spent since boot, summed over its cores (idle and
    I/O wait excluded): the difference over a span, divided by span x cores, is how busy the machine was."""
    t = psutil.cpu_times()
    return sum(t) - t.idle - getattr(t, "iowait", 0.0) - getattr(t, "guest", 0.0) - getattr(t, "guest_nice", 0.0)
