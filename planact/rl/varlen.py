"""The "varlen" attention registered with transformers: packed rows attended one sample at a time.

A packed row (several samples end to end, position ids restarting at 0 for each; see `pack_batch`) under
`eager` or `sdpa` attention gets a dense block-diagonal mask: the attention costs (sum of lengths)^2, most
of it masked out. This attention finds the samples from the position ids and attends each on its own
(planact.attention: flash-attention varlen on a GPU in bf16/fp16, one causal SDPA per sample elsewhere). A
padded batch (an attention mask is given: generation, the padded training path) falls back to plain SDPA,
so a model loaded with it serves every caller. planact's own Llama (planact.llama) calls the same kernel.
"""

from __future__ import annotations

import torch
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import repeat_kv, sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

from planact.attention import packed_attention

NAME = "varlen"


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
    return packed_attention(query, key, value, position_ids, scaling, dropout), None


def varlen_mask(*args, attention_mask: torch.Tensor | None = None, **kwargs) -> torch.Tensor | None:
    """No mask for a whole packed row (the attention reads the samples off the position ids); SDPA's mask for
    anything else: a padded batch, or queries after a cached prefix (candidate scoring, decoding)."""
    whole_row = kwargs.get("q_length") == kwargs.get("kv_length") and not kwargs.get("kv_offset")
    if attention_mask is None and whole_row:
        return None
    return sdpa_mask(*args, attention_mask=attention_mask, **kwargs)


AttentionInterface.register(NAME, varlen_attention_forward)
AttentionMaskInterface.register(NAME, varlen_mask)
