"""GRPO advantages and loss against hand-computed values."""

import math

import pytest
import torch

from planact.rl.advantages import group_advantages
from planact.rl.grpo import grpo_loss, kl_penalty


def test_group_advantages_by_hand():
    r = [1.0, 0.0, 0.0, 1.0]
    # mean 0.5, unbiased std = sqrt(1/3)
    std = math.sqrt(1 / 3)
    assert group_advantages(r) == pytest.approx([x / (std + 1e-6) for x in (0.5, -0.5, -0.5, 0.5)], abs=1e-9)
    assert group_advantages(r, std_normalize=False) == [0.5, -0.5, -0.5, 0.5]
    assert group_advantages([1.0, 1.0]) == [0.0, 0.0]  # no signal
    assert group_advantages([1.0]) == [0.0]  # singleton


def test_clipped_loss_by_hand():
    # Two sequences, two tokens each; the second token of row 1 is masked out.
    logp = torch.log(torch.tensor([[0.5, 0.5], [0.3, 0.9]]))
    old = torch.log(torch.tensor([[0.25, 0.5], [0.3, 0.3]]))
    mask = torch.tensor([[1.0, 1.0], [1.0, 0.0]])
    adv = torch.tensor([1.0, -1.0])
    loss, stats = grpo_loss(logp, old, adv, mask, eps_clip=0.2)
    # ratios: row0 [2.0, 1.0], row1 [1.0, (masked)]
    # row0 tok0: A=+1, min(2.0, 1.2) = 1.2 -> -1.2 (clipped); tok1: -1.0; row1 tok0: A=-1 -> +1.0
    assert math.isclose(float(loss), (-1.2 - 1.0 + 1.0) / 3, rel_tol=1e-6)
    assert math.isclose(stats["clip_frac"], 1 / 3, rel_tol=1e-6)


def test_clip_higher_and_negative_advantage_branch():
    logp = torch.log(torch.tensor([[0.5]]))
    old = torch.log(torch.tensor([[0.25]]))
    mask = torch.ones(1, 1)
    loss, _ = grpo_loss(logp, old, torch.tensor([1.0]), mask, eps_clip=0.2, eps_clip_high=0.5)
    assert math.isclose(float(loss), -1.5, rel_tol=1e-6)
    # negative advantage and ratio 2: min(-2, -1.2) = -2 -> loss 2 (no clipping on that side)
    loss, stats = grpo_loss(logp, old, torch.tensor([-1.0]), mask, eps_clip=0.2)
    assert math.isclose(float(loss), 2.0, rel_tol=1e-6) and stats["clip_frac"] == 0.0


def test_kl_and_entropy_terms():
    logp = torch.log(torch.tensor([[0.5]]))
    ref = torch.log(torch.tensor([[0.25]]))
    k3 = float(kl_penalty(logp, ref, "k3"))
    assert math.isclose(k3, 0.5 - math.log(0.5) - 1, rel_tol=1e-6)
    assert math.isclose(float(kl_penalty(logp, ref, "k1")), math.log(2), rel_tol=1e-6)
    ent = torch.tensor([[0.7]])
    loss, stats = grpo_loss(
        logp, logp, torch.tensor([0.0]), torch.ones(1, 1), ref_logp=ref, kl_coef=0.1, entropy=ent, entropy_coef=0.01
    )
    assert math.isclose(float(loss), 0.1 * k3 - 0.01 * 0.7, rel_tol=1e-5)
    assert math.isclose(stats["entropy"], 0.7, rel_tol=1e-6)


def test_decoupled_loss_weights_each_token_by_prox_over_behaviour():
    # Pipelined rounds: old_logp is the proximal policy (clip around it); behav_weight re-weights tokens.
    logp = torch.log(torch.tensor([[0.5, 0.5]]))
    prox = torch.log(torch.tensor([[0.25, 0.5]]))
    mask = torch.ones(1, 2)
    w = torch.tensor([[2.0, 0.5]])
    loss, _ = grpo_loss(logp, prox, torch.tensor([1.0]), mask, eps_clip=0.2, behav_weight=w)
    # ratios vs prox [2.0 -> clipped 1.2, 1.0]; weighted: 2.0 * -1.2 and 0.5 * -1.0
    assert math.isclose(float(loss), (2.0 * -1.2 + 0.5 * -1.0) / 2, rel_tol=1e-6)
    plain, _ = grpo_loss(logp, prox, torch.tensor([1.0]), mask, eps_clip=0.2, behav_weight=torch.ones(1, 2))
    assert math.isclose(float(plain), float(grpo_loss(logp, prox, torch.tensor([1.0]), mask, eps_clip=0.2)[0]))
