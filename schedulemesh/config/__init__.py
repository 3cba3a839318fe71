"""Configuration helpers of the original ScheduleMesh API (`schedulemesh.config.policy`)."""

from schedulemesh.config.policy import (
    PreemptionAggressiveness,
    normalize_aggressiveness,
    resolve_preemption_aggressiveness,
)

__all__ = ["PreemptionAggressiveness", "normalize_aggressiveness", "resolve_preemption_aggressiveness"]
