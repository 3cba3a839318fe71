"""ScheduleMesh: call agents of a scheduler through proxies, by pool and labels.

`mesh.choose(pool="gen").generate(prompt)` runs `handle.invoke.remote("generate", prompt)` on one agent
picked by the strategy (ObjectRef back); `all()` calls every matching agent; `shard()` splits the
arguments over them. The agent set is fixed when the proxy is made (make a new proxy to see new agents).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from schedulemesh.core.config import get_scheduling_config
from schedulemesh.core.scheduling import create_strategy


class _Proxy:
    """Attribute access yields a caller that invokes the method on the proxy's agents."""

    def __init__(self, agents: list[dict], mode: str, dispatch_fn: Callable | None = None):
        self._agents, self._mode, self._dispatch_fn = agents, mode, dispatch_fn

    @property
    def agents(self) -> list[dict]:
        """The agent records this proxy calls."""
        return list(self._agents)

    def __getattr__(self, method: str):
        if method.startswith("__"):
            raise AttributeError(method)

        def call(*args, **kwargs):
            if self._mode == "one":
                return self._agents[0]["handle"].invoke.remote(method, *args, **kwargs)
            if self._mode == "all":
                return [a["handle"].invoke.remote(method, *args, **kwargs) for a in self._agents]
            return [
                self._agents[i]["handle"].invoke.remote(method, *a, **kw)
                for i, a, kw in _shards(self._agents, args, kwargs, self._dispatch_fn)
            ]

        return call


def _shards(agents: list[dict], args: tuple, kwargs: dict, dispatch_fn: Callable | None):
    """(agent index, args, kwargs) per call of a shard proxy."""
    if dispatch_fn is not None:
        for target, a, kw in dispatch_fn(agents, args, kwargs):
            yield (target if isinstance(target, int) else agents.index(target)), tuple(a), dict(kw)
        return
    kwargs = dict(kwargs)
    if "shards" in kwargs:
        parts = kwargs.pop("shards")
    elif args and isinstance(args[0], Sequence) and not isinstance(args[0], (str, bytes)):
        parts, args = args[0], args[1:]
    else:
        raise ValueError("shard(): pass shards=[...] or a sequence as the first argument, or give a dispatch_fn")
    if len(parts) != len(agents):
        raise ValueError(f"shard(): {len(parts)} shards for {len(agents)} agents (one shard per agent)")
    for i, part in enumerate(parts):
        yield i, (part, *args), kwargs


class ScheduleMesh:
    """Proxies over a RayScheduler's agents (`scheduler.list_agents(include_handle=True)`)."""

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
        pool_labels = {}
        for p in self.scheduler.list_pools().get("pools", []):
            pool_labels[p["name"]] = p["labels"]
        out = []
        for agent in listed["agents"]:
            effective = {**pool_labels.get(agent.get("pool"), {}), **agent["labels"]}
            if agent.get("handle") is not None and all(effective.get(k) == v for k, v in want.items()):
                out.append({**agent, "labels": effective})
        if not out:
            raise RuntimeError(f"ScheduleMesh: no agent matches pool={pool!r} labels={want}")
        return out

    def all(self, *, pool: str | None = None, labels: dict[str, str] | None = None) -> _Proxy:
        """A proxy calling every matching agent (a list of ObjectRefs per call)."""
        return _Proxy(self._agents(pool, labels), "all")

    def choose(self, *, pool: str | None = None, labels: dict[str, str] | None = None, strategy: Any = None) -> _Proxy:
        """A proxy calling one agent picked by `strategy` (default: the configured one)."""
        agents = self._agents(pool, labels)
        picked = create_strategy(strategy or get_scheduling_config().default_strategy, labels=labels).select(agents)
        return _Proxy([picked], "one")

    def shard(
        self, *, pool: str | None = None, labels: dict[str, str] | None = None, dispatch_fn: Callable | None = None
    ) -> _Proxy:
        """A proxy splitting arguments over the matching agents (`shards=` / a leading sequence / dispatch_fn)."""
        return _Proxy(self._agents(pool, labels), "shard", dispatch_fn)
