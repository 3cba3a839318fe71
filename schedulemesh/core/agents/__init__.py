"""`schedulemesh.core.agents`: the original's agent base classes."""

from schedulemesh.core.agent_actor import AgentActor
from schedulemesh.reporting import MetricsReportingAgent

__all__ = ["AgentActor", "MetricsReportingAgent"]
