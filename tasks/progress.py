"""The Prefect side of a long phase's progress: the console line, and a progress artifact on the task run.

Libraries report a phase through the callback they accept (planact.progress.ProgressFn) and never import
Prefect; a task passes them `task_progress(...)`, which prints the phase's line as the rounds print theirs
(PhasePrinter: the flow's log_prints also puts the printed lines in the task run's logs) and keeps a
progress artifact of the task run at the phase's share done, its description the same line.
"""

from __future__ import annotations

import re
import time

from planact.progress import PhasePrinter, PhaseUpdate, ProgressFn


def task_progress(key: str, every_s: float = 5.0) -> ProgressFn:
    """A ProgressFn for a library call made from a task: console line + progress artifact `<key>-<phase>`
    (updated at most every `every_s` seconds, and at the phase's start and end)."""
    printer = PhasePrinter()
    artifacts: dict[str, object] = {}
    last = {"t": 0.0, "off": False}

    def report(update: PhaseUpdate) -> None:
        printer(update)
        now = time.monotonic()
        edge = update.done in (0, update.total)
        if last["off"] or (not edge and now - last["t"] < every_s):
            return
        last["t"] = now
        try:
            _artifact(artifacts, key, update)
        except Exception as e:  # the console line is what counts: an unreachable API must not stop a run
            last["off"] = True
            print(f"progress artifact for {key!r} off: {type(e).__name__}: {e}")

    return report


def _artifact(artifacts: dict, key: str, update: PhaseUpdate) -> None:
    from prefect.artifacts import create_progress_artifact, update_progress_artifact
    from prefect.context import FlowRunContext, TaskRunContext

    if TaskRunContext.get() is None and FlowRunContext.get() is None:
        return  # called outside a run (a script, a test): nothing to attach an artifact to
    share = 100.0 * update.done / update.total if update.total else 100.0
    if update.what not in artifacts:
        # Artifact keys allow lowercase letters, digits and dashes only.
        slug = re.sub(r"[^a-z0-9]+", "-", f"{key}-{update.what.split('(')[0]}".lower()).strip("-")
        artifacts[update.what] = create_progress_artifact(share, key=slug, description=update.line())
    else:
        update_progress_artifact(artifacts[update.what], share, description=update.line())
