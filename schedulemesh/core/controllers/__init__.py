"""ScheduleMesh's controllers: `RayScheduler` (.ray_scheduler) and `ScheduleMesh` (.schedule_mesh)."""

from schedulemesh.core.controllers.ray_scheduler import RayScheduler
from schedulemesh.core.controllers.schedule_mesh import ScheduleMesh

__all__ = ["RayScheduler", "ScheduleMesh"]
