"""The console's progress display for a training run.

On a terminal, one bar redrawn in place every round; in a log or CI, where nothing is redrawn, a line
only every few rounds (at most `max_lines` over the run, plus rounds with a held-out evaluation and the
last), so that a 60-round run prints tens of lines, not hundreds. The lines that are printed also reach
the Prefect flow run's logs (the flow prints them); the in-place bar is for the terminal alone.
"""

from __future__ import annotations

import math
import shutil
import sys
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
