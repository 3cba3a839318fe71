"""Llama in plain PyTorch: the tiny models planact builds load and train without importing transformers.

A process that imports transformers' model stack spends ~5 CPU-s on it (transformers 5.24 also imports
torch.distributed.tensor, torch._dynamo, sympy, scipy and accelerate on the way), more than the tiny model
ever computes in a short run; every role agent and trainer rank of a tiny-model run paid it. This module
reads and writes the same files as transformers' `LlamaForCausalLM` (config.json, model.safetensors with the
same parameter names), so a checkpoint moves freely between the two; tests pin its outputs to transformers'
on the same checkpoint. Names follow the Llama paper and transformers' module tree (RMSNorm, rotary
embedding, grouped-query attention, SwiGLU MLP); the forward takes the arguments planact's engine and
trainer pass (an attention mask for left padding, explicit position ids, a KV cache, logits_to_keep).

Only checkpoints planact built (config.json carries `planact_native: true`) load here by default; any other
checkpoint goes through transformers (planact.models.load_model).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from planact.attention import packed_attention, segments

MARKER = "planact_native"  # config.json key: this checkpoint is one of planact's tiny models
KERNELS = ("eager", "sdpa", "varlen")


class LlamaConfig:
    """config.json as attributes; `_attn_implementation` picks the kernel at each forward (as transformers')."""

    def __init__(self, raw: dict, attention: str = "eager"):
        self.raw = dict(raw)
        self.__dict__.update(raw)
        self.num_key_value_heads = raw.get("num_key_value_heads") or raw["num_attention_heads"]
        self.head_dim = raw.get("head_dim") or raw["hidden_size"] // raw["num_attention_heads"]
        self.rms_norm_eps = raw.get("rms_norm_eps", 1e-6)
        self.pad_token_id = raw.get("pad_token_id")
        rope = raw.get("rope_parameters") or {}
        self.rope_theta = float(rope.get("rope_theta", raw.get("rope_theta", 10000.0)))
        self._attn_implementation = attention

    def to_dict(self) -> dict:
        """What config.json holds."""
        return dict(self.raw)


def supports(raw: dict) -> bool:
    """Whether this module computes exactly what transformers would for a checkpoint with this config.json."""
    rope = raw.get("rope_parameters") or {}
    return (
        bool(raw.get(MARKER))
        and raw.get("model_type") == "llama"
        and raw.get("hidden_act", "silu") == "silu"
        and rope.get("rope_type", "default") == "default"
        and not raw.get("rope_scaling")
        and not raw.get("attention_bias")
        and not raw.get("mlp_bias")
        and raw.get("tie_word_embeddings", False)
    )


class KVCache:
    """Keys and values of every layer so far, [B, kv_heads, T, head_dim] each; forwards append to it."""

    def __init__(self):
        self.keys: list[torch.Tensor] = []
        self.values: list[torch.Tensor] = []

    def update(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Append this forward's keys and values of `layer`; returns all of them."""
        if layer == len(self.keys):
            self.keys.append(k)
            self.values.append(v)
        else:
            self.keys[layer] = torch.cat([self.keys[layer], k], dim=2)
            self.values[layer] = torch.cat([self.values[layer], v], dim=2)
        return self.keys[layer], self.values[layer]

    def get_seq_length(self) -> int:
        """Positions cached."""
        return self.keys[0].shape[2] if self.keys else 0

    def batch_repeat_interleave(self, n: int) -> None:
        """Each row n times in place (one cached prompt shared by n continuations)."""
        self.keys = [k.repeat_interleave(n, dim=0) for k in self.keys]
        self.values = [v.repeat_interleave(n, dim=0) for v in self.values]


@dataclass
class CausalLMOutput:
    """Next-token logits and the cache the forward appended to (None without use_cache)."""

    logits: torch.Tensor
    cache: KVCache | None = None

    @property
    def past_key_values(self) -> KVCache | None:
        """The cache under transformers' older name."""
        return self.cache


class RMSNorm(nn.Module):
    """Root-mean-square layer norm, computed in float32."""

    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x.to(torch.float32)
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * h.to(x.dtype)


class RotaryEmbedding(nn.Module):
    """cos/sin of each position's rotation (RoPE, Su et al. 2021), for [B, L] position ids."""

    def __init__(self, cfg: LlamaConfig):
        super().__init__()
        dim = cfg.head_dim
        inv_freq = 1.0 / (cfg.rope_theta ** (torch.arange(0, dim, 2, dtype=torch.float) / dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)  # not in checkpoints, as transformers'

    def forward(self, x: torch.Tensor, position_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        freqs = position_ids[..., None].float() * self.inv_freq.to(device=x.device, dtype=torch.float)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """(x1, x2) -> (-x2, x1) over the last dimension's halves."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class Attention(nn.Module):
    """Grouped-query causal self-attention with rotary positions."""

    def __init__(self, cfg: LlamaConfig, layer: int):
        super().__init__()
        self.cfg, self.layer = cfg, layer
        self.head_dim = cfg.head_dim
        self.groups = cfg.num_attention_heads // cfg.num_key_value_heads
        self.scaling = self.head_dim**-0.5
        self.q_proj = nn.Linear(cfg.hidden_size, cfg.num_attention_heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(cfg.hidden_size, cfg.num_key_value_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(cfg.hidden_size, cfg.num_key_value_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(cfg.num_attention_heads * self.head_dim, cfg.hidden_size, bias=False)

    def forward(self, x: torch.Tensor, rope, mask, position_ids: torch.Tensor, cache: KVCache | None) -> torch.Tensor:
        B, L, _ = x.shape
        q, k, v = (p(x).view(B, L, -1, self.head_dim).transpose(1, 2) for p in (self.q_proj, self.k_proj, self.v_proj))
        cos, sin = (t.unsqueeze(1) for t in rope)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        if cache is not None:
            k, v = cache.update(self.layer, k, v)
        if self.groups > 1:
            k, v = k.repeat_interleave(self.groups, dim=1), v.repeat_interleave(self.groups, dim=1)
        kernel = self.cfg._attn_implementation
        if mask is None and kernel == "varlen" and B == 1 and L == k.shape[2]:  # a whole (packed) row
            out = packed_attention(q, k, v, position_ids, self.scaling)
        elif kernel == "eager":  # the reference path: explicit scores, softmax in float32
            w = torch.matmul(q, k.transpose(2, 3)) * self.scaling
            if mask is not None:
                w = w.masked_fill(~mask, torch.finfo(w.dtype).min)
            else:
                future = torch.ones(L, k.shape[2], dtype=torch.bool, device=x.device).triu(k.shape[2] - L + 1)
                w = w.masked_fill(future, -torch.inf)
            out = torch.matmul(F.softmax(w, dim=-1, dtype=torch.float32).to(q.dtype), v).transpose(1, 2)
        else:
            causal = mask is None and L > 1
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal, scale=self.scaling)
            out = out.transpose(1, 2)
        return self.o_proj(out.reshape(B, L, -1))


class MLP(nn.Module):
    """SwiGLU feed-forward (Shazeer 2020)."""

    def __init__(self, cfg: LlamaConfig):
        super().__init__()
        self.gate_proj = nn.Linear(cfg.hidden_size, cfg.intermediate_size, bias=False)
        self.up_proj = nn.Linear(cfg.hidden_size, cfg.intermediate_size, bias=False)
        self.down_proj = nn.Linear(cfg.intermediate_size, cfg.hidden_size, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Block(nn.Module):
    """Pre-norm decoder layer: x + attn(norm(x)), then x + mlp(norm(x))."""

    def __init__(self, cfg: LlamaConfig, layer: int):
        super().__init__()
        self.self_attn = Attention(cfg, layer)
        self.mlp = MLP(cfg)
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)

    def forward(self, x, rope, mask, position_ids, cache):
        x = x + self.self_attn(self.input_layernorm(x), rope, mask, position_ids, cache)
        return x + self.mlp(self.post_attention_layernorm(x))


class Decoder(nn.Module):
    """Embedding, the blocks and the final norm (transformers' `LlamaModel`, same parameter names)."""

    def __init__(self, cfg: LlamaConfig):
        super().__init__()
        # padding_idx, as transformers' LlamaModel: the pad id is in the vocabulary, so a policy can sample it as
        # a real token, and that lookup must give the pad row no gradient (the tied output head still trains it).
        # Without it the demo's planner parted from transformers' at the first round that sampled a pad.
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size, padding_idx=cfg.pad_token_id)
        self.layers = nn.ModuleList(Block(cfg, i) for i in range(cfg.num_hidden_layers))
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.rotary_emb = RotaryEmbedding(cfg)


def build_mask(
    attn: torch.Tensor | None, position_ids: torch.Tensor, L: int, past: int, device: torch.device, packed: bool
) -> torch.Tensor | None:
    """Which keys each query may attend, [B, 1, L, past+L] bool; None for a plain causal row.

    With a padding mask: causal and not padding. Without one and with `packed` (no cache: training), a row
    whose position ids restart (several samples packed end to end) attends within each sample, as
    transformers does. A query with
    no key to attend (a left-padding position) attends every key instead: its output is never read, and
    this keeps it finite (an all-masked softmax is NaN)."""
    if attn is None:
        if past and L > 1:  # queries after a cached prefix: causal with an offset, as a mask
            attn = torch.ones(position_ids.shape[0], past + L, dtype=torch.long, device=device)
        elif past or not packed or position_ids.shape[0] != 1 or len(segments(position_ids)[0]) == 1:
            return None
        else:
            lengths, _ = segments(position_ids)
            sample = torch.arange(len(lengths), device=device).repeat_interleave(torch.tensor(lengths, device=device))
            allowed = (sample[:, None] == sample[None, :]) & torch.ones(L, L, dtype=torch.bool, device=device).tril()
            return allowed[None, None]
    q = torch.arange(past, past + L, device=device)
    k = torch.arange(attn.shape[1], device=device)
    allowed = (k[None, :] <= q[:, None])[None] & attn.bool()[:, None, :]
    allowed = allowed | ~allowed.any(-1, keepdim=True)
    return allowed[:, None]


class LlamaForCausalLM(nn.Module):
    """A decoder-only Llama language model with tied input and output embeddings."""

    def __init__(self, cfg: LlamaConfig):
        super().__init__()
        self.config = cfg
        self.model = Decoder(cfg)
        self.lm_head = nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False)
        self.lm_head.weight = self.model.embed_tokens.weight  # tied, as in every checkpoint this module reads

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        cache: KVCache | None = None,
        use_cache: bool = False,
        logits_to_keep: int | torch.Tensor = 0,
    ) -> CausalLMOutput:
        """Logits for `input_ids` [B, L] after what `cache` holds (appended to, or a new one with use_cache)."""
        B, L = input_ids.shape
        device = input_ids.device
        if use_cache and cache is None:
            cache = KVCache()
        past = cache.get_seq_length() if cache is not None else 0
        if position_ids is None:
            position_ids = (torch.arange(L, device=device) + past).unsqueeze(0).expand(B, -1)
        if attention_mask is None and not past and B == 1 and self.config._attn_implementation == "varlen":
            mask = None  # the kernel reads the packed samples off the position ids
        else:
            mask = build_mask(attention_mask, position_ids, L, past, device, packed=cache is None)
        x = self.model.embed_tokens(input_ids)
        rope = self.model.rotary_emb(x, position_ids)
        for block in self.model.layers:
            x = block(x, rope, mask, position_ids, cache)
        x = self.model.norm(x)
        if isinstance(logits_to_keep, int):
            x = x[:, -logits_to_keep:, :] if logits_to_keep else x
        else:
            x = x[:, logits_to_keep, :]
        return CausalLMOutput(self.lm_head(x), cache if use_cache else None)

    def save_pretrained(self, out: str | Path) -> None:
        """config.json and model.safetensors, as transformers writes them (the tied output weight left out)."""
        from safetensors.torch import save_file

        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "config.json").write_text(json.dumps(self.config.to_dict(), indent=2, sort_keys=True) + "\n")
        state = {k: v.detach().contiguous() for k, v in self.state_dict().items() if k != "lm_head.weight"}
        save_file(state, str(out / "model.safetensors"), metadata={"format": "pt"})

    @classmethod
    def from_pretrained(cls, path: str | Path, attention: str = "eager") -> LlamaForCausalLM:
        """Load a checkpoint folder (config.json + model.safetensors) in float32."""
        from safetensors.torch import load_file

        if attention not in KERNELS:
            raise ValueError(f"attention {attention!r}: one of {', '.join(KERNELS)}")
        raw = json.loads((Path(path) / "config.json").read_text())
        model = cls(LlamaConfig(raw, attention))
        state = load_file(str(Path(path) / "model.safetensors"))
        state.setdefault("lm_head.weight", state["model.embed_tokens.weight"])
        model.load_state_dict({k: v.float() for k, v in state.items()})
        return model


def as_transformers(model: torch.nn.Module) -> torch.nn.Module:
    """This module's Llama as transformers' LlamaForCausalLM with the same weights, kernel and device (what
    peft's adapters and MLflow's transformers flavour wrap); any other model is returned as it is."""
    if not isinstance(model, LlamaForCausalLM):
        return model
    import transformers

    kernel = model.config._attn_implementation
    if kernel == "varlen":
        import planact.rl.varlen  # noqa: F401  (registers the attention with transformers)
    cfg = transformers.LlamaConfig.from_dict(model.config.to_dict())
    cfg._attn_implementation = kernel
    out = transformers.LlamaForCausalLM(cfg)
    out.load_state_dict(model.state_dict())
    return out.to(next(model.parameters()).device).train(model.training)
