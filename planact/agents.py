"""The long-lived Ray actors of a run (engines, trainers), created and supervised through schedulemesh.

Each role is one schedulemesh pool ("<run>:<role>", labels run/role) sized from the role's resources
in the run config: one agent per engine replica, plus the trainer when it is not colocated. The
supervisor owns the agents, so they outlive the task that asked for them and come back after a crash;
tasks reach them by name, waiting while a dead one is being recreated. An agent is given its role's
`RoleSpec` (planact.role_spec), built here from the run config, never the run config itself.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import ray

from planact.config import RunConfig
from planact.engines.base import Completion
from planact.envs.base import make_env
from planact.progress import ProgressFn, read_progress
from planact.role_spec import RoleSpec, role_spec, warm_start_demos
from planact.samples import Sample
from planact.trainer_group import TrainerRank, rank_names, rank_pool
from planact.workers import RoleWorker
from schedulemesh import Scheduler
from schedulemesh.scheduler import SUPERVISOR_NAME


@dataclass(frozen=True)
class RoleGroup:
    """Names of one role's engine replicas and its trainer (picklable; what tasks receive)."""

    role: str
    namespace: str
    engines: tuple[str, ...]
    trainer: str | None
    extra_sync: tuple[str, ...] = field(default=())  # engines that need weights pushed after training
    pool: str = ""
    ranks: tuple[str, ...] = field(default=())  # trainer ranks 1..N-1 (trainer_workers > 1)
    rank_pool: str = ""

    def handle(self, name: str, timeout_s: float = 120.0):
        """The actor of this group by name, once the supervisor reports it alive (it may be recreating it)."""
        supervisor = ray.get_actor(SUPERVISOR_NAME, namespace=self.namespace)
        ray.get(supervisor.wait_alive.remote(name, 0, timeout_s))
        return ray.get_actor(name, namespace=self.namespace)

    def worker(self, name: str) -> Worker:
        """The agent `name` of this group, with RoleWorker's methods as typed calls."""
        return Worker(self, name)


Decoding = Literal["generate", "choose"]  # free sampling, or a choice among each request's candidates


@dataclass(frozen=True)
class Worker:
    """One agent of a role group: RoleWorker's methods, each called on the Ray actor and waited for.

    Calls go through the group's `handle`, so one made while the supervisor recreates a dead agent waits
    for the new one. `actor` is the Ray handle itself, for calls sent without waiting (a fan-out)."""

    group: RoleGroup
    name: str

    @property
    def actor(self):
        """The Ray actor handle (once the agent is alive)."""
        return self.group.handle(self.name)

    def sample(self, decoding: Decoding, requests: list, **kwargs) -> list[list[Completion]]:
        """`generate` (prompts) or `choose` (prompt, candidates) requests, as the environment decodes."""
        return ray.get(self.submit_sample(decoding, requests, **kwargs))

    def submit_sample(self, decoding: Decoding, requests: list, **kwargs) -> ray.ObjectRef:
        """`sample` sent without waiting (a fan-out over replicas): the reference to its answer."""
        actor = self.actor
        return (actor.choose if decoding == "choose" else actor.generate).remote(requests, **kwargs)

    def health(self) -> dict:
        """RoleWorker.health: pid, weight version, busy state."""
        return ray.get(self.actor.health.remote())

    def train(self, samples: list[Sample], step_id: str | None = None) -> dict:
        """RoleWorker.train: one RL update (a retried `step_id` does not train twice); its metrics."""
        return ray.get(self.actor.train.remote(samples, step_id))

    def warm_start(self, demos: list[tuple[str, str]], seed: int, steps: int | None = None) -> list[dict]:
        """RoleWorker.warm_start on the (prompt, target) demonstrations: the supervised warm start's loss curve."""
        return ray.get(self.submit_warm_start(demos, seed, steps))

    def submit_warm_start(
        self, demos: list[tuple[str, str]], seed: int, steps: int | None = None, progress_file: str | None = None
    ) -> ray.ObjectRef:
        """`warm_start` sent without waiting (the caller reports the trainer's progress file meanwhile)."""
        return self.actor.warm_start.remote(demos, seed, steps, progress_file)

    def submit_update_weights(self, weights_ref: ray.ObjectRef, version: int) -> ray.ObjectRef:
        """RoleWorker.update_weights sent without waiting (one weight sync fans out over the engines)."""
        return self.actor.update_weights.remote(weights_ref, version)

    def submit_load_checkpoint(self, folder: str) -> ray.ObjectRef:
        """RoleWorker.load_checkpoint sent without waiting (a restore fans out over the agents); the version."""
        return self.actor.load_checkpoint.remote(folder)

    def get_weights(self) -> tuple[dict | str, int]:
        """RoleWorker.get_weights: (a CPU state_dict, adapters or an exported folder, the weight version)."""
        return ray.get(self.actor.get_weights.remote())

    def submit_get_weights(self) -> tuple[ray.ObjectRef, ray.ObjectRef]:
        """RoleWorker.get_weights as two refs, (weights, version), sent without waiting."""
        return self.actor.get_weights.options(num_returns=2).remote()

    def save_checkpoint(self, folder: str, expect_version: int | None = None) -> str:
        """RoleWorker.save_checkpoint: the folder written."""
        return ray.get(self.actor.save_checkpoint.remote(folder, expect_version))


