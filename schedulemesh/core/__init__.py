"""The import paths ScheduleMesh's documentation uses (`schedulemesh.core.agent_actor`), on the same classes."""
