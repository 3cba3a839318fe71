"""A process is known by its pid and its start in clock ticks since boot, never by a time read from the wall clock.

psutil's create_time adds the boot time, which the kernel derives from the wall clock at each read: an NTP
adjustment or a VM resumed after a pause moves it. The suite's shared servers are recorded when started and
stopped at the end only if they are still "the same process"; with create_time compared exactly, a server
recorded before such a step looked like a stranger and was left running (a Prefect and an MLflow server survived
a suite run on 2026-12-01: the one cause found, not shown to be that one). planact.reaper's watchdog recognised
the driver's descendants the same way.
"""

from __future__ import annotations

import os
import subprocess
import sys

import psutil
import pytest

from planact.reaper import start_ticks
from tools import services


def test_a_recorded_process_is_still_itself_after_the_wall_clock_steps(monkeypatch):
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        record = {"pid": child.pid, "started": start_ticks(child.pid)}
        assert record["started"] is not None and services._alive(record)
        assert not services._alive({**record, "started": record["started"] - 1})  # another process with that pid
        assert start_ticks(os.getpid()) == start_ticks(os.getpid()) != record["started"]

        linux = pytest.importorskip("psutil._pslinux")
        before, booted = psutil.Process(child.pid).create_time(), psutil.boot_time()
        monkeypatch.setattr(linux, "boot_time", lambda: booted + 1.0)  # the wall clock stepped by a second
        assert psutil.Process(child.pid).create_time() == before + 1.0  # what the record used to compare
        assert services._alive(record)  # still recognised: stopped at the end of the run, not left behind
    finally:
        child.kill()
        child.wait()
    assert start_ticks(child.pid) is None and not services._alive(record)
