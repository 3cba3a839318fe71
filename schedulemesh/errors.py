"""Errors raised by schedulemesh; each message names the pool, agent or option at fault."""

from __future__ import annotations


class SchedulemeshError(RuntimeError):
    """Base class of every schedulemesh error."""


class InsufficientCapacity(SchedulemeshError):
    """A pool (or the cluster) lacks a resource the request needs."""


class PoolNotFound(SchedulemeshError, KeyError):
    """No pool of that name."""

    def __str__(self) -> str:  # KeyError would quote the message
        return self.args[0] if self.args else ""


class AgentNotFound(SchedulemeshError, KeyError):
    """No agent of that name (or no agent matches the selector)."""

    def __str__(self) -> str:
        return self.args[0] if self.args else ""


class AlreadyExists(SchedulemeshError):
    """A pool or agent of that name exists already."""


class InvalidOptions(SchedulemeshError, ValueError):
    """Unknown or conflicting ray_options, or a malformed resource request."""


class AgentCreationError(SchedulemeshError):
    """The actor could not be created or its constructor failed; nothing stays reserved."""
