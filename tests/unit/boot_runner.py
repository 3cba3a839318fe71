"""Run the repair sandbox's boot script as a plain subprocess (no sandbox) and read what it sent on its channel."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from graph_planner.corpus.channel import read_channel
from graph_planner.corpus.testrun import _BOOT


def run_boot(tmp_path: Path, cfg: dict, key: bytes, read: int, write: int):
    """(exit status, channel report) of the boot script run in `tmp_path` with `cfg` (its "channel" is `write`).

    The inner pytest's own output is dropped: its "FAILED tests/test_pkg.py::..." lines are the test's input,
    and CI's summary read them on the outer log as failures of the suite."""
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-s", str(_BOOT)],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        pass_fds=(write,),
    )
    os.close(write)
    proc.communicate(json.dumps(cfg).encode(), timeout=60)
    with os.fdopen(read) as fh:
        return proc.returncode, read_channel(fh.read(), key)
