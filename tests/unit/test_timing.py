"""The host CPU clock the rounds log (`time/host_cpu_s`) and the async benchmark's CPU bound read."""

from __future__ import annotations

import os
import time

from planact.timing import host_cpu_seconds

from .tool_module import load_tool


def test_host_cpu_seconds_counts_a_busy_loop_and_not_a_sleep():
    t0 = host_cpu_seconds()
    end = time.process_time() + 0.3
    while time.process_time() < end:  # 0.3 s of this process's CPU
        pass
    busy = host_cpu_seconds() - t0
    assert busy >= 0.25  # the loop is on the machine's clock (plus whatever else ran meanwhile)
    # A sleep adds only what other processes spent meanwhile: at most every core for its wall time. (Comparing
    # it with the busy loop failed beside a loaded suite, where both read ~2 cores' worth.)
    t1, w1 = host_cpu_seconds(), time.perf_counter()
    time.sleep(0.3)
    slept = host_cpu_seconds() - t1
    assert slept <= (os.cpu_count() or 1) * (time.perf_counter() - w1) + 0.05, slept


def test_cpu_bound_is_cores_over_utilisation():
    bench = load_tool("async_rounds", "benchmarks")
    assert bench.cpu_bound(round_s=10.0, host_cpu_s=20.0, cores=2) == 1.0  # both cores full: nothing to overlap
    assert bench.cpu_bound(round_s=10.0, host_cpu_s=10.0, cores=2) == 2.0  # half idle: at most twice as fast
    assert bench.overlap_bound(10.0, 3.0) == 10.0 / 7.0
