"""The original ScheduleMesh AgentActor's own task methods: echo invocations, simulated work, cancel.

Used by demos and tests of scheduling and preemption without real work: `process` with a task id and
a `simulated_duration` keeps the task in `get_running_tasks()` for that long (a background thread
sleeps), and `cancel` drops its record, as the original does (the sleep itself is not interrupted).
"""

from __future__ import annotations

import threading
import time


class SimulatedTasks:
    """invoke / process / cancel / get_running_tasks for agents that do no real work."""

    def _tasks(self) -> dict[str, dict]:
        return self.__dict__.setdefault("_st_running", {})

    def invoke(self, method: str, *args, **kwargs) -> dict:
        """Echo a call routed by ScheduleMesh proxies ({method, args, kwargs}); agents override it to act."""
        return {"method": method, "args": list(args), "kwargs": dict(kwargs)}

    def process(
        self, payload=None, task_id: str | None = None, priority: float = 0.0, simulated_duration: float = 0.0
    ) -> dict:
        """Take a payload; with a task id and a duration the task counts as running for that many seconds."""
        if task_id is not None and simulated_duration > 0:
            tasks = self._tasks()
            tasks[task_id] = {
                "task_id": task_id,
                "payload": payload,
                "priority": float(priority),
                "start_time": time.time(),
                "simulated_duration": float(simulated_duration),
            }

            def finish() -> None:
                time.sleep(simulated_duration)
                tasks.pop(task_id, None)

            threading.Thread(target=finish, name=f"simulated-{task_id}", daemon=True).start()
        return {"method": "process", "kwargs": {"payload": payload}}

    def cancel(self, task_id: str) -> dict:
        """Drop a running task's record: {success, task_info} or {success: False, error}."""
        info = self._tasks().pop(task_id, None)
        if info is None:
            return {"success": False, "error": f"task {task_id!r} is not running on this agent"}
        return {"success": True, "task_info": info}

    def get_running_tasks(self) -> dict:
        """{agent_name, running_tasks, count}."""
        running = list(self._tasks().values())
        return {"agent_name": getattr(self, "name", None), "running_tasks": running, "count": len(running)}
