"""A role's trainer as a group of N Ray actors training data-parallel with torch.distributed.

Rank 0 is the role's RoleWorker trainer (it keeps the engine, the checkpoints and the weight sync);
ranks 1..N-1 are `TrainerRank` agents of their own schedulemesh pool, gang-placed by a placement
group (PACK by default). Rank 0 forms the process group at its first step (its node's address and a
free port as the rendezvous), pushes its weights and optimizer state to any rank whose state tag
differs (a new or recreated rank, or after a warm start or a restore on rank 0), then every rank takes
the same step (planact.rl.data_parallel). A step that fails (a rank died) is rolled back on rank 0
and raised; the supervisor recreates the dead rank and the retried step re-forms the group.

With `resources.fsdp` the ranks train a sharded replica instead of full copies (planact.rl.fsdp): the
state rank 0 pushes is scattered into everyone's shards, and after the step the shards are gathered
back into rank 0's model, which stays what the engine serves and what checkpoints hold.

Every rank, like rank 0's RoleWorker, receives its role's `RoleSpec` (planact.role_spec), not the run config.
"""

from __future__ import annotations

import copy
import time
import uuid
from typing import TYPE_CHECKING

import ray

from planact.config import RunConfig
from schedulemesh import AgentActor
from schedulemesh.agent import free_port
from schedulemesh.scheduler import SUPERVISOR_NAME

# torch and the training modules are imported where they are used: the schedulemesh supervisor and
# Prefect task workers import this module (to unpickle TrainerRank, or for rank_names) and never train.
if TYPE_CHECKING:
    import torch

    from planact.rl import fsdp
    from planact.rl.data_parallel import DataParallel
    from planact.rl.trainer import RoleTrainer
    from planact.role_spec import RoleSpec


def rank_names(cfg: RunConfig, role: str) -> list[str]:
    """Ray actor names of ranks 1..N-1 of a role's trainer group."""
    return [f"{cfg.run_name}:{role}:rank{k}" for k in range(1, getattr(cfg, role).resources.trainer_workers)]


def rank_pool(cfg: RunConfig, role: str) -> str:
    """schedulemesh pool of those ranks."""
    return f"{cfg.run_name}:{role}:ranks"


class TrainerRank(AgentActor):
    """Rank k > 0 of a role's trainer group: a model copy and its optimizer, stepping with rank 0."""

    def __init__(self, spec: RoleSpec, rank: int):
        import torch

        from planact.models import load_model
        from planact.rl.trainer import RoleTrainer

        rc = spec.config
        torch.set_num_threads(rc.resources.torch_threads)
        self.spec, self.role, self.rank, self.rc = spec, spec.role, rank, rc
        self.model, self.tokenizer = load_model(spec.initial_model(), rc.resources.device, rc.attention_kernel)
        self.trainer = RoleTrainer(self.model, self.tokenizer.pad_token_id, rc.rl, rc.sampling.temperature)
        self.tag = "fresh"  # never rank 0's tag: a new or recreated rank first receives rank 0's state
        self.dp: DataParallel | None = None
        self.replica: fsdp.Replica | None = None  # FSDP: this rank's shards (tied to one process group)

    def join(self, addr: str, port: int, world: int) -> int:
        """Enter rank 0's process group; returns this rank."""
        from planact.rl import data_parallel

        data_parallel.join(
            addr,
            port,
            self.rank,
            world,
            data_parallel.backend_for(self.rc.resources.device),
            self.rc.resources.trainer_timeout_s,
        )
        self.dp = data_parallel.DataParallel(self.rank, world, sharded=self.rc.resources.fsdp)
        self.replica = None
        return self.rank

    def load_shards(self, tag: str) -> None:
        """FSDP: shard a model over the current group and receive rank 0's state into it (collective)."""
        from planact.rl import fsdp

        if self.replica is None:
            model = self.model
            if model is None:  # a re-formed group: the shape again; the values come from rank 0
                from planact.models import load_model

                model, _ = load_model(self.spec.initial_model(), self.rc.resources.device, self.rc.attention_kernel)
            self.replica = fsdp.Replica(model, self.trainer, self.rc.resources.device)
            # Sharded in place: the full copy is gone, this rank holds 1/N of the parameters.
            self.model, self.trainer = None, self.replica.trainer
        self.replica.load()
        self.tag = tag

    def state_tag(self) -> str:
        """Which state this rank holds (equal to rank 0's when they are in step)."""
        return self.tag

    def set_state(self, state: tuple[dict, dict, str]) -> None:
        """Take rank 0's weights, optimizer state and tag."""
        weights, trainer_state, tag = state
        self.model.load_state_dict(weights)
        self.trainer.load_state_dict(trainer_state)
        self.tag = tag

    def train(self, samples: list[dict], tag: str) -> dict:
        """This rank's part of one data-parallel step."""
        from planact.rl.data_parallel import next_tag

        if tag != self.tag:
            raise RuntimeError(f"{self.role} rank {self.rank}: holds state {self.tag}, rank 0 steps from {tag}")
        metrics = self.trainer.train_step(samples, self.dp)
        if self.replica is not None:
            self.replica.gather()  # rank 0 collects the full state; this rank sends its shards
        self.tag = next_tag(tag, self.trainer.steps)
        return metrics

    def leave(self) -> None:
        """Leave the process group (rank 0 re-forms it after a failure)."""
        from planact.rl import data_parallel

        data_parallel.leave()
        self.dp = None
        self.replica = None

    def on_stop(self) -> None:
        """Leave the group when the agent is stopped."""
        from planact.rl import data_parallel

        data_parallel.leave()


