"""Waiting in tests without fixed sleeps: poll a condition until a deadline, or check that one keeps holding."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def eventually(check: Callable[[], T], timeout: float = 20.0, every: float = 0.05) -> T:
    """check()'s first truthy answer, polled until `timeout` seconds have passed (then its last answer).

    A loaded 2-core CI machine is slow by seconds, not milliseconds: the deadline is generous and the test
    moves on the moment the condition holds, where a fixed sleep is both too short there and wasted here."""
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got or time.monotonic() > deadline:
            return got
        time.sleep(every)


def holds_for(check: Callable[[], bool], seconds: float, every: float = 0.1) -> bool:
    """True when check() stays truthy on every poll for `seconds` (something must NOT happen meanwhile)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not check():
            return False
        time.sleep(every)
    return bool(check())
