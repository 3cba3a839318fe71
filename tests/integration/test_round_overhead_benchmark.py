"""benchmarks/round_overhead.py in its tiny mode, so the benchmark cannot rot (it broke once when the
experience pool joined the round and nothing ran it)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from .conftest import REPO, cli_env


@pytest.mark.slow
def test_round_overhead_benchmark_tiny_mode(prefect_api):
    out = subprocess.run([sys.executable, "benchmarks/round_overhead.py", "--tiny"], cwd=REPO, capture_output=True,
                         text=True, timeout=600, env=cli_env())
    assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]
    ratio = re.search(r"ratio flow/loop: ([0-9.]+)", out.stdout)
    assert ratio and float(ratio.group(1)) > 0
    # Both sides did the same stages, experience included (the loop is a fair baseline).
    for side in ("loop", "flow"):
        stages = re.search(rf"^{side} stages \(median s\): (.*)$", out.stdout, re.M).group(1)
        assert all(s in stages for s in ("planner_generate", "actor_execute", "experience", "train")), stages
