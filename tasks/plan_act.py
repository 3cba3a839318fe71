"""Prefect tasks of a Plan/Act round: each a few lines that call a library function or a named actor."""

from __future__ import annotations

import time
import zlib

from prefect import task
from prefect.cache_policies import NO_CACHE

from planact import agents, registry
from planact.batch import RoundBatch
from planact.config import RunConfig
from planact.envs.base import evaluate, make_env
from planact.orchestrator import barrier_key, get_or_create_orchestrator, orchestrator_state, resolve_barrier
from tasks.progress import task_progress

# Payloads are whole rounds of token ids: never hash or persist them.
TASK_OPTS = {"cache_policy": NO_CACHE, "persist_result": False}
# Tasks that call agents retry when an agent died: meanwhile the schedulemesh supervisor recreates it
# (restored from the last checkpoint) and RoleGroup.handle waits until it answers again.
AGENT_TASK_OPTS = {**TASK_OPTS, "retries": 2, "retry_delay_seconds": 2}


class Payload:
    """An opaque box for a round's bulk data (plans, answers, samples).

    Prefect walks list/dict/dataclass parameters looking for futures; on a
    round's thousands of token lists that walk cost seconds. It does not look
    inside a plain object, and this one pickles cheaply to Ray workers.
    """

    __slots__ = ("data", "where")

    def __init__(self, data, where: dict | None = None):
        self.data = data
        self.where = where

    def __getstate__(self):
        return (self.data, self.where)

    def __setstate__(self, state):
        self.data, self.where = state


def where_am_i() -> dict:
    """Which process and Ray node ran this task, and where it imported planact from."""
    import os

    import planact

    node = None
    try:
        import ray

        if ray.is_initialized():
            node = ray.get_runtime_context().get_node_id()
    except Exception:  # provenance is informational only
        pass
    return {
        "pid": os.getpid(),
        "node_id": node,
        "planact_file": planact.__file__,
        "pythonpath": os.environ.get("PYTHONPATH", ""),
    }


def _open(x):
    return x.data if isinstance(x, Payload) else x


def _seed(cfg: RunConfig, round_idx: int, stage: str) -> int:
    # crc32, not hash(): str hashing differs between processes, and a resumed run must sample the same way.
    return zlib.crc32(f"{cfg.seed}:{round_idx}:{stage}".encode())


@task(name="planner_generate", **AGENT_TASK_OPTS)
def planner_generate(cfg: RunConfig, planner: agents.RoleGroup, batch: Payload, round_idx: int) -> Payload:
    """G plans per task: one completion each, or a multi-turn episode each (the repair env's graph planner)."""
    return Payload(make_env(cfg).plan(_open(batch), agents.RolePolicy(planner), _seed(cfg, round_idx, "plan")))


def _orchestrator_died(task, task_run, state) -> bool:
    """Retry a barrier only when its orchestrator actor died; a timeout or a refusal is the barrier's answer."""
    from ray.exceptions import RayActorError

    return isinstance(state.data, RayActorError)


# A barrier whose orchestrator died is retried: the next arrival finds (or creates) a live one, restored from
# its state file, and both roles arrive again.
@task(name="barrier", retry_condition_fn=_orchestrator_died, **AGENT_TASK_OPTS)
def barrier(
    cfg: RunConfig,
    round_idx: int,
    role: str,
    payload: Payload | None = None,
    phase: str = "plans",
    incarnation: str | None = None,
) -> Payload:
    """Arrive at the PlanActOrchestrator barrier for this round; returns its release outcome."""
    import ray

    payload = _open(payload)
    orch = get_or_create_orchestrator(cfg.barrier.namespace, str(orchestrator_state(cfg)))
    roles = ("planner", "actor") if role == "both" else (role,)
    key = barrier_key(cfg.run_name, round_idx, phase)
    # In one-flow mode both roles arrive from here (concurrently) and the barrier releases at once; the
    # payload stays in this process (no other job reads it) instead of travelling to the actor and back.
    sent = None if role == "both" else payload
    refs = [
        orch.arrive.remote(
            key,
            r,
            sent if r == _payload_role(phase) else None,
            ("planner", "actor"),
            cfg.barrier.timeout_s,
            cfg.barrier.fallback_on_timeout,
            incarnation,
            cfg.barrier.liveness_s,
        )
        for r in roles
    ]
    result = resolve_barrier(ray.get(refs)[-1])
    if role == "both" and result["status"] == "complete":
        result["payloads"][_payload_role(phase)] = payload
    return Payload(result)


