"""What the CLI keeps off the console: Prefect's routine state lines, and nothing else."""

from __future__ import annotations

import logging

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
