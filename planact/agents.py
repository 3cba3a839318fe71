"""Creating and calling the long-lived Ray actors of a run (engines, trainers) by name.

Actors are created by the driver (the flow body), so they live as long as the
flow's Ray connection; tasks reach them by name in an explicit namespace.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import ray

from planact.config import RunConfig
from planact.workers import RoleWorker


# The driver keeps one handle per actor it created: a named, non-detached actor is destroyed when its
# creator's handles go out of scope, and it should die with the driver (a resumed run rebuilds it).
_OWNED: dict[str, object] = {}


@dataclass(frozen=True)
class RoleGroup:
    """Names of one role's engine replicas and its trainer (picklable; what tasks receive)."""

    role: str
    namespace: str
    engines: tuple[str, ...]
    trainer: str | None
    extra_sync: tuple[str, ...] = field(default=())  # engines that need weights pushed after training

    def handle(self, name: str):
        """Look up an actor of this group by name."""
        return ray.get_actor(name, namespace=self.namespace)


def worker_name(run_name: str, role: str, replica: int | str) -> str:
    """Ray actor name of a role's replica (or 'trainer')."""
    return f"{run_name}:{role}:{replica}"


def check_feasible(cfg: RunConfig, roles: list[str]) -> None:
    """Fail fast when the cluster cannot host the requested actors (Ray would wait forever)."""
    need = {"CPU": 0.0, "GPU": 0.0}
    for role in roles:
        res = getattr(cfg, role).resources
        n = res.replicas + (0 if res.colocate_trainer or not getattr(cfg, role).train else 1)
        need["CPU"] += n * res.num_cpus
        need["GPU"] += n * res.num_gpus
        for k, v in res.custom.items():
            need[k] = need.get(k, 0.0) + n * v
    have = ray.cluster_resources()
    short = {k: (v, have.get(k, 0.0)) for k, v in need.items() if v > have.get(k, 0.0) + 1e-9}
    if short:
        detail = ", ".join(f"{k}: need {v:g}, cluster has {h:g}" for k, (v, h) in short.items())
        raise RuntimeError(f"the Ray cluster cannot host the {'/'.join(roles)} actors ({detail}); "
                           "lower <role>.resources or add nodes")


def create_role_group(cfg: RunConfig, role: str) -> RoleGroup:
    """Create (or find) a role's engine replicas and trainer as named Ray actors and wait until they answer."""
    rc = getattr(cfg, role)
    res = rc.resources
    ns = cfg.barrier.namespace
    cls = ray.remote(RoleWorker)
    opts = {"namespace": ns, "num_cpus": res.num_cpus, "num_gpus": res.num_gpus, "get_if_exists": True,
            "max_concurrency": 2}
    if res.memory_mb:
        opts["memory"] = res.memory_mb * 1024 * 1024
    if res.custom:
        opts["resources"] = dict(res.custom)
    colocated = res.colocate_trainer or not rc.train
    engines = []
    handles = []
    for i in range(res.replicas):
        name = worker_name(cfg.run_name, role, i)
        handles.append(cls.options(name=name, **opts).remote(cfg, role, i, rc.train and colocated and i == 0))
        engines.append(name)
    trainer = None
    if rc.train:
        if colocated:
            trainer = engines[0]
        else:
            trainer = worker_name(cfg.run_name, role, "trainer")
            handles.append(cls.options(name=trainer, **opts).remote(cfg, role, -1, True))
    ray.get([h.health.remote() for h in handles])
    _OWNED.update({n: h for n, h in zip(engines + ([trainer] if trainer and trainer not in engines else []), handles)})
    extra = tuple(e for e in engines if e != trainer)
    return RoleGroup(role, ns, tuple(engines), trainer, extra)


def call(group: RoleGroup, name: str, method: str, *args, **kwargs):
    """Call `method` on a named actor of the group and wait for the result."""
    return ray.get(getattr(group.handle(name), method).remote(*args, **kwargs))


def generate_sharded(group: RoleGroup, prompts: list[str], **kwargs) -> list:
    """Spread prompts over the group's replicas and gather completions in order."""
    shards = shard(prompts, len(group.engines))
    refs = [group.handle(n).generate.remote(s, **kwargs) for n, s in zip(group.engines, shards) if s]
    return [c for part in ray.get(refs) for c in part]


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
        weights, version = call(group, group.trainer, "get_weights")
        ref = ray.put(weights)
        ray.get([group.handle(n).update_weights.remote(ref, version) for n in group.extra_sync])


def train_and_sync(group: RoleGroup, samples: list[dict]) -> dict:
    """Train the role on its samples, then sync the new weights to its engines."""
    t0 = time.perf_counter()
    metrics = call(group, group.trainer, "train", samples)
    sync_weights(group)
    metrics["sync_time_s"] = time.perf_counter() - t0 - metrics.get("train_time_s", 0.0)
    return metrics


def warm_start_and_sync(group: RoleGroup, seed: int, steps: int | None = None) -> list[dict]:
    """Supervised warm start on the trainer, then sync; returns the loss curve."""
    curve = call(group, group.trainer, "warm_start", seed, steps)
    sync_weights(group)
    return curve


def restore_group(group: RoleGroup, folder: str) -> int:
    """Load a checkpoint into every actor of the group; returns the weight version."""
    names = set(group.engines) | ({group.trainer} if group.trainer else set())
    versions = ray.get([group.handle(n).load_checkpoint.remote(folder) for n in sorted(names)])
    return max(versions)

