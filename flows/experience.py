"""The experience_pool sub-flow, shared by the Plan/Act and AFlow flows.

    experience_pool(pool, items)
      persist_experience -> experience_stats -> compact_experience (when superseded copies pile up)
"""

from __future__ import annotations

from prefect import flow

from planact.experience import PoolRef
from tasks.experience import compact_experience, experience_stats, persist_experience


@flow(name="experience-pool", log_prints=True)
def experience_pool(pool: PoolRef, items, compact_over: int = 1000) -> dict:
    """Persist a batch durably, report the pool's statistics, compact when `compact_over` duplicates piled up."""
    acked = persist_experience(pool, items)
    stats = experience_stats(pool)
    if stats["duplicates"] >= compact_over:
        stats = {**stats, **compact_experience(pool)}
    return {"acknowledged": acked, **stats}
