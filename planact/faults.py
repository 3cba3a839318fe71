"""Deterministic fault injection for the kill-point matrix (benchmarks/fault_matrix.py).

`PLANACT_FAULT=<point>:<n>` makes the process that reaches the named point for the n-th time SIGKILL
itself, at once, with no cleanup: the same death a crash, the OOM killer or a lost node gives, but at
a chosen moment instead of a lucky one. `PLANACT_FAULT=<point>:<n>@supervisor` kills the schedulemesh
supervisor (the scheduler head, found by its Ray process title on this machine) at that moment instead,
and the process at the point goes on. It fires once per run: a marker file in `PLANACT_FAULT_DIR`
(default: the temp dir) is created atomically first, so a recreated actor or a resumed flow passing the
same point again lives. Unset (the default), a point is one dictionary lookup.

Points: flow.round_recorded, flow.mid_checkpoint, flow.mid_metrics, trainer.mid_train,
trainer.mid_sync, trainer.mid_checkpoint, engine.mid_generate, pool.mid_append, orchestrator.mid_arrive,
aflow_train.before_commit.
"""

from __future__ import annotations

import os
import signal
import tempfile
from collections import Counter
from pathlib import Path

POINTS = (
    "flow.round_recorded",
    "flow.mid_checkpoint",
    "flow.mid_metrics",
    "trainer.mid_train",
    "trainer.mid_sync",
    "trainer.mid_checkpoint",
    "engine.mid_generate",
    "pool.mid_append",
    "orchestrator.mid_arrive",
    "aflow_train.before_commit",
)
_hits: Counter = Counter()


def point(name: str) -> None:
    """Die here if PLANACT_FAULT names this point and this is its n-th pass in this process (once per run)."""
    spec = os.environ.get("PLANACT_FAULT")
    if not spec:
        return
    spec, _, victim = spec.partition("@")
    want, _, nth = spec.partition(":")
    if want != name:
        return
    _hits[name] += 1
    if _hits[name] != int(nth or 1):
        return
    marker = Path(os.environ.get("PLANACT_FAULT_DIR", tempfile.gettempdir())) / f"planact-fault-{want}-{nth or 1}"
    try:
        os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return  # fired already in this run: the recreated process goes on
    for pid in _victims(victim or "self"):
        os.kill(pid, signal.SIGKILL)


def _victims(victim: str) -> list[int]:
    """PIDs to kill: this process, or the supervisor's (Ray titles an actor's process `ray::<Class>`)."""
    if victim == "self":
        return [os.getpid()]
    if victim != "supervisor":
        raise ValueError(f"PLANACT_FAULT: unknown victim {victim!r} (self or supervisor)")
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and (entry / "cmdline").read_bytes().startswith(b"ray::Supervisor"):
                found.append(int(entry.name))
        except OSError:  # gone meanwhile
            continue
    return found
