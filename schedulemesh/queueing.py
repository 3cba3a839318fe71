"""The supervisor's task side: per-pool priority queues with aging, and task-level preemption.

Agents take work with `choose_task(pool, agent)`, report it with `complete_task`; a queued task that
outranks a running one by the policy's gap may preempt it: the victim's agent is told through
`sm_preempt_task` (its `on_task_preempted` hook; `task_preempted(task_id)` for cooperative checks) and
the victim goes back to the queue with its original submission time, so aging still counts for it.
"""

from __future__ import annotations

from schedulemesh.queue import PreemptionPolicy, TaskQueue


class QueueingMixin:
    """Task queue methods of the Supervisor actor (one writer: every driver sees the same order)."""

    queue: TaskQueue
    policy: PreemptionPolicy

    async def submit_task(
        self, pool: str, payload=None, priority: float = 0.0, labels: dict | None = None, task_id: str | None = None
    ) -> str:
        """Queue a task for a pool; returns its id."""
        self._pool(pool)  # an unknown pool is an error here, not a task nobody will take
        task_id = self.queue.submit(pool, payload, priority, labels, task_id)
        self._persist()  # queues survive a restart of the supervisor (with a state file)
        return task_id

    async def choose_task(self, pool: str, agent: str | None = None) -> dict | None:
        """Hand the pool's next task (highest effective priority) to `agent`; None when the queue is empty."""
        task = self.queue.choose(pool, agent)
        if task is not None:
            self._persist()
        return task

    async def complete_task(self, task_id: str) -> None:
        """A running task finished."""
        self.queue.complete(task_id)
        self._persist()

    async def pending_tasks(self, pool: str) -> list[dict]:
        """Queued tasks in the order they would be handed out now."""
        return self.queue.pending(pool)

    async def running_tasks(self, pool: str | None = None) -> list[dict]:
        """Tasks handed out and not completed."""
        return self.queue.running(pool)

    async def set_preemption_policy(
        self, min_priority_gap: float = 1.0, protected: dict | None = None, preemptible: dict | None = None
    ) -> dict:
        """Replace the task preemption rules."""
        self.policy = PreemptionPolicy(min_priority_gap, dict(protected or {}), dict(preemptible or {}))
        self._persist()
        return vars(self.policy)

    async def evaluate_preemption(self, pool: str) -> dict | None:
        """{task, victim} when the pool's next task may preempt a running one under the policy, else None."""
        pending = self.queue.pending(pool)
        if not pending:
            return None
        victim = self.policy.victim(pending[0], self.queue.running(pool))
        return {"task": pending[0], "victim": victim} if victim else None

    async def execute_preemption(self, pool: str, reason: str = "") -> dict | None:
        """Preempt the victim evaluate_preemption names: tell its agent, requeue it; returns the decision."""
        decision = await self.evaluate_preemption(pool)
        if decision is None:
            return None
        victim = decision["victim"]
        why = reason or (
            f"task {decision['task']['task_id']} (priority {decision['task']['priority']:g}) "
            f"preempts {victim['task_id']} (priority {victim['priority']:g})"
        )
        handle = self.handles.get(victim["agent"]) if victim["agent"] else None
        if handle is not None:
            try:
                await handle.sm_preempt_task.remote(victim["task_id"], why)
            except Exception:  # a dead agent cannot be told; its task is requeued all the same
                pass
        self.queue.requeue(victim["task_id"])
        self._persist()
        self._event("task_preempted", victim["agent"] or "", task=victim["task_id"], why=why)
        return {**decision, "reason": why}
