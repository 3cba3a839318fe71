"""A pool: labels, a per-agent resource spec, and a ledger of capacity / used / reserved."""

from __future__ import annotations

from dataclasses import dataclass, field

from schedulemesh import resources as R
from schedulemesh.errors import InvalidOptions

PLACEMENT_STRATEGIES = ("PACK", "STRICT_PACK", "SPREAD", "STRICT_SPREAD")


@dataclass
class Pool:
    """Capacity bookkeeping of one pool.

    With `target_agents` > 0 the `resources` given at creation are one agent's spec and the capacity is
    spec x target (ScheduleMesh's convention); otherwise they are the pool's total capacity.
    An agent's request moves reserved -> used when its actor is up (commit) or back (rollback).
    """

    name: str
    labels: dict[str, str]
    spec: dict[str, float]
    target_agents: int = 0
    placement_strategy: str | None = None
    priority: int = 0
    node_labels: dict[str, str] = field(default_factory=dict)
    capacity: dict[str, float] = field(default_factory=dict)
    used: dict[str, float] = field(default_factory=dict)
    reserved: dict[str, float] = field(default_factory=dict)
    placement_group_id: str | None = None  # hex id; the group itself is looked up by id
    bundles_taken: dict[int, str] = field(default_factory=dict)  # bundle index -> agent name

    def __post_init__(self) -> None:
        if self.target_agents < 0:
            raise InvalidOptions(f"pool {self.name!r}: target_agents must be >= 0, got {self.target_agents}")
        if self.placement_strategy is not None and self.placement_strategy not in PLACEMENT_STRATEGIES:
            raise InvalidOptions(
                f"pool {self.name!r}: placement_strategy must be one of "
                f"{', '.join(PLACEMENT_STRATEGIES)} or None, got {self.placement_strategy!r}"
            )
        if self.placement_strategy is not None and self.target_agents < 1:
            raise InvalidOptions(
                f"pool {self.name!r}: a placement group needs target_agents >= 1 (one bundle per agent)"
            )
        if not self.capacity:
            self.capacity = R.scale(self.spec, self.target_agents) if self.target_agents else dict(self.spec)

    @property
    def free(self) -> dict[str, float]:
        """capacity - used - reserved."""
        return R.add(R.add(self.capacity, self.used, -1), self.reserved, -1)

    def default_request(self) -> dict[str, float]:
        """What an agent gets when create_agent names no resources: the per-agent spec (target pools)."""
        return dict(self.spec) if self.target_agents else {}

    def reserve(self, request: dict[str, float]) -> None:
        """Hold `request` for an agent being created; raises InsufficientCapacity naming what is short."""
        R.require(f"pool {self.name!r}", request, self.free)
        self.reserved = R.add(self.reserved, request)

    def commit(self, request: dict[str, float]) -> None:
        """The agent is up: its reservation becomes usage."""
        self.reserved = R.add(self.reserved, request, -1)
        self.used = R.add(self.used, request)

    def rollback(self, request: dict[str, float]) -> None:
        """The agent never came up: drop its reservation."""
        self.reserved = R.add(self.reserved, request, -1)

    def release(self, request: dict[str, float]) -> None:
        """The agent was deleted: give its usage back."""
        self.used = R.add(self.used, request, -1)

    def take_bundle(self, agent: str) -> int:
        """The first free placement-group bundle, now held by `agent`."""
        for i in range(self.target_agents):
            if i not in self.bundles_taken:
                self.bundles_taken[i] = agent
                return i
        raise InvalidOptions(f"pool {self.name!r}: all {self.target_agents} placement-group bundles are taken")

    def give_bundle(self, agent: str) -> None:
        """Free the bundle `agent` held, if any."""
        self.bundles_taken = {i: a for i, a in self.bundles_taken.items() if a != agent}

    def matches(self, selector: dict[str, str] | None) -> bool:
        """True when every selector label equals this pool's label."""
        return all(self.labels.get(k) == v for k, v in (selector or {}).items())

    def info(self, agents: list[str]) -> dict:
        """A plain-dict view for callers (no Ray objects)."""
        return {
            "name": self.name,
            "labels": dict(self.labels),
            "target_agents": self.target_agents,
            "placement_strategy": self.placement_strategy,
            "priority": self.priority,
            "node_labels": dict(self.node_labels),
            "capacity": dict(self.capacity),
            "used": dict(self.used),
            "reserved": dict(self.reserved),
            "free": self.free,
            "agents": sorted(agents),
        }
