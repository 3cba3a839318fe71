"""Agent classes the schedulemesh tests create (importable by Ray workers: classes travel by reference)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import ray

from schedulemesh import AgentActor


class Echo(AgentActor):
    """Remembers its constructor argument; says where it runs."""

    def __init__(self, value=None, marker: str | None = None):
        self.value = value
        self.marker = marker

    def whoami(self) -> dict:
        ctx = ray.get_runtime_context()
        pg = ctx.get_placement_group_id()
        return {"value": self.value, "pid": os.getpid(), "name": self.name, "labels": self.labels,
                "node_id": ctx.get_node_id(), "resources": ctx.get_assigned_resources(), "placement_group": pg}

    def work(self, seconds: float) -> int:
        with self.busy():
            time.sleep(seconds)
        return os.getpid()

    def go_silent(self) -> None:
        """Stop heartbeating while staying alive (a hung agent, as the supervisor sees it)."""
        self._sm_stopping.set()

    def on_stop(self) -> None:
        if self.marker:
            Path(self.marker).write_text(f"stopped {self.name}")


class Broken(AgentActor):
    """A constructor that fails: creation must roll back."""

    def __init__(self):
        raise RuntimeError("model file missing")


class Plain:
    """Not an AgentActor: schedulemesh still supervises it."""

    def __init__(self, x: int):
        self.x = x

    def get(self) -> int:
        return self.x


class Evictable(AgentActor):
    """Leaves a note when told it is being preempted."""

    def __init__(self, marker: str):
        self.marker = marker

    def on_preempt(self, reason: str) -> None:
        Path(self.marker).write_text(reason)


class SelfNamed(AgentActor):
    """Written as ScheduleMesh's guide writes agents: it assigns its own name and labels in __init__."""

    def __init__(self, name: str, labels: dict[str, str]):
        super().__init__()
        self.name = name
        self.labels = labels

    def identity(self) -> dict:
        return {"name": self.name, "labels": self.labels, "pid": os.getpid()}
