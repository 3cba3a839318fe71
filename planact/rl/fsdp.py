"""FSDP2 sharding of a role's trainer group: parameters, gradients and optimizer state split over the ranks.

The role's full model on rank 0 stays the canonical state (it serves the colocated engine, is what
checkpoints, warm starts and restores write, and what a rolled-back step returns to). The group trains a
*replica* that `torch.distributed.fsdp.fully_shard` spreads over the ranks (each decoder layer, then
the root: tied embeddings live in the root's group). Around each step:

  load:   rank 0's full weights and optimizer state are scattered into the replica's shards
          (only when they changed outside the group, or the group was re-formed);
  train:  the ordinary GRPO step on the replica (planact.rl.trainer), gradients reduce-scattered;
  gather: the updated shards are gathered back into rank 0's full model and optimizer.

FSDP averages the reduced gradients over the ranks (a plain sum would need PREMUL_SUM, which gloo lacks),
so each rank scales its loss by its share of the chunk's tokens times the world size: the average is
then the gradient of the whole chunk's token mean, and N sharded ranks take the step one process would,
up to float summation order. Gathering the full optimizer state every step
keeps rollback and checkpoints trivial; it costs one full copy of the optimizer in rank 0's host memory.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_optimizer_state_dict,
    set_model_state_dict,
    set_optimizer_state_dict,
)
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

_FULL = StateDictOptions(full_state_dict=True, cpu_offload=True)
_FROM_RANK0 = StateDictOptions(full_state_dict=True, broadcast_from_rank0=True)


def _blocks(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The repeated decoder layers (the unit each shard group gathers at once)."""
    inner = getattr(model, "model", None)
    layers = getattr(inner, "layers", None)
    if layers is None:
        raise ValueError(
            f"FSDP: {type(model).__name__} has no .model.layers; only decoder-only transformers "
            "(Llama, Qwen2, ...) are sharded"
        )
    return list(layers)


def shard(replica: torch.nn.Module, device: str) -> torch.nn.Module:
    """Shard `replica` in place over the current process group (every rank calls it with the same model shape)."""
    dev_type = "cuda" if str(device).startswith("cuda") else "cpu"
    mesh = init_device_mesh(dev_type, (dist.get_world_size(),))
    # bf16 compute with fp32 gradient reduction on GPU; CPU keeps fp32 (no fast bf16 matmul there).
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32) if dev_type == "cuda" else None
    kwargs = {"mesh": mesh, **({"mp_policy": mp} if mp else {})}
    for block in _blocks(replica):
        fully_shard(block, **kwargs)
    fully_shard(replica, **kwargs)
    return replica


def _names(model: torch.nn.Module) -> list[str]:
    return [n for n, p in model.named_parameters() if p.requires_grad]


def optimizer_to_fqn(model: torch.nn.Module, state: dict) -> dict:
    """A torch optimizer state_dict (params by index) -> the same keyed by parameter name (DCP's full form)."""
    names = _names(model)
    return {
        "state": {names[i]: v for i, v in state["state"].items()},
        "param_groups": [{**g, "params": [names[i] for i in g["params"]]} for g in state["param_groups"]],
    }


def optimizer_from_fqn(model: torch.nn.Module, state: dict) -> dict:
    """The inverse of optimizer_to_fqn."""
    index = {n: i for i, n in enumerate(_names(model))}
    return {
        "state": {index[n]: v for n, v in state["state"].items()},
        "param_groups": [{**g, "params": [index[n] for n in g["params"]]} for g in state["param_groups"]],
    }


def load_full(
    replica: torch.nn.Module, optimizer: torch.optim.Optimizer, weights: dict | None, optim_state: dict | None
) -> None:
    """Scatter rank 0's full weights and (name-keyed) optimizer state into every rank's shards (collective).

    Other ranks pass None: they receive. An optimizer that has not stepped yet has no state to send."""
    rank0 = dist.get_rank() == 0
    set_model_state_dict(replica, weights if rank0 else {}, options=_FROM_RANK0)
    has_state = [bool(optim_state and optim_state["state"])] if rank0 else [False]
    dist.broadcast_object_list(has_state, src=0)
    if has_state[0]:
        set_optimizer_state_dict(replica, optimizer, optim_state if rank0 else {}, options=_FROM_RANK0)


def gather_full(replica: torch.nn.Module, optimizer: torch.optim.Optimizer) -> tuple[dict, dict]:
    """Full weights and name-keyed optimizer state on rank 0, on the host (collective; other ranks get empty dicts)."""
    weights = get_model_state_dict(replica, options=_FULL)
    optim_state = get_optimizer_state_dict(replica, optimizer, options=_FULL)
    return weights, optim_state


class Replica:
    """This rank's sharded training copy of a role's model, and the GRPO trainer over it."""

    def __init__(self, model: torch.nn.Module, like, device: str):
        """Shard `model` itself (pass a copy to keep the original) and give it a trainer like `like`."""
        self.model = shard(model, device)
        self.trainer = like.like(self.model)

    def load(self, full_model: torch.nn.Module | None = None, full_trainer=None) -> None:
        """Take rank 0's canonical state (rank 0 passes its model and RoleTrainer, others nothing; collective)."""
        weights = full_model.state_dict() if full_model is not None else None
        optim = optimizer_to_fqn(full_model, full_trainer.optimizer.state_dict()) if full_model is not None else None
        load_full(self.model, self.trainer.optimizer, weights, optim)
        # Every rank steps its own shard: the learning-rate schedule must agree everywhere.
        schedule = [
            {"scheduler": full_trainer.scheduler.state_dict(), "steps": full_trainer.steps}
            if full_trainer is not None
            else None
        ]
        dist.broadcast_object_list(schedule, src=0)
        self.trainer.scheduler.load_state_dict(schedule[0]["scheduler"])
        self.trainer.steps = schedule[0]["steps"]

    def local_fraction(self) -> float:
        """The share of the model's parameters this rank holds (about 1/N when sharded)."""
        params = list(self.model.parameters())
        local = sum((p.to_local() if hasattr(p, "to_local") else p).numel() for p in params)
        return local / max(1, sum(p.numel() for p in params))

    def gather(self) -> tuple[dict, dict]:
        """The trained shards as full weights and optimizer state on rank 0 (collective; empty elsewhere)."""
        return gather_full(self.model, self.trainer.optimizer)

    def commit(self, full_model: torch.nn.Module, full_trainer, gathered: tuple[dict, dict]) -> None:
        """Make rank 0's canonical model and trainer what the group trained (after every rank finished)."""
        weights, optim = gathered
        full_model.load_state_dict(weights)
        full_trainer.optimizer.load_state_dict(optimizer_from_fqn(full_model, optim))
        full_trainer.scheduler.load_state_dict(self.trainer.scheduler.state_dict())
        full_trainer.steps = self.trainer.steps
