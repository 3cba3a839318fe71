"""The synthetic Plan/Act task (planact.envs.plan_act) behind the round's environment interface."""

from __future__ import annotations

import random

from planact.envs.plan_act import PlanActEnv, planner_prompt
from planact.rollout import actor_requests, evaluate, score_round


class SyntheticEnv:
    """Instructions over digit lists: one plan completion per sample, free-text answers."""

    actor_method = "generate"
    headline_keys = ("pass@1", "greedy/success", "greedy/success_but_first")

    def __init__(self, cfg):
        self.cfg = cfg
        self.env = PlanActEnv(cfg.env, cfg.seed)

    def sample_tasks(self, round_idx: int) -> list[dict]:
        """tasks_per_round procedural tasks, disjoint from the held-out set."""
        return [t.to_dict() for t in self.env.sample_tasks(round_idx)]

    def plan(self, batch: list[dict], planner, seed: int) -> list[list]:
        """G plans per task from the planner's engines."""
        return planner.generate([planner_prompt(t) for t in batch], n=self.cfg.planner.group_size, seed=seed)

    def actor_requests(self, batch: list[dict], plans) -> list[str]:
        """Plan + data prompts (task-major)."""
        return actor_requests(batch, plans)

    def score(self, batch: list[dict], plans, answers, n_rollouts: int = 0):
        """Exact verification and GRPO credit (planact.rollout.score_round)."""
        std = (self.cfg.planner.rl.std_normalize, self.cfg.actor.rl.std_normalize)
        return score_round(batch, plans, answers, self.cfg.credit, std, n_rollouts=n_rollouts)

    def demonstrations(self, role: str, count: int, rng: random.Random) -> list[tuple[str, str]]:
        """The imperfect planner teacher, or exact plan execution for the actor."""
        return self.env.planner_demos(count, rng) if role == "planner" else self.env.actor_demos(count, rng)

    def evaluate(self, planner, actor) -> dict[str, float]:
        """Held-out pass@1 at the sampling temperature and greedy end-to-end success."""
        cfg = self.cfg
        held = [t.to_dict() for t in self.env.heldout]

        def plan_fn(prompts, temperature, n):
            return planner.generate(prompts, temperature=temperature, n=n, seed=cfg.seed)

        def act_fn(prompts, temperature, n):
            return actor.generate(prompts, temperature=temperature, n=n, seed=cfg.seed + 1)

        return evaluate(held, plan_fn, act_fn, cfg.actor.sampling.temperature, cfg.tracking.eval_samples)

    def tokenizer_texts(self) -> list[str]:
        """The character tokenizer needs no training text."""
        return []
