"""Prefect tasks of the experience pool: each one call to the pool actor."""

from __future__ import annotations

from prefect import task
from prefect.cache_policies import NO_CACHE

from planact.experience import PoolRef

OPTS = {"cache_policy": NO_CACHE, "persist_result": False}


@task(name="persist_experience", retries=2, retry_delay_seconds=1, **OPTS)
def persist_experience(pool: PoolRef, items) -> int:
    """Append a batch; returns the acknowledged count (the items are on disk when it returns)."""
    return pool.call("append", items.data if hasattr(items, "data") else items)


@task(name="experience_stats", **OPTS)
def experience_stats(pool: PoolRef) -> dict:
    """Counts per role and run, duplicates, torn lines, bytes."""
    return pool.call("stats")


@task(name="compact_experience", **OPTS)
def compact_experience(pool: PoolRef) -> dict:
    """Rewrite the pool keeping the latest copy of each item."""
    return pool.call("compact")
