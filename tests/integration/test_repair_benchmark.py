"""benchmarks/repair_throughput.py in its tiny mode, so the benchmark cannot rot."""

from __future__ import annotations

import subprocess
import sys

from .conftest import REPO


def test_repair_throughput_benchmark_runs_and_prints_the_scaling():
    out = subprocess.run(
        [sys.executable, "benchmarks/repair_throughput.py", "--tiny", "--slots", "2"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.strip().splitlines()
    assert lines[1].startswith("1 slot:") and lines[2].startswith("2 slots:")
    assert "scaling efficiency" in lines[3] and "tasks/s" in lines[2]
    # the verdict's defences, measured on the same gold patches: the guard's and the double judgement's cost
    guard, twice = (float(line.split(": ")[1].split("x")[0]) for line in lines[-2:])
    assert lines[-2].startswith("guard:") and lines[-1].startswith("a pass judged twice:")
    assert guard >= 0.5 and twice > 1.0  # a confirming run is a second run: judging twice cannot be free
