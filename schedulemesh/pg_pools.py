"""Placement-group pools: one placement group per agent, a reserved high-priority tier, reuse of idle groups.

The original ScheduleMesh's `pg_pool_config`. Each agent gets a one-bundle placement group of its own
request; tasks at priority >= 8 take a reserved high-tier group (created when the pool is configured)
so they start without waiting for the cluster; others reuse an idle group whose bundle covers their
request, else a new dynamic group is made (up to `max_dynamic_pgs`). A released group stays for reuse
unless destroyed. Real Ray placement groups: the resources are held by Ray from creation on.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import ray
from ray.util.placement_group import PlacementGroup, placement_group, remove_placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from schedulemesh import resources as R

HIGH_PRIORITY = 8.0
READY_TIMEOUT_S = 30.0
DEFAULTS = {
    "enable": True,
    "high_priority_pg_specs": [],
    "enable_dynamic_pgs": True,
    "max_dynamic_pgs": 20,
    "pg_strategy": "STRICT_PACK",
    "enable_pg_reuse": True,
}


def bundle_of(spec: dict[str, float]) -> dict[str, float]:
    """A Ray bundle for a schedulemesh resource dict (memory MB -> bytes; `custom_resources` flattened)."""
    spec = {**{k: v for k, v in spec.items() if k != "custom_resources"}, **(spec.get("custom_resources") or {})}
    return R.to_bundle(R.normalize(spec))


@dataclass
class PGRecord:
    """One placement group of a pool."""

    pg_id: str
    pool_name: str
    spec: dict[str, float]
    tier: str  # "high" | "normal"
    strategy: str
    group: PlacementGroup
    status: str = "ready"  # ready | allocated
    allocated_to: str | None = None
    reuse_count: int = 0
    created_at: float = field(default_factory=time.time)

    def info(self) -> dict:
        """A plain view (no Ray handle)."""
        return {
            "pg_id": self.pg_id,
            "pool_name": self.pool_name,
            "spec": dict(self.spec),
            "priority_tier": self.tier,
            "strategy": self.strategy,
            "status": self.status,
            "allocated_to": self.allocated_to,
            "reuse_count": self.reuse_count,
            "created_at": self.created_at,
        }


class PGPools:
    """The placement groups of every PG-enabled pool, held by one RayScheduler."""

    def __init__(self, ready_timeout_s: float = READY_TIMEOUT_S):
        self.ready_timeout_s = ready_timeout_s
        self.configs: dict[str, dict] = {}
        self.records: dict[str, PGRecord] = {}
        self.by_agent: dict[str, str] = {}

    def _create(self, pool: str, spec: dict, tier: str, strategy: str) -> PGRecord:
        pg_id = f"{pool}-{'hp' if tier == 'high' else 'dyn'}-{len(self.records)}-{int(time.time() * 1000)}"
        group = placement_group([bundle_of(spec)], strategy=strategy, name=f"schedulemesh-pg:{pg_id}")
        try:
            ray.get(group.ready(), timeout=self.ready_timeout_s)
        except Exception:
            remove_placement_group(group)
            raise ValueError(
                f"pool {pool!r}: the cluster cannot place a {strategy} group of {spec} within {self.ready_timeout_s:g}s"
            ) from None
        rec = PGRecord(pg_id, pool, dict(spec), tier, strategy, group)
        self.records[pg_id] = rec
        return rec

    def configure(self, pool: str, **kw) -> dict:
        """(Re)configure a pool's groups; re-configuring destroys the old ones first (nothing may leak)."""
        unknown = set(kw) - set(DEFAULTS)
        if unknown:
            raise ValueError(f"pg_pool_config: unknown keys {sorted(unknown)}; known: {sorted(DEFAULTS)}")
        if pool in self.configs:
            self.destroy_pool(pool)
        config = {**DEFAULTS, **kw}
        config["high_priority_pg_specs"] = [dict(s) for s in config["high_priority_pg_specs"] or []]
        self.configs[pool] = config
        made = [
            self._create(pool, spec, "high", config["pg_strategy"]).pg_id for spec in config["high_priority_pg_specs"]
        ]
        return {
            "success": True,
            "pool_name": pool,
            "high_priority_pgs": made,
            "config": {
                k: config[k] for k in ("enable_dynamic_pgs", "max_dynamic_pgs", "pg_strategy", "enable_pg_reuse")
            },
        }

    def enabled(self, pool: str) -> bool:
        """True when the pool has a PG configuration."""
        return pool in self.configs

    def allocate(self, agent: str, pool: str, spec: dict[str, float], priority: float) -> PGRecord:
        """A group for `agent`: reserved high tier (priority >= 8), an idle covering one, or a new one."""
        if agent in self.by_agent:
            raise ValueError(f"agent {agent!r} holds placement group {self.by_agent[agent]} already")
        if pool not in self.configs:
            raise ValueError(f"pool {pool!r} has no placement-group pool configured")
        config, need = self.configs[pool], R.normalize(spec)

        def idle(tier: str) -> PGRecord | None:
            return next(
                (
                    r
                    for r in self.records.values()
                    if r.pool_name == pool
                    and r.tier == tier
                    and r.status == "ready"
                    and not R.shortfall(need, R.normalize(r.spec))
                ),
                None,
            )

        rec = idle("high") if priority >= HIGH_PRIORITY else None
        if rec is None and config["enable_pg_reuse"]:
            rec = idle("normal")
            if rec is not None:
                rec.reuse_count += 1
        if rec is None:
            if not config["enable_dynamic_pgs"]:
                raise ValueError(f"pool {pool!r} does not allow dynamic placement groups")
            dynamic = sum(1 for r in self.records.values() if r.pool_name == pool and r.tier == "normal")
            if dynamic >= config["max_dynamic_pgs"]:
                raise ValueError(f"pool {pool!r} reached its limit of {config['max_dynamic_pgs']} dynamic groups")
            rec = self._create(pool, need, "normal", config["pg_strategy"])
        rec.status, rec.allocated_to = "allocated", agent
        self.by_agent[agent] = rec.pg_id
        return rec

    def strategy_for(self, rec: PGRecord) -> PlacementGroupSchedulingStrategy:
        """The Ray scheduling strategy that puts an actor into the group's bundle."""
        return PlacementGroupSchedulingStrategy(rec.group, placement_group_bundle_index=0)

    def release(self, agent: str, destroy: bool = False) -> str | None:
        """Give the agent's group back (kept for reuse unless destroy); its id, or None when it held none."""
        pg_id = self.by_agent.pop(agent, None)
        rec = self.records.get(pg_id) if pg_id else None
        if rec is None:
            return None
        rec.status, rec.allocated_to = "ready", None
        if destroy:
            remove_placement_group(rec.group)
            del self.records[pg_id]
        return pg_id

    def destroy_pool(self, pool: str) -> None:
        """Remove every group of a pool and forget its configuration."""
        for pg_id in [i for i, r in self.records.items() if r.pool_name == pool]:
            remove_placement_group(self.records.pop(pg_id).group)
        self.by_agent = {a: i for a, i in self.by_agent.items() if i in self.records}
        self.configs.pop(pool, None)

    def stats(self, pool: str | None = None) -> dict:
        """Counts per pool (the original's shape, without `success`); with no pool, {pools: {name: stats}}."""
        if pool is None:
            return {"pools": {p: self.stats(p) for p in self.configs}}
        recs = [r for r in self.records.values() if r.pool_name == pool]
        by_status: dict[str, int] = {}
        for r in recs:
            by_status[r.status] = by_status.get(r.status, 0) + 1
        return {
            "pool_name": pool,
            "total_pgs": len(recs),
            "high_priority_pgs": sum(r.tier == "high" for r in recs),
            "dynamic_pgs": sum(r.tier == "normal" for r in recs),
            "allocated_pgs": sum(r.status == "allocated" for r in recs),
            "available_pgs": sum(r.status == "ready" for r in recs),
            "total_reuse_count": sum(r.reuse_count for r in recs),
            "by_status": by_status,
        }
