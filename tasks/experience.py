"""The Prefect task of the experience pool: a round's batch persisted through the pool actor."""

from __future__ import annotations

from prefect import task
from prefect.cache_policies import NO_CACHE

from planact import experience
from planact.experience import PoolRef

OPTS = {"cache_policy": NO_CACHE, "persist_result": False}


@task(name="experience", retries=2, retry_delay_seconds=1, **OPTS)
def record_experience(pool: PoolRef, items, compact_over: int = 1000) -> dict:
    """A round's experience in one task: persist durably, report the pool's statistics, compact when due."""
    return experience.record(pool, items.data if hasattr(items, "data") else items, compact_over)
