"""Strategy classes and their registry (see the package docstring)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any

from schedulemesh import dispatch


class SchedulingStrategy(ABC):
    """Picks one agent record out of a non-empty list."""

    name = "custom"

    def __init__(self, labels: dict[str, str] | None = None):
        self.labels = dict(labels or {})

    @abstractmethod
    def select(self, agents: Sequence[Any]) -> Any:
        """The chosen agent; ValueError when `agents` is empty."""


def _view(agent: Any, i: int) -> dict:
    # dispatch reads name, labels and load; the original's records carry load as metrics.queue_length.
    rec = agent if isinstance(agent, dict) else vars(agent) if hasattr(agent, "__dict__") else {}
    metrics = rec.get("metrics") or {}
    load = metrics.get("queue_length", rec.get("load", 0.0)) if isinstance(metrics, dict) else rec.get("load", 0.0)
    # The name dispatch breaks ties by is the position, so ties go to the first agent as in the original.
    return {"name": f"{i:08d}", "labels": dict(rec.get("labels") or {}), "load": float(load or 0.0), "_i": i}


class _Builtin(SchedulingStrategy):
    """A built-in of schedulemesh.dispatch behind the select() interface; keeps its own counters."""

    def __init__(self, labels: dict[str, str] | None = None, seed: int | None = None):
        super().__init__(labels)
        self._dispatcher = dispatch.Dispatcher(seed)

    def select(self, agents: Sequence[Any]) -> Any:
        """One agent by this strategy."""
        if not agents:
            raise ValueError(f"{self.name}: no agents to select from")
        views = [_view(a, i) for i, a in enumerate(agents)]
        return agents[self._dispatcher.pick(views, self.name)["_i"]]


class RoundRobinStrategy(_Builtin):
    """Each agent in turn."""

    name = "round_robin"


class LeastBusyStrategy(_Builtin):
    """The agent with the shortest queue (metrics.queue_length); the first on ties or without metrics."""

    name = "least_busy"


class RandomStrategy(_Builtin):
    """Uniformly at random."""

    name = "random"


class PowerOfTwoStrategy(_Builtin):
    """The less busy of two random agents."""

    name = "power_of_two"


class LabelRoundRobinStrategy(_Builtin):
    """Round robin among the agents whose labels include `labels` (exact match); ValueError when none does."""

    name = "label_round_robin"

    def select(self, agents: Sequence[Any]) -> Any:
        """One matching agent, in turn."""
        if not agents:
            raise ValueError(f"{self.name}: no agents to select from")
        matching = [
            a for i, a in enumerate(agents) if all(_view(a, i)["labels"].get(k) == v for k, v in self.labels.items())
        ]
        if not matching:
            raise ValueError(f"{self.name}: no agent carries labels {self.labels}")
        views = [_view(a, i) for i, a in enumerate(matching)]
        return matching[self._dispatcher.pick(views, "round_robin")["_i"]]


Factory = Callable[[dict[str, str] | None], SchedulingStrategy]
BUILTIN: dict[str, type[SchedulingStrategy]] = {
    c.name: c
    for c in (RoundRobinStrategy, LeastBusyStrategy, RandomStrategy, PowerOfTwoStrategy, LabelRoundRobinStrategy)
}
_registry: dict[str, Factory] = dict(BUILTIN)


# Called before the registry answers: the configuration module adds its loader here when it is imported
# (schedulemesh.core imports it), so the registry needs no import of the configuration (no import cycle).
_before_lookup: list[Callable[[], None]] = []


def on_lookup(hook: Callable[[], None]) -> None:
    """Call `hook` before the registry answers (the configuration file may add or disable strategies)."""
    if hook not in _before_lookup:
        _before_lookup.append(hook)


def _configured() -> None:
    for hook in _before_lookup:
        hook()


def registered() -> list[str]:
    """Names registered now, without reading the configuration (what the configuration loader checks against)."""
    return sorted(_registry)


def available_strategies() -> list[str]:
    """Names create_strategy accepts (after the configuration's additions and removals)."""
    _configured()
    return registered()


def _dispatch_adapter(factory: Factory) -> Callable:
    instance = factory(None)  # one instance: a stateful strategy keeps its state across choices
    return lambda candidates, rng: instance.select(candidates)


def register_strategy(name: str, factory: Factory, *, replace: bool = False) -> None:
    """Register `factory(labels) -> SchedulingStrategy` under a name (ValueError if taken and not replace)."""
    if not callable(factory):
        raise ValueError(f"strategy {name!r}: factory {factory!r} is not callable")
    if name in _registry and not replace:
        raise ValueError(f"strategy {name!r} is registered already (pass replace=True)")
    _registry[name] = factory
    if name not in dispatch.STRATEGIES:  # the Scheduler's built-ins stay its own
        dispatch.CUSTOM[name] = _dispatch_adapter(factory)


def unregister_strategy(name: str) -> None:
    """Forget a registered strategy (a replaced built-in comes back)."""
    if name not in _registry:
        raise ValueError(f"strategy {name!r} is not registered")
    del _registry[name]
    dispatch.CUSTOM.pop(name, None)
    if name in BUILTIN:
        _registry[name] = BUILTIN[name]


def disable_strategy(name: str) -> None:
    """Remove a strategy from the registry, a built-in too (the configuration's `enabled: false`)."""
    _registry.pop(name, None)
    dispatch.CUSTOM.pop(name, None)


def create_strategy(spec: Any, *, labels: dict[str, str] | None = None) -> SchedulingStrategy:
    """A strategy from an instance, a registered name, a SchedulingStrategy subclass or a factory."""
    if isinstance(spec, SchedulingStrategy):
        return spec
    if isinstance(spec, str):
        _configured()
        key = spec.strip().lower()
        if key not in _registry:
            raise ValueError(f"unknown strategy {spec!r}; available: {', '.join(registered())}")
        return _registry[key](labels)
    if isinstance(spec, type) and issubclass(spec, SchedulingStrategy):
        return spec(labels)
    if callable(spec):
        made = spec(labels)
        if not isinstance(made, SchedulingStrategy):
            raise ValueError(f"strategy factory {spec!r} returned {made!r}, not a SchedulingStrategy")
        return made
    raise ValueError(f"cannot make a strategy from {spec!r}")
