"""What RayScheduler itself remembers beside the core, kept next to `state_path` so a restore keeps it too.

The core's state file holds pools (ledgers), agent records and queues. The original's answers also carry
things only this facade knows: the strategy each queued task was submitted with, the placement strategy
each pool was created with, and how each agent was created (class path, init arguments, Ray options).
They go to `<state_path>.original-api`, written whenever they change.
"""

from __future__ import annotations

import logging
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import cloudpickle

log = logging.getLogger("schedulemesh")


@dataclass
class FacadeState:
    """Task strategies, pool placement strategies and agent creation details, optionally persisted."""

    path: Path | None = None
    strategies: dict[str, str] = field(default_factory=dict)  # task id -> strategy given at submission
    placement: dict[str, str] = field(default_factory=dict)  # pool -> placement_strategy given at creation
    created: dict[str, dict] = field(default_factory=dict)  # agent -> class path, init args/kwargs, options

    @classmethod
    def load(cls, state_path: str | os.PathLike | None) -> FacadeState:
        """The state kept beside `state_path` (empty when there is none, or no state_path)."""
        if not state_path:
            return cls()
        path = Path(f"{state_path}.original-api")
        if not path.exists():
            return cls(path)
        data = cloudpickle.loads(path.read_bytes())
        return cls(path, data["strategies"], data["placement"], data["created"])

    def save(self) -> None:
        """Write atomically (no-op without a path)."""
        if self.path is None:
            return
        data = {"strategies": self.strategies, "placement": self.placement, "created": self.created}
        try:
            blob = cloudpickle.dumps(data)
        except Exception as exc:  # an unpicklable ray option: keep the rest rather than fail the call
            log.warning("schedulemesh: agent options not persisted (%s)", exc)
            created = {k: {**v, "options": {}} for k, v in self.created.items()}
            blob = cloudpickle.dumps({**data, "created": created})
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=self.path.name + ".")
        with os.fdopen(fd, "wb") as f:
            f.write(blob)
        os.replace(tmp, self.path)
