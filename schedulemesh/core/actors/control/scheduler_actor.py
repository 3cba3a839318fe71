"""PriorityTaskQueue: the original's single priority queue with aging, over schedulemesh's TaskQueue."""

from __future__ import annotations

from typing import Any

from schedulemesh.queue import TaskQueue

_POOL = "queue"


class PriorityTaskQueue:
    """Highest effective priority first (priority + aging_factor x seconds waited), FIFO among equals."""

    def __init__(self, aging_factor: float = 0.0001):
        self.aging_factor = aging_factor
        self._queue = TaskQueue(aging_factor)

    def push(self, task: Any, priority: float, submit_time: float | None = None) -> None:
        """Queue a task (any object); `submit_time` backdates it (aging counts from then)."""
        task_id = self._queue.submit(_POOL, task, priority)
        if submit_time is not None:
            self._queue.tasks[task_id].submitted_at = float(submit_time)

    def pop(self) -> Any:
        """Remove and return the next task; None when empty."""
        info = self._queue.choose(_POOL)
        if info is None:
            return None
        self._queue.tasks.pop(info["task_id"])
        return info["payload"]

    def peek(self) -> Any:
        """The next task without removing it; None when empty."""
        pending = self._queue.pending(_POOL)
        return pending[0]["payload"] if pending else None

    def snapshot(self) -> dict:
        """Plain data of the queue (tasks, priorities, submission times) for persistence."""
        return {"aging_factor": self.aging_factor, **self._queue.snapshot()}

    def restore(self, snapshot: dict) -> None:
        """Take back what `snapshot` saved."""
        self._queue.restore(snapshot)

    def is_empty(self) -> bool:
        """True when nothing is queued."""
        return len(self) == 0

    def len(self) -> int:
        """How many tasks are queued."""
        return len(self)

    def __len__(self) -> int:
        return sum(1 for t in self._queue.tasks.values() if t.status == "queued")
