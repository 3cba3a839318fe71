"""Attention over packed rows, without transformers: shared by planact's own Llama and the "varlen" kernel
planact registers with transformers (planact.rl.varlen).

A packed row holds several samples end to end, position ids restarting at 0 for each (see `pack_batch`).
Each sample attends within itself and nothing is computed across: on a GPU in bf16/fp16 with torch's
flash-attention varlen kernel, elsewhere with one causal SDPA per sample.
"""

from __future__ import annotations

import contextlib
import logging

import torch
import torch.nn.functional as F

log = logging.getLogger(__name__)
_flash_ok = True  # False once the kernel refuses this GPU; the per-sample path then serves

# The segments of the row being attended: every layer of a forward sees the same position-ids tensor.
_last: tuple[torch.Tensor, list[int], torch.Tensor] | None = None


def segments(position_ids: torch.Tensor) -> tuple[list[int], torch.Tensor]:
    """Sample lengths of a packed [1, L] row (a new sample wherever the position does not step by 1), and
    their cumulative offsets [0, l0, l0+l1, ..., L] as int32 on the row's device (the varlen kernel's cu_seqlens)."""
    global _last
    last = _last  # read once: a colocated engine may attend in another thread meanwhile
    if last is not None and last[0] is position_ids:
        return last[1], last[2]
    pos = position_ids[0]
    starts = torch.nonzero(torch.diff(pos, prepend=pos[:1] - 2) != 1).squeeze(-1).tolist()
    bounds = [*starts, pos.numel()]
    lengths = [b - a for a, b in zip(bounds, bounds[1:])]
    cu = torch.tensor(bounds, dtype=torch.int32, device=position_ids.device)
    _last = (position_ids, lengths, cu)
    return lengths, cu


def packed_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    position_ids: torch.Tensor,
    scaling: float | None = None,
    dropout: float = 0.0,
) -> torch.Tensor:
    """Causal attention within each sample of a packed row; query/key/value [1, heads, L, dim] (as many key
    heads as query heads) -> [1, L, heads, dim]."""
    global _flash_ok
    lengths, cu = segments(position_ids)
    half = query.dtype in (torch.bfloat16, torch.float16)
    # Under bf16 autocast the rotary embedding's fp32 cos/sin promote query and key back to fp32, so the
    # dtype test alone sent every autocast step down the per-sample path (measured on an H200: 1,536 SDPA
    # calls a step, 0.2x of padding). Autocast's dtype is what SDPA itself would run in.
    if query.is_cuda and not half and torch.is_autocast_enabled("cuda"):
        half = True
    if _flash_ok and query.is_cuda and half:
        from torch.nn.attention.varlen import varlen_attn

        dtype = query.dtype if query.dtype != torch.float32 else torch.get_autocast_dtype("cuda")
        q, k, v = (t[0].transpose(0, 1).to(dtype).contiguous() for t in (query, key, value))  # [L, heads, dim]
        longest = max(lengths)
        try:
            return varlen_attn(q, k, v, cu, cu, longest, longest, scale=scaling, window_size=(-1, 0)).unsqueeze(0)
        except (RuntimeError, NotImplementedError) as e:  # a GPU or head size the kernel does not support
            _flash_ok = False
            log.warning("flash-attention varlen unavailable (%s); attending packed samples one SDPA at a time", e)
    parts = [
        F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scaling, dropout_p=dropout)
        for q, k, v in zip(*(t.split(lengths, dim=2) for t in (query, key, value)))
    ]
    return torch.cat(parts, dim=2).transpose(1, 2).contiguous()


@contextlib.contextmanager
def no_cudnn_attention(device: torch.device):
    """On CUDA, SDPA without its cuDNN backend (flash, memory-efficient or math instead); elsewhere nothing.

    cuDNN builds an execution plan for every new shape, ~12 ms of CPU a call; a trainer's batches change
    shape every micro-batch and round, so on an H200 that planning, not the GPU, bounded the step
    (profiled, micro-batches of 1,536 tokens: 1.9 s of cuDNN planning in 2.4 s of CPU, 0.12 s of GPU work)."""
    if device.type != "cuda":
        yield
        return
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]):
        yield