def worker_name(run_name: str, role: str, replica: int | str) -> str:
    """Ray actor name of a role's replica (or 'trainer')."""
    return f"{run_name}:{role}:{replica}"


def pool_name(run_name: str, role: str) -> str:
    """schedulemesh pool of a role's agents."""
    return f"{run_name}:{role}"


def check_feasible(cfg: RunConfig, roles: list[str]) -> None:
    """Fail fast when the cluster cannot host the requested actors of all roles together."""
    need = {"CPU": 0.0, "GPU": 0.0}
    for role in roles:
        res = getattr(cfg, role).resources
        n = _agent_count(cfg, role) + len(rank_names(cfg, role))
        need["CPU"] += n * res.num_cpus
        need["GPU"] += n * res.num_gpus
        for k, v in res.custom.items():
            need[k] = need.get(k, 0.0) + n * v
    have = ray.cluster_resources()
    short = {k: (v, have.get(k, 0.0)) for k, v in need.items() if v > have.get(k, 0.0) + 1e-9}
    if short:
        detail = ", ".join(f"{k}: need {v:g}, cluster has {h:g}" for k, (v, h) in short.items())
        raise RuntimeError(
            f"the Ray cluster cannot host the {'/'.join(roles)} actors ({detail}); lower <role>.resources or add nodes"
        )


def _colocated(cfg: RunConfig, role: str) -> bool:
    rc = getattr(cfg, role)
    return rc.resources.colocate_trainer or not rc.train


def _agent_count(cfg: RunConfig, role: str) -> int:
    return getattr(cfg, role).resources.replicas + (0 if _colocated(cfg, role) else 1)


def scheduler_for(cfg: RunConfig) -> Scheduler:
    """The schedulemesh scheduler of the run's namespace (state persisted beside the runs on a real cluster)."""
    if cfg.ray.private:
        # A private local Ray dies with the driver, so its state file lives in that Ray session's own folder:
        # it lets a crashed supervisor recreate the run's agents, and can never resurrect a finished run's.
        ctx = ray.get_runtime_context()
        state = Path(ctx.get_temp_dir()) / ctx.get_session_name() / f"schedulemesh-{cfg.barrier.namespace}.pkl"
    else:
        state = Path(cfg.checkpoint.root) / ".schedulemesh" / f"{cfg.barrier.namespace}.pkl"
    return Scheduler(namespace=cfg.barrier.namespace, state_path=state, ready_timeout_s=cfg.ray.agent_ready_timeout_s)


def create_role_group(cfg: RunConfig, role: str, scheduler: Scheduler | None = None) -> RoleGroup:
    """Create (or re-attach to) a role's pool, engine replicas and trainer; returns once all answer."""
    scheduler = scheduler or scheduler_for(cfg)
    rc = getattr(cfg, role)
    res = rc.resources
    role_args = role_spec(cfg, role)  # what every agent of the role receives, built once
    spec = {"cpu": res.num_cpus, "gpu": res.num_gpus, "memory": res.memory_mb or 0, **res.custom}
    pool = pool_name(cfg.run_name, role)
    scheduler.create_pool(
        pool, {"run": cfg.run_name, "role": role}, spec, target_agents=_agent_count(cfg, role), exist_ok=True
    )
    colocated = _colocated(cfg, role)
    # max_concurrency 2: a health or weight call is answered while a generate call runs.
    opts = {"max_concurrency": 2, "get_if_exists": True}
    engines = []
    for i in range(res.replicas):
        name = worker_name(cfg.run_name, role, i)
        scheduler.create_agent(
            name,
            pool,
            RoleWorker,
            ray_options=opts,
            labels={"kind": "engine"},
            actor_args=(role_args, i, rc.train and colocated and i == 0),
        )
        engines.append(name)
    trainer = None
    if rc.train:
        trainer = engines[0] if colocated else worker_name(cfg.run_name, role, "trainer")
        if not colocated:
            scheduler.create_agent(
                trainer,
                pool,
                RoleWorker,
                ray_options=opts,
                labels={"kind": "trainer"},
                actor_args=(role_args, -1, True),
            )
    ranks, ranks_pool = _create_trainer_ranks(cfg, role_args, scheduler, spec, opts) if rc.train else ((), "")
    extra = tuple(e for e in engines if e != trainer)
    return RoleGroup(role, cfg.barrier.namespace, tuple(engines), trainer, extra, pool, ranks, ranks_pool)


def _create_trainer_ranks(
    cfg: RunConfig, role_args: RoleSpec, scheduler: Scheduler, spec: dict, opts: dict
) -> tuple[tuple[str, ...], str]:
    """Ranks 1..N-1 of the role's trainer group, gang-placed in their own pool (none when N = 1)."""
    role, res, names = role_args.role, role_args.config.resources, role_args.rank_names
    if not names:
        return (), ""
    pool = rank_pool(cfg, role)
    scheduler.create_pool(
        pool,
        {"run": cfg.run_name, "role": role, "kind": "trainer-rank"},
        spec,
        target_agents=len(names),
        placement_strategy=res.trainer_placement,
        exist_ok=True,
    )
    for k, name in enumerate(names, start=1):
        scheduler.create_agent(
            name, pool, TrainerRank, ray_options=opts, labels={"kind": "trainer-rank"}, actor_args=(role_args, k)
        )
    return tuple(names), pool


