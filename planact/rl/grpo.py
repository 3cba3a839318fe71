"""GRPO: the clipped policy-gradient loss, as verl computes it (the group advantages are in advantages.py).

Matches verl's `core_algos`: advantages (r - mean) / (std + eps) per group; PPO clip with dual-clip on negative
advantages (the loss of a token is at most clip_ratio_c * |A|); the k3 KL estimator with the
log-ratio clamped to +-20 and the estimate to [-10, 10]. Deliberate difference: a singleton group
gets advantage 0 here (verl passes its raw reward through): with no group there is no baseline.
"""

from __future__ import annotations

import torch


def kl_penalty(logp: torch.Tensor, ref_logp: torch.Tensor, estimator: str = "k3") -> torch.Tensor:
    """Per-token KL(pi || ref) estimate: k1 = log-ratio; k3 = exp(d) - d - 1 with d = ref - logp clamped
    to +-20 and the estimate to [-10, 10] (verl's low_var_kl: at d = 28, unclamped k3 is ~1.4e12)."""
    if estimator == "k1":
        return logp - ref_logp
    d = (ref_logp - logp).clamp(-20.0, 20.0)
    return (d.exp() - d - 1.0).clamp(-10.0, 10.0)


def grpo_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    eps_clip: float = 0.2,
    eps_clip_high: float | None = None,
    clip_ratio_c: float = 3.0,
    ref_logp: torch.Tensor | None = None,
    kl_coef: float = 0.0,
    kl_estimator: str = "k3",
    entropy: torch.Tensor | None = None,
    entropy_coef: float = 0.0,
    behav_weight: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Token-level clipped surrogate, averaged over every unmasked token in the batch.

    Shapes: logp/old_logp/mask/ref_logp/entropy/behav_weight [B, T]; advantages [B] (one per sequence) or
    [B, T] (one per token: a packed row holds several sequences).
    With `behav_weight` (decoupled PPO, for samples drawn by an older policy): `old_logp` is the proximal
    policy (the trainer's weights before this update), the clip is taken around it, and each token's
    term is multiplied by pi_prox / pi_behav (capped by the caller), which corrects for the stale sampler.
    """
    eps_high = eps_clip if eps_clip_high is None else eps_clip_high
    adv = advantages.unsqueeze(-1) if advantages.dim() == 1 else advantages
    ratio = (logp - old_logp).exp()
    surr1 = ratio * adv
    surr2 = ratio.clamp(1.0 - eps_clip, 1.0 + eps_high) * adv
    pg = -torch.minimum(surr1, surr2)
    # Dual-clip (verl clip_ratio_c): with A < 0 a huge ratio would make one token's loss unbounded.
    pg = torch.where(adv < 0, torch.minimum(pg, -adv * clip_ratio_c), pg)
    if behav_weight is not None:
        pg = pg * behav_weight
    n_tok = mask.sum().clamp(min=1.0)

    def tok_mean(x: torch.Tensor) -> torch.Tensor:
        return (x * mask).sum() / n_tok

    pg_loss = tok_mean(pg)
    loss = pg_loss
    stats = {
        "pg_loss": float(pg_loss.detach()),
        "clip_frac": float(tok_mean((-surr2 > -surr1).float())),
    }  # clipping was binding
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
