"""One Plan/Act round as pure functions: prompts in, scored token-level samples out.

Flows call these through tasks; benchmarks and tests call them directly. The
generation callables hide where the engines live (in-process or Ray actors).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass, field

from planact.batch import RoundBatch
from planact.config import CreditConfig
from planact.engines.base import Completion
from planact.envs.plan_act import CHARSET_PLAN, actor_prompt, parse_plan, planner_prompt, verify
from planact.rl.advantages import group_advantages
from planact.samples import Sample

GenerateFn = Callable[[list[str], float, int], list[list[Completion]]]  # (prompts, temperature, n) -> completions


def clean_plan(text: str) -> str:
    """The planner's decoded text, restricted to the plan language's characters.

    The actor receives this cleaned text, never re-encoded special tokens
    (decoding and re-encoding special tokens crashed in an early trial).
    """
    return "".join(ch for ch in text if ch in CHARSET_PLAN).strip()


@dataclass
class RoundResult:
    """Everything a round produced: per-role training samples, metrics, a few rollouts to show."""

    planner_samples: list[Sample] = field(default_factory=list)
    actor_samples: list[Sample] = field(default_factory=list)
    metrics: dict[str, float] = field(default_factory=dict)
    rollouts: list[dict] = field(default_factory=list)

    def batch(self, round_idx: int) -> RoundBatch:
        """The round's samples as the batch the pool and the trainers get (planner first, as rounds record them)."""
        return RoundBatch(round_idx, {"planner": self.planner_samples, "actor": self.actor_samples})


def sample_record(c: Completion, reward: float, advantage: float, role: str, task_id: str, group: str) -> Sample:
    """A training sample: the completion's fields, its reward and advantage, and whose episode it is."""
    return {
        "role": role,
        "task_id": task_id,
        "group": group,
        **c.sample_fields(),
        "reward": reward,
        "advantage": advantage,
        "finish_reason": c.finish_reason,
    }


def _length(c: Completion) -> float:
    # API engines return no token ids, only the token count they were billed for.
    return float(len(c.token_ids) or c.meta.get("completion_tokens", 0))


def actor_requests(tasks: list[dict], plans: list[list[Completion]] | None) -> list[str]:
    """Actor prompts, one per (task, plan) in task-major order; a fallback round has one plan-less prompt per task."""
    if plans is None:
        return [actor_prompt(None, t["data"]) for t in tasks]
    return [actor_prompt(clean_plan(p.text), t["data"]) for t, group in zip(tasks, plans) for p in group]


def score_round(
    tasks: list[dict],
    plans: list[list[Completion]] | None,
    answers: list[list[Completion]],
    credit: CreditConfig,
    std_normalize: tuple[bool, bool] = (True, True),
    n_rollouts: int = 0,
) -> RoundResult:
    """Verify every answer, credit both roles and compute GRPO advantages.

    `answers[j]` holds the actor's K samples for actor_requests(...)[j].
    std_normalize = (planner, actor).
    """
    res = RoundResult()
    G = len(plans[0]) if plans else 1
    actor_rewards, outcomes, fidelity, plan_valid, answer_valid = [], [], [], [], []
    planner_rewards: list[list[float]] = []
    for ti, task in enumerate(tasks):
        task_plan_rewards = []
        for gi in range(G):
            plan = plans[ti][gi] if plans else None
            plan_text = clean_plan(plan.text) if plan else None
            group = answers[ti * G + gi]
            rewards, outs = [], []
            for a in group:
                v = verify(task, plan_text, a.text)
                r = v.outcome if credit.actor == "outcome" else v.fidelity
                if credit.actor_requires_valid_plan and plans is not None and not v.plan_valid:
                    r = 0.0
                rewards.append(r)
                outs.append(v.outcome)
                fidelity.append(v.fidelity)
                answer_valid.append(v.answer_valid)
                if len(res.rollouts) < n_rollouts:
                    res.rollouts.append(
                        {
                            "instruction": task["instruction"],
                            "data": task["data"],
                            "plan": plan_text,
                            "true_plan": ">".join(task["ops"]),
                            "answer": a.text,
                            "expected": task["answer"],
                            "outcome": v.outcome,
                        }
                    )
            valid = plan_text is not None and parse_plan(plan_text) is not None
            plan_valid.append(valid)
            actor_rewards.append(rewards)
            outcomes.extend(outs)
            # The planner is paid for its own output first: a malformed plan earns 0 even if the actor,
            # ignoring it, happened to answer right.
            task_plan_rewards.append(sum(outs) / len(outs) if valid else 0.0)
            adv = group_advantages(rewards, std_normalize[1])
            gid = f"{task['task_id']}/{gi}"
            res.actor_samples.extend(
                sample_record(a, r, ad, "actor", task["task_id"], gid) for a, r, ad in zip(group, rewards, adv)
            )
        planner_rewards.append(task_plan_rewards)
        if plans:
            adv = group_advantages(task_plan_rewards, std_normalize[0])
            res.planner_samples.extend(
                sample_record(p, r, ad, "planner", task["task_id"], task["task_id"])
                for p, r, ad in zip(plans[ti], task_plan_rewards, adv)
            )
    flat_actor = [r for g in actor_rewards for r in g]
    flat_planner = [r for g in planner_rewards for r in g]
    m = res.metrics
    m["success"] = _mean(outcomes)
    m["actor/reward_mean"], m["actor/reward_std"] = _mean(flat_actor), _std(flat_actor)
    m["actor/fidelity"] = _mean(fidelity)
    m["actor/malformed"] = float(sum(not v for v in answer_valid))
    m["actor/response_len"] = _mean([_length(a) for g in answers for a in g])
    m["actor/groups_with_signal"] = _mean([float(len(set(g)) > 1) for g in actor_rewards])
    if plans:
        m["planner/reward_mean"], m["planner/reward_std"] = _mean(flat_planner), _std(flat_planner)
        m["planner/plan_valid"] = _mean([float(v) for v in plan_valid])
        m["planner/malformed"] = float(sum(not v for v in plan_valid))
        m["planner/response_len"] = _mean([_length(p) for g in plans for p in g])
        m["planner/groups_with_signal"] = _mean([float(len(set(g)) > 1) for g in planner_rewards])
    return res


def evaluate(tasks: list[dict], plan_fn: GenerateFn, act_fn: GenerateFn, temperature: float, n_samples: int) -> dict:
    """Held-out metrics: pass@1 at `temperature` (n_samples plans, one answer each) and greedy end-to-end."""
    out = {}
    for name, temp, n in (("sampled", temperature, n_samples), ("greedy", 0.0, 1)):
        plans = plan_fn([planner_prompt(t) for t in tasks], temp, n)
        answers = act_fn(actor_requests(tasks, plans), temp, 1)
        scored = score_round(tasks, plans, answers, CreditConfig())
        out[f"{name}/success"] = scored.metrics["success"]
        out[f"{name}/plan_valid"] = scored.metrics["planner/plan_valid"]
        if name == "greedy":
            bf = [i for i, t in enumerate(tasks) if t["but_first"]]
            out["greedy/success_but_first"] = _mean([answers[i][0].text.strip() == tasks[i]["answer"] for i in bf])
    out["pass@1"] = out["sampled/success"]
    return out


def _mean(xs) -> float:
    xs = [float(x) for x in xs]
    return sum(xs) / len(xs) if xs else 0.0


def _std(xs) -> float:
    return statistics.pstdev(xs) if len(xs) > 1 else 0.0
