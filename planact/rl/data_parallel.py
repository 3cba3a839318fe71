"""Data-parallel training of one role over N processes with torch.distributed (gloo on CPU, NCCL on GPU).

Every rank receives the round's whole sample list and makes the same choices from it (which samples
carry gradient, their shuffle, the minibatch chunks: all seeded by the shared step count); each then
takes its token-balanced share of every chunk. A rank scales its token-mean loss by its share of the
chunk's response tokens, so the summed gradient is exactly the gradient of the whole chunk's token
mean: N ranks take the same optimizer step one process would (up to float summation order).
"""

from __future__ import annotations

import datetime
import hashlib
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch._utils import _flatten_dense_tensors, _unflatten_dense_tensors


def backend_for(device: str) -> str:
    """gloo for CPU tensors, nccl for CUDA ones."""
    return "nccl" if str(device).startswith("cuda") else "gloo"


def token_balanced(chunk: list[dict], world: int) -> list[list[int]]:
    """Indices of the chunk's samples per rank: longest first, each to the least-loaded rank (deterministic)."""
    cost = [len(s["prompt_ids"]) + len(s["token_ids"]) for s in chunk]
    loads, parts = [0] * world, [[] for _ in range(world)]
    for i in sorted(range(len(chunk)), key=lambda i: (-cost[i], i)):
        r = min(range(world), key=lambda k: (loads[k], k))
        parts[r].append(i)
        loads[r] += cost[i]
    return [sorted(p) for p in parts]


def next_tag(tag: str, steps: int) -> str:
    """The state tag after a distributed step that every rank took together (same inputs, same tag)."""
    return hashlib.sha1(f"{tag}:{steps}".encode()).hexdigest()[:16]


def join(addr: str, port: int, rank: int, world: int, backend: str, timeout_s: float) -> None:
    """Enter a fresh process group (leaving any earlier one: a re-formed group after a rank died)."""
    leave()
    dist.init_process_group(
        backend,
        init_method=f"tcp://{addr}:{port}",
        rank=rank,
        world_size=world,
        timeout=datetime.timedelta(seconds=timeout_s),
    )


def leave() -> None:
    """Destroy this process's group, if any (its peers may be dead: errors are expected and ignored)."""
    if dist.is_initialized():
        try:
            dist.destroy_process_group()
        except Exception:  # noqa: BLE001 - a broken group cannot always be torn down cleanly
            pass


@dataclass
class DataParallel:
    """This process's place in the role's trainer group, and the collectives a training step needs."""

    rank: int
    world: int
    sharded: bool = False
    """The model is an FSDP2 replica (planact.rl.fsdp): gradients are reduced by FSDP, not here."""

    def share(self, chunk: list[dict]) -> list[dict]:
        """This rank's token-balanced part of a minibatch chunk (possibly empty)."""
        return [chunk[i] for i in token_balanced(chunk, self.world)[self.rank]]

    def all_reduce_grads(self, model: torch.nn.Module) -> None:
        """Sum every parameter's gradient over the ranks, in one flat buffer (a rank without samples sends zeros)."""
        params = [p for p in model.parameters() if p.requires_grad]
        for p in params:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
        grads = [p.grad for p in params]
        flat = _flatten_dense_tensors(grads)
        dist.all_reduce(flat, op=dist.ReduceOp.SUM)
        for g, reduced in zip(grads, _unflatten_dense_tensors(flat, grads)):
            g.copy_(reduced)

    def all_reduce_sum(self, values: list[float]) -> list[float]:
        """Sum scalars over the ranks (the per-rank, token-weighted step statistics)."""
        t = torch.tensor(values, dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.SUM)
        return t.tolist()
