"""ScheduleMesh's controller import path (`schedulemesh.core.controllers.ray_scheduler`)."""
