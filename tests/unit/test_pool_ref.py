"""PoolRef, the pointer flows and tasks pass around, calls the pool actor by named methods, not by strings."""

from __future__ import annotations

import inspect

import pytest

from planact.experience import ExperiencePoolActor, PoolRef


@pytest.mark.parametrize("method", ["append", "query", "sample", "stats", "compact"])
def test_each_pool_method_has_a_typed_call_with_the_actors_parameters(method):
    # A call through PoolRef reaches the actor method of the same name with the same parameters: a renamed
    # or changed actor method fails here, not at a run's first round.
    ours = inspect.signature(getattr(PoolRef, method)).parameters
    theirs = inspect.signature(getattr(ExperiencePoolActor, method)).parameters
    assert list(ours) == list(theirs)
    assert [p.default for p in ours.values()] == [p.default for p in theirs.values()]


def test_no_call_by_method_name_is_left():
    assert not hasattr(PoolRef, "call")
