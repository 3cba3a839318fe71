"""Prefect tasks of an AFlow round: one stage each, delegating to aflow_rl.search.Search.

The search's state is its workspace folder, so every task rebuilds a `Search` from the config (cheap)
and reads what earlier stages wrote; on a multi-node cluster the workspace must be on shared storage.
"""

from __future__ import annotations

from prefect import task
from prefect.cache_policies import NO_CACHE

from aflow_rl.config import AFlowConfig
from aflow_rl.evaluator import evaluate_rows
from aflow_rl.executor import ensure_planact_checkpoint
from aflow_rl.optimizers import Candidate
from aflow_rl.search import Search
from aflow_rl.workflow import read_round

OPTS = {"cache_policy": NO_CACHE, "persist_result": False}


@task(name="prepare_executor", **OPTS)
def prepare_executor(cfg: AFlowConfig) -> str:
    """Build (once) the local executor models, before evaluation fans out; API executors need nothing."""
    if cfg.executor.kind != "planact":
        return cfg.executor.kind
    if cfg.benchmark != "planact":
        return f"candidate coder (skill {cfg.executor.coder_skill}, {cfg.executor.coder_mutants} mutants per problem)"
    return str(ensure_planact_checkpoint(cfg.executor, cfg.run_dir().parent))


@task(name="select", **OPTS)
def select_parent(cfg: AFlowConfig, round_idx: int, exclude: list[int], salt: int) -> dict | None:
    """AFlow's soft mixed-probability choice among round 1 and the top rounds (re-weighted by the policy)."""
    s = Search(cfg)
    pick = s.select(round_idx, set(exclude), salt)
    return (
        None
        if pick is None
        else {"parent": pick[0], "score": pick[1], "probabilities": {str(r): p for r, _, p in s.selection()}}
    )


@task(name="expand", retries=2, retry_delay_seconds=2, **OPTS)
def expand(cfg: AFlowConfig, round_idx: int, parent: int, score: float, salt: int) -> Candidate | None:
    """Ask the optimizer for one child of `parent` (LLM calls are retried by the engine; the task retries too)."""
    import random

    rng = random.Random(f"{cfg.seed}:expand:{round_idx}:{salt}:{parent}")
    return Search(cfg).propose(parent, score, rng)


@task(name="validate", **OPTS)
def validate_candidate(cfg: AFlowConfig, round_idx: int, candidate: Candidate) -> list[str]:
    """Refuse graphs that do not parse, use unknown operators or prompts, or exceed the call budget; write the round."""
    return Search(cfg).validate_and_write(round_idx, candidate)


@task(name="evaluate_shard", retries=1, **OPTS)
def evaluate_shard(cfg: AFlowConfig, round_idx: int, shard: int, repeat: int) -> dict:
    """Score round r's workflow on one shard of the validation split (one of the N repeats)."""
    s = Search(cfg)
    graph, prompt = read_round(s.ws.round_dir(round_idx))
    problems = s.validation[shard :: cfg.shards]
    out = evaluate_rows(
        graph,
        prompt,
        problems,
        cfg.benchmark,
        s.llm,
        cfg.concurrency,
        s.code_limits,
        f"{s.sample_key('validation', round_idx)}:rep{repeat}",
    )
    return {**out, "shard": shard, "repeat": repeat}


@task(name="record", **OPTS)
def record_round(cfg: AFlowConfig, round_idx: int, repeats: list[list[dict]], seconds: float) -> dict:
    """CSV per repeat, log.json, results.json rows, experience.json and processed_experience.json."""
    s = Search(cfg)
    out = s.record(round_idx, repeats, seconds)
    out["best"] = s.best()[1]
    out["best_round"] = s.best()[0]
    out["acceptance_rate"] = s.acceptance_rate()
    return out


@task(name="train_policy", **OPTS)
def train_policy(cfg: AFlowConfig, other_steps: list[dict], other_returns: dict[str, float]) -> dict:
    """GiGPO update of the edit policy on this run's and other runs' expansions."""
    return Search(cfg).train_policy(other_steps, other_returns)


@task(name="convergence", **OPTS)
def convergence_check(cfg: AFlowConfig) -> bool:
    """Top-k average unchanged for `patience` rounds."""
    return Search(cfg).converged()


@task(name="test_best", **OPTS)
def test_best(cfg: AFlowConfig) -> dict:
    """Held-out test score of the best validation round."""
    s = Search(cfg)
    r, val = s.best()
    return {"best_round": r, "best_validation": val, "test_score": s.test_score(r)}


def expansion_items(cfg: AFlowConfig, round_idx: int, out: dict, candidate_meta: dict) -> list[dict]:
    """One experience-pool item per expansion: anchor = the parent state's key."""
    from aflow_rl.policy import WorkflowState

    s = Search(cfg)
    parent = out.get("parent")
    if parent is None:
        return []
    state = WorkflowState(*read_round(s.ws.round_dir(parent)), None, [out.get("before", 0.0)])
    return [
        {
            "id": f"{cfg.run_name}/{round_idx}",
            "run": cfg.run_name,
            "round": round_idx,
            "role": "aflow",
            "anchor": state.key,
            "benchmark": cfg.benchmark,
            "priority": 1.0 + abs(out.get("reward", 0.0)),
            "data": {
                "parent": parent,
                "modification": out.get("modification"),
                "before": out.get("before"),
                "after": out.get("score"),
                "reward": out.get("reward"),
                "edit": candidate_meta.get("edit"),
                "features": candidate_meta.get("features"),
                "allowed": candidate_meta.get("allowed"),
                "prob": candidate_meta.get("prob"),
            },
        }
    ]
