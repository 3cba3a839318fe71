"""`from schedulemesh.core.agent_actor import AgentActor`, as in ScheduleMesh's agent-configuration guide."""

from schedulemesh.agent import AgentActor

__all__ = ["AgentActor"]
