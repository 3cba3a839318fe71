"""A pytest plugin that sends each test's outcome to the host over the channel it opened (loaded with `-p`).

The host (graph_planner.corpus.validate) reads these lines from a pipe only it reads, never from a
file in the working copy, and cross-checks them with its canary tests and pytest's exit status. It is
loaded before the repository's conftest files and package, from a folder outside the working copy.
"""

from __future__ import annotations

import json
import os

_out = None


def _send(row: dict) -> None:
    _out.write(json.dumps(row) + "\n")
    _out.flush()


def pytest_configure(config) -> None:
    """Take the channel before any repository code is imported; the variable is gone afterwards."""
    global _out
    fd = os.environ.pop("PLANACT_CHANNEL_FD", None)
    _out = os.fdopen(int(fd), "w") if fd else open(os.devnull, "w")


def pytest_runtest_logreport(report) -> None:
    """One line per phase of each test: its node id (the id pytest can run again), outcome, seconds; a
    unittest subTest's report is marked `sub` (pytest reports each under its test's id)."""
    row = {"id": report.nodeid, "when": report.when, "outcome": report.outcome, "s": round(float(report.duration), 4)}
    if type(report).__name__ == "SubtestReport":
        row["sub"] = 1
    _send(row)


def pytest_collectreport(report) -> None:
    """Collection errors (a module that no longer imports) are reported as such."""
    if report.failed:
        _send({"collect_error": report.nodeid})


def pytest_sessionfinish(session, exitstatus) -> None:
    """The last line: pytest's exit status and its own counts."""
    _send({"end": int(exitstatus), "failed": session.testsfailed, "collected": session.testscollected})
