"""A pytest plugin that records which repository functions each test calls (loaded with `-p`).

It writes `.planact-coverage.json` in the working directory: test node id -> [[file, function], ...],
plus the key "<import>" for functions that ran while modules were imported or tests collected (a bug in
one of those can break any test, so the corpus validates such mutants against the whole suite).
Functions are named as the mutation operators name them: "func" or "Class.method"; code nested in a
function (inner functions, lambdas, comprehensions) counts as that function.
"""

from __future__ import annotations

import json
import os
import sys
import threading

import pytest

_ROOT = os.getcwd() + os.sep
_IMPORT = "<import>"


class _Recorder:
    """A profile hook: for every call into a repository file, add (file, function) to the current bucket."""

    def __init__(self) -> None:
        self.calls: dict[str, set[tuple[str, str]]] = {_IMPORT: set()}
        self.bucket = self.calls[_IMPORT]
        self._names: dict[object, tuple[str, str] | None] = {}

    def _name(self, code) -> tuple[str, str] | None:
        if code.co_filename.startswith(_ROOT):
            qual = code.co_qualname.split(".<locals>")[0]
            if qual != "<module>" and not qual.startswith("<"):
                return code.co_filename[len(_ROOT) :], qual
        return None

    def __call__(self, frame, event, arg):
        if event == "call":
            code = frame.f_code
            try:
                key = self._names[code]
            except KeyError:
                key = self._names[code] = self._name(code)
            if key is not None:
                self.bucket.add(key)


_recorder = _Recorder()


def pytest_configure(config) -> None:
    """Start recording before collection imports the package."""
    sys.setprofile(_recorder)
    threading.setprofile(_recorder)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Calls made by a test's setup, call and teardown go to that test's bucket."""
    _recorder.bucket = _recorder.calls.setdefault(item.nodeid, set())
    yield
    _recorder.bucket = _recorder.calls[_IMPORT]


def pytest_sessionfinish(session, exitstatus) -> None:
    """Write the map once the run is over."""
    sys.setprofile(None)
    with open(".planact-coverage.json", "w") as fh:
        json.dump({k: sorted(v) for k, v in _recorder.calls.items()}, fh)