class GroupLeader:
    """Rank 0's side of the group: forming it, keeping ranks in step, and one step with rollback on failure."""

    def __init__(self, spec: RoleSpec, model: torch.nn.Module, trainer: RoleTrainer):
        self.role, self.namespace, self.model, self.trainer = spec.role, spec.namespace, model, trainer
        self.res = spec.config.resources
        self.names = list(spec.rank_names)
        self.dp: DataParallel | None = None
        self.members: list[str] = []  # pid:incarnation of the ranks in the current process group
        self.replica: fsdp.Replica | None = None  # FSDP: rank 0's shards of the training replica
        self.tag = uuid.uuid4().hex[:16]

    def state_changed(self) -> None:
        """Rank 0's weights changed outside a group step (warm start, restore): ranks must be re-sent them."""
        self.tag = uuid.uuid4().hex[:16]

    def _handles(self) -> tuple[list, list[str]]:
        # Each rank must answer through the handle we will use: right after a crash the name can still
        # resolve to the dead actor for a moment, and a rank that never joins would hold the rendezvous.
        supervisor = ray.get_actor(SUPERVISOR_NAME, namespace=self.namespace)
        deadline = time.monotonic() + self.res.trainer_timeout_s
        while True:
            try:
                ray.get([supervisor.wait_alive.remote(n, 0, self.res.trainer_timeout_s) for n in self.names])
                handles = [ray.get_actor(n, namespace=self.namespace) for n in self.names]
                pings = ray.get([h.sm_ready.remote() for h in handles], timeout=30)
                return handles, [f"{p['pid']}:{p['incarnation']}" for p in pings]
            except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError, ValueError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

    def _form(self, handles: list) -> None:
        from planact.rl import data_parallel

        # The rendezvous is rank 0's own node and a port free there.
        addr, port, world = ray.util.get_node_ip_address(), free_port(), len(handles) + 1
        refs = [h.join.remote(addr, port, world) for h in handles]
        data_parallel.join(addr, port, 0, world, data_parallel.backend_for(self.res.device), self.res.trainer_timeout_s)
        ray.get(refs)
        self.dp = data_parallel.DataParallel(0, world, sharded=self.res.fsdp)
        self.replica = None

    def _sync(self, handles: list) -> int:
        tags = ray.get([h.state_tag.remote() for h in handles])
        stale = [h for h, t in zip(handles, tags) if t != self.tag]
        if stale:
            weights = {k: v.detach().cpu() for k, v in self.model.state_dict().items()}
            state = ray.put((weights, self.trainer.state_dict(), self.tag))
            ray.get([h.set_state.remote(state) for h in stale])
        return len(stale)

    def _load_shards(self, handles: list) -> int:
        # FSDP: the shards are (re)filled from rank 0's canonical state by every rank together.
        from planact.rl import fsdp

        tags = ray.get([h.state_tag.remote() for h in handles])
        if self.replica is not None and all(t == self.tag for t in tags):
            return 0
        refs = [h.load_shards.remote(self.tag) for h in handles]
        if self.replica is None:
            self.replica = fsdp.Replica(copy.deepcopy(self.model), self.trainer, self.res.device)
        self.replica.load(self.model, self.trainer)
        ray.get(refs, timeout=self.res.trainer_timeout_s)
        return len(handles)

    def train_step(self, samples: list[dict]) -> dict:
        """One data-parallel GRPO step of the whole group; on failure rank 0 rolls back and the error is raised."""
        from planact.rl import data_parallel

        handles, members = self._handles()
        if self.dp is None or members != self.members:  # first step, or a rank was recreated since
            self._form(handles)
            self.members = members
        sharded = self.res.fsdp
        resent = self._load_shards(handles) if sharded else self._sync(handles)
        # Host-memory snapshot: a step that dies half way (after some minibatch updates) must not count.
        # (FSDP trains a replica: rank 0's canonical state changes only once every rank has finished.)
        snapshot = (
            None
            if sharded
            else (
                {k: v.detach().clone() for k, v in self.model.state_dict().items()},
                copy.deepcopy(self.trainer.state_dict()),
            )
        )
        samples_ref = ray.put(samples)
        refs = [h.train.remote(samples_ref, self.tag) for h in handles]
        try:
            if sharded:
                metrics = self.replica.trainer.train_step(samples, self.dp)
                gathered = self.replica.gather()
            else:
                metrics = self.trainer.train_step(samples, self.dp)
            ray.get(refs, timeout=self.res.trainer_timeout_s)
        except Exception as exc:
            if snapshot is not None:
                self.model.load_state_dict(snapshot[0])
                self.trainer.load_state_dict(snapshot[1])
            self.dp, self.replica = None, None
            data_parallel.leave()
            for h in handles:
                h.leave.remote()  # survivors leave the broken group; the dead one is being recreated
            raise RuntimeError(
                f"{self.role} trainer group: the step failed on a rank ({type(exc).__name__}: "
                f"{str(exc)[:300]}); rank 0 rolled back, the group re-forms on the next try"
            ) from exc
        if sharded:
            self.replica.commit(self.model, self.trainer, gathered)
        self.tag = data_parallel.next_tag(self.tag, self.trainer.steps)
        share = self.replica.local_fraction() if sharded else 1.0
        return {
            **metrics,
            "trainer_workers": float(len(handles) + 1),
            "ranks_resent": float(resent),
            "param_share": share,
        }