def delete_role_groups(cfg: RunConfig, groups: list[RoleGroup]) -> None:
    """Stop a finished run's agents and free their pools."""
    scheduler = scheduler_for(cfg)
    for g in groups:
        for pool in (g.rank_pool, g.pool):
            if pool:
                scheduler.delete_pool(pool, force=True)


def generate_sharded(group: RoleGroup, prompts: list, decoding: Decoding = "generate", **kwargs) -> list:
    """Spread prompts (or candidate-set requests, decoding 'choose') over the group's replicas; results in order."""
    refs = [
        group.worker(name).submit_sample(decoding, part, **kwargs)
        for name, part in zip(group.engines, shard(prompts, len(group.engines)))
        if part
    ]
    return [c for part in ray.get(refs) for c in part]


@dataclass(frozen=True)
class RolePolicy:
    """A role group as an environment's Policy: generation and constrained choice spread over its replicas."""

    group: RoleGroup

    def generate(self, prompts: list[str], **kwargs) -> list:
        """Free sampling (planact.envs.base.Policy.generate)."""
        return generate_sharded(self.group, prompts, "generate", **kwargs)

    def choose(self, requests: list, **kwargs) -> list:
        """Constrained sampling over candidate sets (planact.envs.base.Policy.choose)."""
        return generate_sharded(self.group, requests, "choose", **kwargs)


def shard(items: list, n: int) -> list[list]:
    """Split items into n contiguous, nearly equal shards (order kept when concatenated)."""
    k, r = divmod(len(items), n)
    out, start = [], 0
    for i in range(n):
        end = start + k + (1 if i < r else 0)
        out.append(items[start:end])
        start = end
    return out


def sync_weights(group: RoleGroup) -> None:
    """Push the trainer's weights to every engine that does not share its model in-process."""
    if group.extra_sync:
        # The weights go from the trainer's process to the engines' through the object store, never through
        # this one: unpickling a state_dict here imported torch into the driver (~4 CPU-s a run).
        weights_ref, version_ref = group.worker(group.trainer).submit_get_weights()
        version = ray.get(version_ref)
        ray.get([group.worker(n).submit_update_weights(weights_ref, version) for n in group.extra_sync])


def train_and_sync(group: RoleGroup, samples: list[Sample], step_id: str | None = None, sync: bool = True) -> dict:
    """Train the role on its samples, then (unless `sync` is False: pipelined rounds sync later) sync the
    new weights to its engines.

    With a step_id a retried call (after an engine died during the sync) does not train twice.
    """
    t0 = time.perf_counter()
    metrics = group.worker(group.trainer).train(samples, step_id)
    if sync:
        sync_weights(group)
        metrics["sync_time_s"] = time.perf_counter() - t0 - metrics.get("train_time_s", 0.0)
    return metrics


def warm_start_and_sync(
    cfg: RunConfig,
    group: RoleGroup,
    seed: int,
    steps: int | None = None,
    progress: ProgressFn | None = None,
    progress_file: str | None = None,
) -> list[dict]:
    """Supervised warm start on the trainer, then sync; returns the loss curve.

    The demonstrations are drawn here, from the environment (its set-up, the repair env's localisation
    contexts, reported to `progress`). With `progress` and `progress_file`, the trainer writes the warm
    start's steps to that file and this call hands each new one to `progress` while it waits."""
    if progress is not None and progress_file is not None:
        Path(progress_file).unlink(missing_ok=True)  # a previous run's last line is not this one's
    env = make_env(cfg, progress=progress)
    demos = warm_start_demos(env, group.role, getattr(cfg, group.role).warm_start, seed, steps)
    if progress is None or progress_file is None:
        curve = group.worker(group.trainer).warm_start(demos, seed, steps)
    else:
        ref = group.worker(group.trainer).submit_warm_start(demos, seed, steps, progress_file)
        curve = wait_reporting(ref, progress_file, progress)
    sync_weights(group)
    return curve


def wait_reporting(ref, progress_file: str, progress: ProgressFn, poll_s: float = 5.0):
    """`ray.get(ref)`, handing every new update found in `progress_file` to `progress` meanwhile."""
    last = None
    while True:
        ready, _ = ray.wait([ref], timeout=poll_s)
        update = read_progress(progress_file)
        if update is not None and update != last:
            progress(update)
            last = update
        if ready:
            return ray.get(ref)


def restore_group(group: RoleGroup, folder: str) -> int:
    """Load a checkpoint into every actor of the group; returns the weight version."""
    names = set(group.engines) | ({group.trainer} if group.trainer else set())
    versions = ray.get([group.worker(n).submit_load_checkpoint(folder) for n in sorted(names)])
    return max(versions)
