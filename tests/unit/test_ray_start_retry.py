"""A local Ray whose node misses Ray's fixed 30 s startup wait (seen on a loaded 2-core machine) is started
again, and what the failed start launched is removed first. Ray itself is replaced by a function that starts
a process and raises Ray's message, as its node start does; no Ray starts here."""

from __future__ import annotations

import subprocess
import sys

import psutil
import pytest

from planact import ray_setup

TIMEOUT = Exception(
    "The current node timed out during startup. This could happen because some of the raylet failed to startup "
    "or the GCS has become overloaded."
)


def fake_init(failures: list[Exception], started: list[subprocess.Popen], calls: list[dict]):
    def init(**kwargs):
        calls.append(kwargs)
        if failures:
            started.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"]))
            raise failures.pop(0)

    return init


def test_a_node_that_missed_the_startup_wait_is_removed_and_started_again(monkeypatch):
    started, calls = [], []
    monkeypatch.setattr(ray_setup.ray, "init", fake_init([TIMEOUT], started, calls))
    try:
        ray_setup.start_private_ray({"address": "local"})
        assert len(calls) == 2 and calls[1] == {"address": "local"}
        assert started[0].wait(timeout=10) is not None  # the first start's process was killed, not left
        assert not psutil.pid_exists(started[0].pid) or psutil.Process(started[0].pid).status() == "zombie"
    finally:
        for p in started:
            p.kill()


def test_other_errors_and_a_second_timeout_are_raised(monkeypatch):
    started, calls = [], []
    monkeypatch.setattr(ray_setup.ray, "init", fake_init([ValueError("bad num_cpus")], started, calls))
    with pytest.raises(ValueError, match="bad num_cpus"):
        ray_setup.start_private_ray({})
    assert len(calls) == 1  # a configuration error is not retried
    monkeypatch.setattr(ray_setup.ray, "init", fake_init([TIMEOUT, TIMEOUT], started, calls))
    with pytest.raises(Exception, match="timed out during startup"):
        ray_setup.start_private_ray({})
    assert len(calls) == 3
    for p in started:
        p.kill()
        p.wait()
