"""GRPO: group-normalised advantages and the clipped policy-gradient loss (DESIGN.md, RL)."""

from __future__ import annotations

import torch


def group_advantages(rewards: torch.Tensor, std_normalize: bool = True, eps: float = 1e-6) -> torch.Tensor:
    """A_i = r_i - mean(group), optionally / (std(group) + eps); rewards has shape [groups, G].

    A singleton group has no baseline to compare against, so its advantage is 0.
    """
    if rewards.shape[-1] == 1:
        return torch.zeros_like(rewards)
    centred = rewards - rewards.mean(-1, keepdim=True)
    if std_normalize:
        centred = centred / (rewards.std(-1, unbiased=True, keepdim=True) + eps)
    return centred


def kl_penalty(logp: torch.Tensor, ref_logp: torch.Tensor, estimator: str = "k3") -> torch.Tensor:
    """Per-token KL(pi || ref) estimate: k1 = log-ratio, k3 = exp(ref-logp) - (ref-logp) - 1."""
    log_ratio = ref_logp - logp
    if estimator == "k1":
        return -log_ratio
    return log_ratio.exp() - log_ratio - 1.0


def grpo_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    eps_clip: float = 0.2,
    eps_clip_high: float | None = None,
    ref_logp: torch.Tensor | None = None,
    kl_coef: float = 0.0,
    kl_estimator: str = "k3",
    entropy: torch.Tensor | None = None,
    entropy_coef: float = 0.0,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Token-level clipped surrogate, averaged over every unmasked token in the batch.

    Shapes: logp/old_logp/mask/ref_logp/entropy [B, T]; advantages [B] (one per sequence).
    """
    eps_high = eps_clip if eps_clip_high is None else eps_clip_high
    adv = advantages.unsqueeze(-1)
    ratio = (logp - old_logp).exp()
    surr1 = ratio * adv
    surr2 = ratio.clamp(1.0 - eps_clip, 1.0 + eps_high) * adv
    pg = -torch.minimum(surr1, surr2)
    n_tok = mask.sum().clamp(min=1.0)

    def tok_mean(x: torch.Tensor) -> torch.Tensor:
        return (x * mask).sum() / n_tok

    pg_loss = tok_mean(pg)
    loss = pg_loss
    stats = {"pg_loss": float(pg_loss.detach()), "clip_frac": float(tok_mean((-surr2 > -surr1).float()))}  # clipping was binding
    if ref_logp is not None:
        kl = tok_mean(kl_penalty(logp, ref_logp, kl_estimator))
        loss = loss + kl_coef * kl
        stats["kl"] = float(kl.detach())
    if entropy is not None:
        ent = tok_mean(entropy)
        loss = loss - entropy_coef * ent
        stats["entropy"] = float(ent.detach())
    stats["loss"] = float(loss.detach())
    return loss, stats
