"""PoolRef, the pointer flows and tasks pass around, calls the pool actor by named methods, not by strings."""

from __future__ import annotations

import inspect

import pytest

from planact.experience import ExperiencePoolActor, PoolRef


@pytest.mark.parametrize("method", ["append", "query", "sample", "stats", "compact"])
def test_each_pool_method_has_a_typed_call_with_the_actors_parameters(method):
    # A call through PoolRef reaches the actor method of the same name with the same parameters: a renamed
    # or changed actor method fails here, not at a run's first round.
    ours = _params(PoolRef, method)
    theirs = _params(ExperiencePoolActor, method)
    assert list(ours) == list(theirs)
    assert [p.default for p in ours.values()] == [p.default for p in theirs.values()]


def _params(cls, method: str) -> dict:
    """A method's parameters as a caller passes them: once a process has made the class a Ray actor, Ray's
    tracing adds a `_ray_trace_ctx` keyword to its methods (the suite's earlier tests had, on one worker)."""
    params = inspect.signature(getattr(cls, method)).parameters
    return {name: p for name, p in params.items() if name != "_ray_trace_ctx"}


def test_no_call_by_method_name_is_left():
    assert not hasattr(PoolRef, "call")
