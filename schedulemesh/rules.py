"""The original ScheduleMesh's preemption decision: which registered running task an incoming one may take.

Pure bookkeeping (no Ray), used by `RayScheduler`'s preemption calls. Per running task:
resources first (a victim holding less than the incoming task needs is skipped), then a label rule
(`{key: {high_value: [victim values]}}`, one level, exact) that may preempt even at a small priority
deficit, else the same-pool or cross-pool priority threshold. The score is Δpriority + κ·remaining,
so among eligible victims the one with the most work left goes first (it would hold its resources longest).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any

from schedulemesh import resources as R
from schedulemesh.config.policy import resolve_preemption_aggressiveness


@dataclass
class PreemptionPolicy:
    """Thresholds and switches of the original's preemption decision (its field names and defaults)."""

    same_pool_priority_threshold: float = 1.0
    cross_pool_priority_threshold: float = 5.0
    remaining_time_weight: float = 0.1
    min_preempt_score: float = 0.5
    enable_cross_pool_preemption: bool = True
    protected_pools: list[str] = field(default_factory=list)
    label_preemption_rules: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    label_priority_threshold: float = 0.5
    enable_label_preemption: bool = True

    def update(self, **kw: Any) -> dict:
        """Apply `preemption_aggressiveness` first (it sets both thresholds), then the named fields; unknown keys
        are ignored, as the original does (its docs' `cancel_timeout` is one)."""
        level = kw.pop("preemption_aggressiveness", None)
        if level is not None:
            resolved, hint = resolve_preemption_aggressiveness(level)
            if resolved is None:
                raise ValueError(f"preemption_aggressiveness: {hint}")
            self.label_priority_threshold, self.same_pool_priority_threshold = resolved.thresholds
        for key, value in kw.items():
            if key in self.__dataclass_fields__:
                setattr(self, key, list(value) if key == "protected_pools" else value)
        return asdict(self)

    def label_match(self, incoming: dict[str, str], victim: dict[str, str]) -> bool:
        """Some rule key on both tasks lists the victim's value under the incoming task's value."""
        if not self.enable_label_preemption:
            return False
        return any(
            key in incoming and key in victim and victim[key] in rule.get(incoming[key], ())
            for key, rule in self.label_preemption_rules.items()
        )


@dataclass
class RunningTask:
    """A running task as registered for preemption (the original's task_state)."""

    task_id: str
    agent_name: str
    pool_name: str
    priority: float
    labels: dict[str, str] = field(default_factory=dict)
    start_time: float = field(default_factory=time.time)
    estimated_duration: float = 0.0
    payload: Any = None
    last_preemption_reason: str | None = None
    resources: dict[str, float] | None = None

    def remaining(self, now: float) -> float:
        """Seconds of work left: the estimate minus elapsed, or half the elapsed time without an estimate."""
        elapsed = now - self.start_time
        return max(0.0, self.estimated_duration - elapsed) if self.estimated_duration > 0 else elapsed * 0.5

    def info(self) -> dict:
        """The task_state dict (resources only when known)."""
        d = asdict(self)
        if self.resources is None:
            d.pop("resources")
        return d


def candidates(
    policy: PreemptionPolicy,
    running: list[RunningTask],
    priority: float,
    pool: str,
    labels: dict[str, str] | None = None,
    need: dict[str, float] | None = None,
    victim_resources=lambda t: t.resources,
    now: float | None = None,
) -> list[dict]:
    """Eligible victims for an incoming task, best first: [{task_id, agent_name, pool_name, priority,
    preempt_score, reason}]. `victim_resources(task)` supplies a victim's holding when it registered none."""
    now = time.time() if now is None else now
    labels = labels or {}
    scored = []
    for task in running:
        held = task.resources if task.resources is not None else victim_resources(task)
        enough = need is None or held is None or not R.shortfall(need, held)
        if not enough:
            continue
        delta = priority - task.priority
        by_label = policy.label_match(labels, task.labels)
        if delta <= 0 and not by_label:
            continue
        remaining = policy.remaining_time_weight * task.remaining(now)
        if by_label:
            if delta < -policy.label_priority_threshold:
                continue
            score = max(delta, 0.0, policy.label_priority_threshold) + remaining
            if score < min(policy.min_preempt_score, policy.label_priority_threshold):
                continue
            reason = "label_based_preemption"
        else:
            cross = task.pool_name != pool
            if cross and (
                not policy.enable_cross_pool_preemption
                or task.pool_name in policy.protected_pools
                or delta < policy.cross_pool_priority_threshold
            ):
                continue
            if not cross and delta < policy.same_pool_priority_threshold:
                continue
            score = delta + remaining
            if score < policy.min_preempt_score:
                continue
            reason = "cross_pool_preemption" if cross else "same_pool_preemption"
        task.last_preemption_reason = reason
        scored.append((need is not None and held is not None, score, task, reason))
    scored.sort(key=lambda c: (c[0], c[1]), reverse=True)
    return [
        {
            "task_id": t.task_id,
            "agent_name": t.agent_name,
            "pool_name": t.pool_name,
            "priority": t.priority,
            "preempt_score": s,
            "reason": why,
        }
        for _, s, t, why in scored
    ]
