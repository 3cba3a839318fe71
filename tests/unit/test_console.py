"""What the CLI keeps off the console: Prefect's routine state lines, and nothing else; the progress display."""

from __future__ import annotations

import io
import logging

from planact.progress import ProgressDisplay
from tasks import StateLineFilter


def _record(name: str, level: int, msg: str) -> logging.LogRecord:
    return logging.LogRecord(name, level, __file__, 1, msg, None, None)


def test_routine_state_lines_are_dropped_and_everything_else_passes():
    f = StateLineFilter()
    assert not f.filter(_record("prefect.task_runs", logging.INFO, "Finished in state Completed()"))
    assert not f.filter(_record("prefect.flow_runs", logging.INFO, "Created task run 'train_role-1' for task 'x'"))
    # Failures, retries, warnings, the flows' own prints and other loggers reach the console.
    assert f.filter(_record("prefect.task_runs", logging.ERROR, "Finished in state Failed('boom')"))
    assert f.filter(_record("prefect.task_runs", logging.INFO, "Finished in state Failed('boom')"))
    assert f.filter(_record("prefect.task_runs", logging.INFO, "Task run failed with exception: X - Retry 1/2"))
    assert f.filter(_record("prefect.flow_runs", logging.INFO, "round 3/60: success 0.5"))
    assert f.filter(_record("planact", logging.INFO, "Finished in state Completed()"))
    # The flow run's own link is printed; the sub-flows' links (one per round) are not.
    assert f.filter(_record("prefect.flow_runs", logging.INFO, "View at http://127.0.0.1:4200/runs/flow-run/1"))
    assert not f.filter(_record("prefect.flow_runs", logging.INFO, "View at http://127.0.0.1:4200/runs/flow-run/2"))


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_prints_a_bounded_number_of_lines_and_redraws_the_bar_on_a_terminal():
    # 60 rounds, held-out evaluation every 10: at most 20 regular lines plus the evaluation rounds.
    p = ProgressDisplay(60, stream=io.StringIO())
    kept = [r for r in range(1, 61) if p.due(r, evaluated=r % 10 == 0, first=r == 1)]
    assert len(kept) <= 26 and kept[0] == 1 and kept[-1] == 60 and {10, 20, 30, 40, 50} <= set(kept)
    assert all(ProgressDisplay(5).due(r) for r in range(1, 6))  # short runs print every round
    p.show("round 1/60")  # not a terminal: nothing is redrawn
    assert p.stream.getvalue() == ""
    term = _Terminal()
    t = ProgressDisplay(60, stream=term)
    t.show("[#...] round 1/60")
    t.show("[##..] round 2/60")
    t.clear()
    assert term.getvalue() == "\r\x1b[K[#...] round 1/60\r\r\x1b[K[##..] round 2/60\r\r\x1b[K"
