"""Variable-length attention for packed rows: each sample attends within itself and nothing is computed across.

A packed row (several samples end to end, position ids restarting at 0 for each; see `pack_batch`) under
`eager` or `sdpa` attention gets a dense block-diagonal mask: the attention costs (sum of lengths)^2, most
of it masked out. This attention, registered with transformers as "varlen", finds the samples from the
position ids and attends each on its own: on a GPU in bf16/fp16 with torch's flash-attention varlen kernel,
elsewhere with one causal SDPA per sample. A padded batch (an attention mask is given: generation, the
padded training path) falls back to plain SDPA, so a model loaded with it serves every caller.
"""

from __future__ import annotations

import contextlib
import logging

import torch
import torch.nn.functional as F
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import repeat_kv, sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

NAME = "varlen"
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


def varlen_attention_forward(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    **kwargs,
) -> tuple[torch.Tensor, None]:
    """Causal attention within each packed sample; query/key/value [1, heads, L, dim] -> [1, L, heads, dim]."""
    position_ids = kwargs.get("position_ids")
    packed = (
        attention_mask is None
        and position_ids is not None
        and query.shape[0] == 1
        and query.shape[2] == key.shape[2] == position_ids.shape[-1]
    )
    if not packed:  # a padded batch or a decoding step: plain SDPA with the mask transformers built
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout, scaling, **kwargs)
    groups = getattr(module, "num_key_value_groups", 1)
    key, value = repeat_kv(key, groups), repeat_kv(value, groups)
    lengths, cu = segments(position_ids)
    global _flash_ok
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
            out = varlen_attn(q, k, v, cu, cu, longest, longest, scale=scaling, window_size=(-1, 0))
            return out.unsqueeze(0), None
        except (RuntimeError, NotImplementedError) as e:  # a GPU or head size the kernel does not support
            _flash_ok = False
            log.warning("flash-attention varlen unavailable (%s); attending packed samples one SDPA at a time", e)
    parts = [
        F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scaling, dropout_p=dropout)
        for q, k, v in zip(*(t.split(lengths, dim=2) for t in (query, key, value)))
    ]
    return torch.cat(parts, dim=2).transpose(1, 2).contiguous(), None


def varlen_mask(*args, attention_mask: torch.Tensor | None = None, **kwargs) -> torch.Tensor | None:
    """No mask for a whole packed row (the attention reads the samples off the position ids); SDPA's mask for
    anything else: a padded batch, or queries after a cached prefix (candidate scoring, decoding)."""
    whole_row = kwargs.get("q_length") == kwargs.get("kv_length") and not kwargs.get("kv_offset")
    if attention_mask is None and whole_row:
        return None
    return sdpa_mask(*args, attention_mask=attention_mask, **kwargs)


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


AttentionInterface.register(NAME, varlen_attention_forward)
AttentionMaskInterface.register(NAME, varlen_mask)
