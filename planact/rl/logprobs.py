"""Token logprobs of given responses under a model: one function for trainer, tests and SFT."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from planact.attention import no_cudnn_attention


def pad_batch(
    prompts: list[list[int]], responses: list[list[int]], pad_id: int, device: torch.device | str = "cpu"
) -> dict[str, torch.Tensor]:
    """Right-pad prompt+response rows on `device`; mark response tokens in `resp_mask`.

    Position ids are explicit (0..n-1 per row) so that they match the engine's
    left-padded sampling pass exactly (same padding, mask and position ids in both passes).
    """
    lengths = [len(p) + len(r) for p, r in zip(prompts, responses)]
    T = max(lengths)
    B = len(prompts)
    input_ids = torch.full((B, T), pad_id, dtype=torch.long)
    attn = torch.zeros((B, T), dtype=torch.long)
    resp_mask = torch.zeros((B, T), dtype=torch.float32)
    for i, (p, r) in enumerate(zip(prompts, responses)):
        seq = p + r
        input_ids[i, : len(seq)] = torch.tensor(seq, dtype=torch.long)
        attn[i, : len(seq)] = 1
        resp_mask[i, len(p) : len(seq)] = 1.0
    positions = (attn.cumsum(-1) - 1).clamp(min=0)
    batch = {"input_ids": input_ids, "attention_mask": attn, "position_ids": positions, "resp_mask": resp_mask}
    # Built on the CPU, moved once: the losses combine resp_mask with logprobs on the model's device.
    return {k: v.to(device) for k, v in batch.items()}


def pack_batch(
    prompts: list[list[int]], responses: list[list[int]], device: torch.device | str = "cpu"
) -> dict[str, torch.Tensor]:
    """Every prompt+response end to end in one row of shape [1, sum of lengths]: no padding token at all.

    Position ids restart at 0 for each sample and there is no attention mask (transformers' packed-sequence
    format): the `varlen` attention attends each sample on its own; eager and sdpa get a dense
    block-diagonal causal mask instead. Either way no sample attends to another.
    """
    seqs = [p + r for p, r in zip(prompts, responses)]
    input_ids = torch.tensor([t for s in seqs for t in s], dtype=torch.long).unsqueeze(0)
    positions = torch.cat([torch.arange(len(s)) for s in seqs]).unsqueeze(0)
    resp_mask = torch.cat([torch.tensor([0.0] * len(p) + [1.0] * len(r)) for p, r in zip(prompts, responses)])
    batch = {"input_ids": input_ids, "position_ids": positions, "resp_mask": resp_mask.unsqueeze(0)}
    return {k: v.to(device) for k, v in batch.items()}


def make_batch(
    prompts: list[list[int]],
    responses: list[list[int]],
    pad_id: int,
    device: torch.device | str = "cpu",
    packed: bool = False,
) -> tuple[dict[str, torch.Tensor], list[tuple[int, int]]]:
    """A padded or packed batch and, per sample, the (row, column) of its first response token."""
    if not packed:
        return pad_batch(prompts, responses, pad_id, device), [(i, len(p)) for i, p in enumerate(prompts)]
    starts, offset = [], 0
    for p, r in zip(prompts, responses):
        starts.append((0, offset + len(p)))
        offset += len(p) + len(r)
    return pack_batch(prompts, responses, device), starts


def token_logprobs(
    model: torch.nn.Module, batch: dict[str, torch.Tensor], temperature: float = 1.0, with_entropy: bool = False
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Logprob of every next token (aligned to the token it predicts) and optionally the entropy.

    Returned tensors have shape [B, T] where column t scores input_ids[:, t];
    column 0 is zero (nothing predicts the first token). A packed batch (no attention mask) is
    scored on its response tokens only; its other columns are zero.
    """
    device = next(model.parameters()).device
    B, T = batch["input_ids"].shape
    packed = "attention_mask" not in batch
    if packed:
        # Columns whose token is a response token predicted within its own sample (position > 0); the LM
        # head runs on the positions before them alone, not on the prompts packed between responses.
        want = batch["resp_mask"][0].bool() & (batch["position_ids"][0] > 0)
        cols = want.nonzero().squeeze(-1).to(device)
        keep: int | torch.Tensor = cols - 1
    else:
        # Only columns from the earliest response token on are ever used: the LM head (a pretrained model's
        # 49k-word vocabulary costs more than its blocks) runs on those positions alone, not on the prompt's.
        start = _first_response_column(batch.get("resp_mask"))
        cols = torch.arange(start, T, device=device)
        keep = T - start + 1
    with no_cudnn_attention(device):  # batch shapes change every call: no per-shape cuDNN plans
        out = model(
            input_ids=batch["input_ids"].to(device),
            attention_mask=batch["attention_mask"].to(device) if not packed else None,
            position_ids=batch["position_ids"].to(device),
            use_cache=False,
            logits_to_keep=keep,
        )
    logits = (out.logits if packed else out.logits[:, :-1, :]).float()
    if temperature > 0:
        logits = logits / temperature
    logp_all = F.log_softmax(logits, dim=-1)
    target = batch["input_ids"].to(device)[:, cols]
    lp = logp_all.gather(-1, target.unsqueeze(-1)).squeeze(-1)
    # Out of place, so autograd flows from the [B, T] result back to the kept columns.
    lp = lp.new_zeros(B, T).index_copy(1, cols, lp)
    ent = None
    if with_entropy:
        ent = -(logp_all.exp() * logp_all).sum(-1)
        ent = ent.new_zeros(B, T).index_copy(1, cols, ent)
    return lp, ent


def _first_response_column(resp_mask: torch.Tensor | None) -> int:
    """The first column any row's response occupies (1 without a mask: every next-token logprob)."""
    if resp_mask is None or not bool(resp_mask.any()):
        return 1
    return max(1, int(resp_mask.any(0).float().argmax()))