def _payload_role(phase: str) -> str:
    # Plans travel from the planner; feedback (the planner's scored samples) travels from the actor.
    return "planner" if phase == "plans" else "actor"


@task(name="actor_execute", **AGENT_TASK_OPTS)
def actor_execute(
    cfg: RunConfig,
    actor: agents.RoleGroup,
    engine: str,
    prompts: list,
    round_idx: int,
    shard_idx: int,
    method: agents.Decoding = "generate",
) -> Payload:
    """K answers per request from one actor engine replica (one task per replica: the fan-out)."""
    prompts = _open(prompts)
    if not prompts:
        return Payload([])
    answers = actor.worker(engine).sample(
        method, prompts, n=cfg.actor.group_size, seed=_seed(cfg, round_idx, f"act{shard_idx}")
    )
    return Payload(answers, where_am_i())


@task(name="score_rewards", **TASK_OPTS)
def score_rewards(cfg: RunConfig, batch: Payload, plans: Payload, answers: Payload) -> Payload:
    """Verify answers (the repair env: in the sandbox, against the package's own tests) and credit both roles."""
    return Payload(
        make_env(cfg).score(_open(batch), _open(plans), _open(answers), n_rollouts=cfg.tracking.rollout_rows)
    )


@task(name="train_role", **AGENT_TASK_OPTS)
def train_role(group: agents.RoleGroup, batch: Payload, sync: bool = True) -> dict:
    """One GRPO update on the role's trainer over its part of the round's `RoundBatch`, then (unless pipelined)
    weight sync to its engines (applied once per round)."""
    rb: RoundBatch = _open(batch)
    return agents.train_and_sync(group, rb.samples(group.role), f"round-{rb.round}", sync)


@task(name="sync_weights", **AGENT_TASK_OPTS)
def sync_role(group: agents.RoleGroup) -> float:
    """Pipelined rounds: push the trainer's weights to the role's engines once they are idle; returns seconds."""
    t0 = time.perf_counter()
    agents.sync_weights(group)
    return time.perf_counter() - t0


@task(name="warm_start", **AGENT_TASK_OPTS)
def warm_start(cfg: RunConfig, group: agents.RoleGroup, seed: int, progress_file: str | None = None) -> list[dict]:
    """Supervised warm start of one role; returns its loss curve. Its phases (the environment's localisation
    contexts, here; the steps, as the trainer writes them to `progress_file`) are shown k of n."""
    report = task_progress(f"warm-start-{group.role}")
    return agents.warm_start_and_sync(cfg, group, seed, progress=report, progress_file=progress_file)


@task(name="evaluate", **AGENT_TASK_OPTS)
def evaluate_heldout(cfg: RunConfig, planner: agents.RoleGroup, actor: agents.RoleGroup) -> dict:
    """The environment's held-out metrics (synthetic: pass@1 and greedy success; repair: solve rates by budget),
    the environment's set-up and the evaluation shown k of n."""
    report = task_progress("evaluate")
    return evaluate(make_env(cfg, progress=report), agents.RolePolicy(planner), agents.RolePolicy(actor), report)


@task(name="checkpoint", **AGENT_TASK_OPTS)
def checkpoint(groups: list[agents.RoleGroup], folder: str, versions: dict[str, int] | None = None) -> str:
    """Save every trained role's weights, optimizer, RNG and weight version into `folder` (refused when a role's
    trainer holds another version than `versions` says the run reached)."""
    for g in groups:
        g.worker(g.trainer or g.engines[0]).save_checkpoint(folder, (versions or {}).get(g.role))
    return folder


@task(name="register-models", **TASK_OPTS)
def register_models(
    cfg: RunConfig,
    tracking_uri: str,
    run_id: str,
    folder: str,
    round_idx: int,
    heldout: dict[str, float],
    roles: list[str],
) -> dict[str, int]:
    """Log each trained role of the final checkpoint as an MLflow transformers model and register a version."""
    report = task_progress("register")
    return registry.register_checkpoint(cfg, tracking_uri, run_id, folder, round_idx, heldout, roles, report)


__all__ = [
    "actor_execute",
    "barrier",
    "checkpoint",
    "evaluate_heldout",
    "register_models",
    "Payload",
    "planner_generate",
    "score_rewards",
    "sync_role",
    "train_role",
    "warm_start",
]
