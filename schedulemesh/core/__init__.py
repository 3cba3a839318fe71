"""The import paths ScheduleMesh's documentation uses (`schedulemesh.core.agent_actor`,
`schedulemesh.core.RayScheduler`), on the same classes."""

from schedulemesh.core.controllers.ray_scheduler import RayScheduler

__all__ = ["RayScheduler"]
