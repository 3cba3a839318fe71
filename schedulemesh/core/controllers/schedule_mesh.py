"""ScheduleMesh: call a scheduler's agents through proxies, by pool and labels, and get the results back.

`mesh.choose(pool="gen").generate(prompt)` runs `handle.invoke.remote("generate", prompt)` on one agent the
strategy picks and returns its result; `all()` calls every matching agent and `shard()` splits the
arguments over them, both returning the list of results. As in the original the facade is synchronous
(it waits with `ray.get`); planact's own `Scheduler.choose(...)` hands back an agent reference instead.
The agent set is fixed when the proxy is made (make a new proxy to see new agents).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import ray

from schedulemesh.core.config import get_scheduling_config
from schedulemesh.core.scheduling import SchedulingStrategy, create_strategy

Call = tuple[dict, tuple, dict]  # (agent record, args, kwargs)


class _Proxy:
    """`proxy.method(*a, **kw)` or `proxy.invoke("method", *a, **kw)` calls `invoke` on the proxy's agents."""

    def __init__(self, agents: list[dict], plan: Callable[[list[dict], tuple, dict], list[Call]], one: bool):
        self._agents, self._plan, self._one = agents, plan, one

    @property
    def agents(self) -> list[dict]:
        """The agent records this proxy calls."""
        return list(self._agents)

    def invoke(self, method: str, *args, **kwargs) -> Any:
        """Call `method` as the proxy's mode says: one result (choose) or a list of results (all, shard)."""
        calls = self._plan(self._agents, args, kwargs)
        refs = [agent["handle"].invoke.remote(method, *a, **kw) for agent, a, kw in calls]
        return ray.get(refs[0]) if self._one else ray.get(refs)

    def __getattr__(self, method: str) -> Callable[..., Any]:
        if method.startswith("__"):
            raise AttributeError(method)
        return lambda *args, **kwargs: self.invoke(method, *args, **kwargs)


def _every(agents: list[dict], args: tuple, kwargs: dict) -> list[Call]:
    return [(agent, args, kwargs) for agent in agents]


def _picked_by(strategy: SchedulingStrategy) -> Callable[[list[dict], tuple, dict], list[Call]]:
    # The strategy picks on every call (round_robin rotates across calls of one proxy).
    return lambda agents, args, kwargs: [(strategy.select(agents), args, kwargs)]


def _target(agents: list[dict], target: Any) -> dict:
    """The record a dispatch_fn named by index or by record."""
    if isinstance(target, int) and not isinstance(target, bool):
        if not 0 <= target < len(agents):
            raise ValueError(f"shard(): dispatch_fn chose agent index {target}, there are {len(agents)} agents")
        return agents[target]
    for agent in agents:
        if agent is target:
            return agent
    name = target.get("name") if isinstance(target, dict) else None
    for agent in agents:
        if name is not None and agent["name"] == name:
            return agent
    raise ValueError(f"shard(): dispatch_fn chose {target!r}, which is none of the proxy's agents")


def _default_shards(agents: list[dict], args: tuple, kwargs: dict) -> Iterator[Call]:
    kwargs = dict(kwargs)
    if "shards" in kwargs:
        parts = kwargs.pop("shards")
    elif args and isinstance(args[0], Sequence) and not isinstance(args[0], (str, bytes)):
        parts, args = args[0], args[1:]
    else:
        raise ValueError("shard(): pass shards=[...] or a sequence as the first argument, or give a dispatch_fn")
    if len(parts) != len(agents):
        raise ValueError(f"shard(): {len(parts)} shards for {len(agents)} agents (one shard per agent)")
    for agent, part in zip(agents, parts):
        yield agent, (part, *args), kwargs


def _sharded_by(dispatch_fn: Callable | None) -> Callable[[list[dict], tuple, dict], list[Call]]:
    def plan(agents: list[dict], args: tuple, kwargs: dict) -> list[Call]:
        if dispatch_fn is None:
            return list(_default_shards(agents, args, kwargs))
        calls = [(_target(agents, t), tuple(a), dict(kw)) for t, a, kw in dispatch_fn(agents, args, kwargs)]
        if not calls:
            raise ValueError("shard(): dispatch_fn planned no call")
        return calls

    return plan


class ScheduleMesh:
    """Synchronous proxies over a RayScheduler's agents (`scheduler.list_agents(include_handle=True)`)."""

    def __init__(
        self, scheduler: Any, *, default_pool: str | None = None, default_labels: dict[str, str] | None = None
    ):
        self.scheduler = scheduler
        self.default_pool = default_pool
        self.default_labels = dict(default_labels or {})

    def _agents(self, pool: str | None, labels: dict | None) -> list[dict]:
        pool = pool or self.default_pool
        want = {**self.default_labels, **(labels or {})}
        listed = self.scheduler.list_agents(pool, include_handle=True)
        if not listed.get("success", False):
            raise RuntimeError(f"ScheduleMesh: cannot list agents: {listed.get('error')}")
        pool_labels = {p["name"]: p["labels"] for p in self.scheduler.list_pools().get("pools", [])}
        out = []
        for agent in listed["agents"]:
            # The agent's labels over its pool's; `pool` names the pool, as in the original.
            name = agent.get("pool")
            effective = {**pool_labels.get(name, {}), "pool": name, **agent["labels"]}
            if agent.get("handle") is not None and all(effective.get(k) == v for k, v in want.items()):
                out.append({**agent, "labels": effective})
        if not out:
            raise RuntimeError(f"ScheduleMesh: no agent matches pool={pool!r} labels={want}")
        return out

    def all(self, *, pool: str | None = None, labels: dict[str, str] | None = None) -> _Proxy:
        """A proxy calling every matching agent; each call returns the list of results."""
        return _Proxy(self._agents(pool, labels), _every, one=False)

    def choose(self, *, pool: str | None = None, labels: dict[str, str] | None = None, strategy: Any = None) -> _Proxy:
        """A proxy calling one agent per call, picked by `strategy` (default: the configured one): its result."""
        config = get_scheduling_config()  # read first: it may disable strategies
        picker = create_strategy(strategy or config.default_strategy, labels=labels)  # unknown: ValueError now
        return _Proxy(self._agents(pool, labels), _picked_by(picker), one=True)

    def shard(
        self, *, pool: str | None = None, labels: dict[str, str] | None = None, dispatch_fn: Callable | None = None
    ) -> _Proxy:
        """A proxy splitting arguments over the matching agents (`shards=` / a leading sequence / dispatch_fn);
        each call returns the list of results."""
        return _Proxy(self._agents(pool, labels), _sharded_by(dispatch_fn), one=False)
