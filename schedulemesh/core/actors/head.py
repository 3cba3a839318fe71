"""ScheduleMeshHead: start or stop the scheduler's head (the supervisor actor) by name."""

from __future__ import annotations

import ray


class ScheduleMeshHead:
    """The head of one named scheduler: `start()` creates or attaches its supervisor, `stop()` ends it.

    As in the original, `_actor` holds the supervisor's handle: None until start(), None again after stop()."""

    def __init__(self, name: str = "schedulemesh-supervisor", *, namespace: str | None = None):
        self.name = name
        self.namespace = namespace
        self.scheduler = None
        self._actor = None

    def start(self) -> bool:
        """Start (or attach to) the supervisor; True once it answers."""
        from schedulemesh.core.controllers.ray_scheduler import RayScheduler

        if self.scheduler is None:
            self.scheduler = RayScheduler(self.name, namespace=self.namespace)
            self._actor = self.scheduler.supervisor_handle()
        return True

    def stop(self) -> bool:
        """Stop the supervisor this head started (its pools and agents go with it); True."""
        if self.scheduler is not None:
            self.scheduler.shutdown()
            self.scheduler = None
        self._actor = None
        return True

    @property
    def running(self) -> bool:
        """Whether this head holds a started supervisor."""
        return self._actor is not None and ray.is_initialized()
