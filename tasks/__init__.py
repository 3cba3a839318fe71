"""Prefect tasks: one thin task per stage of a round, delegating to planact's libraries.

Importing the package also keeps Prefect's routine state lines ('Finished in state Completed()') off
this process's console when the CLI asked for it ($PLANACT_QUIET_STATE_LINES=1): tasks run in Ray
workers, whose console output Ray forwards to the driver's.
"""

from __future__ import annotations

import logging
import os

QUIET_ENV = "PLANACT_QUIET_STATE_LINES"


class StateLineFilter(logging.Filter):
    """Drops Prefect's routine per-run INFO lines (a run created, a run finished Completed) from a console
    handler; warnings, errors, failed or crashed states and the flows' own prints pass."""

    ROUTINE = (
        "Finished in state Completed",
        "Created task run",
        "Created subflow run",
        "Beginning subflow run",
        "Executing '",
    )

    def __init__(self) -> None:
        super().__init__()
        self._linked = False  # the first "View at <url>" (the training flow run's page) is kept, not the rounds'

    def filter(self, record: logging.LogRecord) -> bool:
        """Keep everything but routine state lines of Prefect's flow and task run loggers."""
        if record.levelno > logging.INFO or not record.name.startswith(("prefect.task_runs", "prefect.flow_runs")):
            return True
        message = record.getMessage()
        if message.startswith("View at "):
            first, self._linked = not self._linked, True
            return first
        return not message.startswith(self.ROUTINE)


def quiet_state_lines() -> None:
    """Filter Prefect's routine state lines out of this process's console output (the API still gets them)."""
    from prefect.logging.configuration import ensure_logging_setup
    from prefect.logging.handlers import PrefectConsoleHandler

    ensure_logging_setup()  # Ray workers configure Prefect's logging late; later setups are incremental
    for logger in [logging.getLogger(), *[logging.getLogger(n) for n in list(logging.root.manager.loggerDict)]]:
        for handler in getattr(logger, "handlers", []):
            if isinstance(handler, PrefectConsoleHandler) and not any(
                isinstance(f, StateLineFilter) for f in handler.filters
            ):
                handler.addFilter(StateLineFilter())


if os.environ.get(QUIET_ENV) == "1":
    quiet_state_lines()
