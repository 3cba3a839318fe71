"""Per-pool priority task queues with aging: a task's effective priority grows while it waits, so a
stream of high-priority work cannot starve the rest forever.

Pure bookkeeping (no Ray): the supervisor holds one TaskQueue, so every driver sees the same order.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from schedulemesh.errors import InvalidOptions


@dataclass
class Task:
    """One queued unit of work for a pool: an opaque payload with a priority."""

    task_id: str
    pool: str
    payload: object
    priority: float
    labels: dict[str, str]
    submitted_at: float
    seq: int
    status: str = "queued"  # queued | running | done
    agent: str | None = None
    started_at: float | None = None
    meta: dict = field(default_factory=dict)

    def effective_priority(self, now: float, aging_per_s: float) -> float:
        """Priority plus aging: +aging_per_s for every second spent waiting."""
        return self.priority + aging_per_s * max(0.0, now - self.submitted_at)

    def info(self, now: float, aging_per_s: float) -> dict:
        """A plain-dict view."""
        return {
            "task_id": self.task_id,
            "pool": self.pool,
            "payload": self.payload,
            "priority": self.priority,
            "effective_priority": self.effective_priority(now, aging_per_s),
            "labels": dict(self.labels),
            "status": self.status,
            "agent": self.agent,
            "started_at": self.started_at,
            "waited_s": (self.started_at or now) - self.submitted_at,
        }


class TaskQueue:
    """Tasks per pool; `choose` hands out the highest effective priority first (FIFO among equals)."""

    def __init__(self, aging_per_s: float = 0.1, clock: Callable[[], float] = time.time):
        if aging_per_s < 0:
            raise InvalidOptions(f"aging_per_s must be >= 0, got {aging_per_s}")
        self.aging_per_s = aging_per_s
        self.clock = clock
        self.tasks: dict[str, Task] = {}
        self._next_seq = 0

    def submit(
        self,
        pool: str,
        payload: object = None,
        priority: float = 0.0,
        labels: dict | None = None,
        task_id: str | None = None,
    ) -> str:
        """Queue a task for a pool; returns its id (a given id that is still queued or running is refused)."""
        seq, self._next_seq = self._next_seq, self._next_seq + 1
        task_id = task_id or f"{pool}:{seq}"
        if task_id in self.tasks and self.tasks[task_id].status != "done":
            raise InvalidOptions(f"task {task_id!r} is already {self.tasks[task_id].status}")
        self.tasks[task_id] = Task(task_id, pool, payload, float(priority), dict(labels or {}), self.clock(), seq)
        return task_id

    def choose(self, pool: str, agent: str | None = None) -> dict | None:
        """The next task of the pool by effective priority (then submission order), now running; None if empty."""
        now = self.clock()
        queued = [t for t in self.tasks.values() if t.pool == pool and t.status == "queued"]
        if not queued:
            return None
        task = max(queued, key=lambda t: (t.effective_priority(now, self.aging_per_s), -t.seq))
        task.status, task.agent, task.started_at = "running", agent, now
        return task.info(now, self.aging_per_s)

    def complete(self, task_id: str) -> None:
        """Mark a running task done (it leaves the queue's counts)."""
        self._get(task_id).status = "done"

    def requeue(self, task_id: str) -> None:
        """Put a running task back (its agent was preempted or died); it keeps its original submission time."""
        task = self._get(task_id)
        task.status, task.agent, task.started_at = "queued", None, None

    def pending(self, pool: str) -> list[dict]:
        """Queued tasks of a pool in the order `choose` would hand them out now."""
        now = self.clock()
        queued = [t for t in self.tasks.values() if t.pool == pool and t.status == "queued"]
        queued.sort(key=lambda t: (-t.effective_priority(now, self.aging_per_s), t.seq))
        return [t.info(now, self.aging_per_s) for t in queued]

    def running(self, pool: str | None = None) -> list[dict]:
        """Running tasks (of a pool, or all)."""
        now = self.clock()
        return [
            t.info(now, self.aging_per_s)
            for t in self.tasks.values()
            if t.status == "running" and (pool is None or t.pool == pool)
        ]

    def snapshot(self) -> dict:
        """Queued and running tasks as plain data, for the supervisor's state file (done ones are dropped)."""
        return {
            "next_seq": self._next_seq,
            "tasks": [dataclasses.asdict(t) for t in self.tasks.values() if t.status != "done"],
        }

    def restore(self, snapshot: dict) -> None:
        """Take back what `snapshot` saved (a restarted supervisor keeps its queues and their ages)."""
        self.tasks = {d["task_id"]: Task(**d) for d in snapshot.get("tasks", [])}
        self._next_seq = int(snapshot.get("next_seq", 0))

    def _get(self, task_id: str) -> Task:
        if task_id not in self.tasks:
            raise InvalidOptions(f"no task {task_id!r}")
        return self.tasks[task_id]


@dataclass
class PreemptionPolicy:
    """When a queued task may take a running task's place in the same pool.

    A running task is a candidate when the queued task's priority exceeds its own by at least
    `min_priority_gap`, it carries none of the `protected` labels, and (when `preemptible` is set) it
    carries all of those. The victim is the lowest-priority candidate, the most recently started first
    (it has lost the least work).
    """

    min_priority_gap: float = 1.0
    protected: dict[str, str] = field(default_factory=dict)
    preemptible: dict[str, str] = field(default_factory=dict)

    def allows(self, task: dict) -> bool:
        """Whether the rules let this running task be preempted at all."""
        labels = task["labels"]
        if any(labels.get(k) == v for k, v in self.protected.items()):
            return False
        return all(labels.get(k) == v for k, v in self.preemptible.items())

    def victim(self, incoming: dict, running: list[dict]) -> dict | None:
        """The running task to preempt for `incoming`, or None."""
        candidates = [
            t for t in running if incoming["priority"] - t["priority"] >= self.min_priority_gap and self.allows(t)
        ]
        if not candidates:
            return None
        return min(candidates, key=lambda t: (t["priority"], -(t["started_at"] or 0.0)))
