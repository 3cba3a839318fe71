"""The console's progress display for a training run, and for every long phase before and between rounds.

On a terminal, one bar redrawn in place every round; in a log or CI, where nothing is redrawn, a line
only every few rounds (at most `max_lines` over the run, plus rounds with a held-out evaluation and the
last), so that a 60-round run prints tens of lines, not hundreds. The lines that are printed also reach
the Prefect flow run's logs (the flow prints them); the in-place bar is for the terminal alone.

A phase that can take minutes (localisation contexts, the warm start, a held-out evaluation, registration,
a corpus build) reports the same way, through a callback its library function accepts (`ProgressFn`):
`Phase` times it and hands each `PhaseUpdate` (k of n, ETA) to the callback; `PhasePrinter` prints them
with the rounds' display. Libraries never import Prefect: the task layer passes a callback that prints
and also updates a Prefect progress artifact (tasks/progress.py). A phase that runs inside an agent (the
warm start) writes its updates to a file (`FileProgress`) that the waiting task reads (`read_progress`).
"""

from __future__ import annotations

import inspect
import json
import math
import os
import shutil
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TextIO


class ProgressDisplay:
    """Decides which round lines are printed, and redraws the in-place bar on a terminal."""

    def __init__(self, total_rounds: int, max_lines: int = 20, stream: TextIO | None = None):
        self.total = max(1, total_rounds)
        self.every = max(1, math.ceil(self.total / max_lines))
        self.stream = stream if stream is not None else sys.__stdout__
        self.tty = bool(self.stream is not None and hasattr(self.stream, "isatty") and self.stream.isatty())

    def due(self, round_idx: int, evaluated: bool = False, first: bool = False) -> bool:
        """True when this round's line should be printed for good (kept in the log and the UI)."""
        return first or evaluated or round_idx >= self.total or round_idx % self.every == 0

    def show(self, line: str) -> None:
        """Redraw the bar in place (terminal only); the cursor goes back to column 0, so any log line
        printed next overwrites it instead of being appended to it."""
        if not self.tty:
            return
        width = shutil.get_terminal_size((120, 20)).columns - 1
        self.stream.write("\r\x1b[K" + line[:width] + "\r")
        self.stream.flush()

    def clear(self) -> None:
        """Erase the bar (before the end-of-run summary)."""
        if self.tty:
            self.stream.write("\r\x1b[K")
            self.stream.flush()


def bar(done: float, total: float, width: int = 20) -> str:
    """`[#####...............]`: the share done, as the round line and every phase line draw it."""
    filled = round(width * min(max(done, 0), total) / max(total, 1))
    return f"[{'#' * filled}{'.' * (width - filled)}]"


def eta_text(eta_s: float | None) -> str:
    """` | ETA 3.2 min` (empty while no estimate exists)."""
    return "" if eta_s is None else f" | ETA {eta_s / 60:.1f} min"


@dataclass(frozen=True)
class PhaseUpdate:
    """Where a long phase stands: `done` of `total` units, seconds so far, and the estimated seconds left."""

    what: str
    done: int
    total: int
    elapsed_s: float
    eta_s: float | None
    note: str = ""

    def line(self) -> str:
        """The console line, drawn like a round's: bar, what, k/n, note, time so far, ETA."""
        note = f" ({self.note})" if self.note else ""
        return (
            f"{bar(self.done, self.total)} {self.what} {self.done}/{self.total}{note}, "
            f"{self.elapsed_s / 60:.1f} min so far{eta_text(self.eta_s)}"
        )


ProgressFn = Callable[[PhaseUpdate], None]


class Phase:
    """Times one phase of `total` units and reports each step to `report` (a no-op without one)."""

    def __init__(self, what: str, total: int, report: ProgressFn | None, clock: Callable[[], float] = time.monotonic):
        self.what, self.total, self.report, self.clock = what, max(0, total), report, clock
        self.done = 0
        self._lock = threading.Lock()  # parallel slots advance one phase from their own threads
        self.t0 = clock()
        self._send("")  # announced before its first unit: the console says what it is waiting for

    def advance(self, n: int = 1, note: str = "") -> None:
        """`n` more units done (`note`: what was just finished, shown in brackets); safe from any thread."""
        with self._lock:
            self.done = min(self.total, self.done + n)
            self._send(note)

    def finish(self, note: str = "") -> None:
        """Done early (a warm start at its plateau): the last line shows the units actually run as the total."""
        with self._lock:
            self.total = self.done
            self._send(note)

    def _send(self, note: str) -> None:
        if self.report is None:
            return
        elapsed = self.clock() - self.t0
        # The mean time per unit so far times the units left: units of one phase cost about the same.
        eta = elapsed / self.done * (self.total - self.done) if self.done else None
        self.report(PhaseUpdate(self.what, self.done, self.total, elapsed, eta, note))


class PhasePrinter:
    """A ProgressFn that prints like the rounds do: in place on a terminal; in a log, a phase's start and end
    and at most `max_lines` lines between, `min_gap_s` apart (a phase of seconds prints two lines)."""

    def __init__(self, max_lines: int = 20, stream: TextIO | None = None, min_gap_s: float = 5.0):
        self.max_lines, self.stream, self.min_gap_s = max_lines, stream, min_gap_s
        self.displays: dict[str, ProgressDisplay] = {}
        self.printed_at: dict[str, float] = {}

    def __call__(self, update: PhaseUpdate) -> None:
        """Show `update`; print it for good when it is due."""
        display = self.displays.get(update.what)
        if display is None or update.done == 0:  # a phase (re)starting gets its own pacing
            display = self.displays[update.what] = ProgressDisplay(update.total, self.max_lines, self.stream)
        line = update.line()
        display.show(line)
        edge = update.done == 0 or update.done >= update.total
        spaced = update.elapsed_s - self.printed_at.get(update.what, -math.inf) >= self.min_gap_s
        if edge or (display.due(update.done) and spaced):
            self.printed_at[update.what] = update.elapsed_s
            print(line, flush=True)


class FileProgress:
    """A ProgressFn for a phase inside an agent: the latest update as JSON in `path` (at most every
    `every_s` seconds, and the first and last), for the task waiting on the agent to read and show."""

    def __init__(self, path: str | Path, every_s: float = 2.0):
        self.path, self.every_s = Path(path), every_s
        self._last = -math.inf

    def __call__(self, update: PhaseUpdate) -> None:
        """Write `update` atomically (a reader never sees half a file)."""
        now = time.monotonic()
        if update.done not in (0, update.total) and now - self._last < self.every_s:
            return
        self._last = now
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}")
        tmp.write_text(json.dumps(asdict(update)))
        os.replace(tmp, self.path)


def read_progress(path: str | Path) -> PhaseUpdate | None:
    """The update a FileProgress wrote last (None before the first)."""
    try:
        return PhaseUpdate(**json.loads(Path(path).read_text()))
    except (OSError, ValueError, TypeError):
        return None


def takes_progress(fn: Callable) -> bool:
    """True when `fn` accepts a `progress` keyword (plug-in environments may predate it)."""
    try:
        return "progress" in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
