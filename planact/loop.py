"""The Plan/Act round as a plain Python loop over the same Ray actors the flow uses.

This is the baseline for benchmarks/round_overhead.py (flow vs loop) and the
quickest way to drive the agents from a notebook or a test without Prefect.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

from planact import agents
from planact.config import RunConfig
from planact.envs.plan_act import PlanActEnv, planner_prompt
from planact.experience import PoolRef, experience_items, record
from planact.rollout import actor_requests, score_round
from planact.timing import Stopwatch


def run_round(
    cfg: RunConfig,
    round_idx: int,
    planner: agents.RoleGroup,
    actor: agents.RoleGroup,
    env: PlanActEnv | None = None,
    pool: PoolRef | None = None,
) -> dict:
    """One round without orchestration: generate, execute, score, persist experience (given a pool),
    train both roles (in parallel): the same work as the flow's round."""
    t0 = time.perf_counter()
    timings: dict[str, float] = {}
    clock = Stopwatch(timings)
    env = env or PlanActEnv(cfg.env, cfg.seed)
    with clock("sample"):
        batch = [t.to_dict() for t in env.sample_tasks(round_idx)]
    with clock("planner_generate"):
        plans = agents.generate_sharded(
            planner, [planner_prompt(t) for t in batch], n=cfg.planner.group_size, seed=round_idx
        )
    with clock("actor_execute"):
        answers = agents.generate_sharded(
            actor, actor_requests(batch, plans), n=cfg.actor.group_size, seed=round_idx + 1
        )
    with clock("score"):
        scored = score_round(
            batch, plans, answers, cfg.credit, (cfg.planner.rl.std_normalize, cfg.actor.rl.std_normalize)
        )
    metrics = dict(scored.metrics)
    if pool is not None:
        with clock("experience"):
            items = [
                it
                for role, samples in (("planner", scored.planner_samples), ("actor", scored.actor_samples))
                for it in experience_items(cfg.run_name, round_idx, role, samples)
            ]
            metrics["experience/items"] = float(record(pool, items)["items"])
    with clock("train"):
        # Both roles at once, from threads of this process, as the flow's train stages do (the training itself
        # runs in the trainer actors), so the flow/loop benchmark compares orchestration, not two ways to train.
        jobs = [
            (group, samples)
            for group, samples in ((planner, scored.planner_samples), (actor, scored.actor_samples))
            if group.trainer is not None and samples
        ]
        with ThreadPoolExecutor(max_workers=2) as pool:
            futures = {group.role: pool.submit(agents.train_and_sync, group, samples) for group, samples in jobs}
        for role, fut in futures.items():
            metrics.update({f"{role}/{k}": v for k, v in fut.result().items()})
    metrics.update({f"time/{k}_s": v for k, v in timings.items()})
    metrics["time/round_s"] = time.perf_counter() - t0
    return metrics
