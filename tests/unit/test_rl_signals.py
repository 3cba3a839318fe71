"""RL signals against numbers derived by hand from the peers' definitions (verl's GRPO loss and KL,
verl-agent's GiGPO), and the reward/KL faults found in review, each with a case that failed before."""

from __future__ import annotations

import math

import pytest
import torch

from planact.config import RLConfig
from planact.models import load_model
from planact.rl.advantages import group_advantages
from planact.rl.gigpo import gigpo_advantages, tree_returns
from planact.rl.grpo import grpo_loss, kl_penalty
from planact.rl.trainer import RoleTrainer


def test_equal_non_dyadic_rewards_give_exactly_zero_advantage():
    # In float32 the std of (0.1, 0.1, 0.1) is ~3e-8 < eps, which used to leave advantages of ~0.03; in float64
    # the mean's last-bit residue over eps is still ~1e-11.
    for r in ([0.1, 0.1, 0.1], [0.7, 0.7, 0.7]):
        assert group_advantages(r) == [0.0, 0.0, 0.0]


def test_dual_clip_bounds_the_loss_of_negative_advantages():
    # ratio 5, A = -1: PPO's max(5, 1.2) = 5; verl's dual clip caps it at clip_ratio_c * |A| = 3.
    logp, old = torch.log(torch.tensor([[0.5]])), torch.log(torch.tensor([[0.1]]))
    loss, _ = grpo_loss(logp, old, torch.tensor([-1.0]), torch.ones(1, 1), eps_clip=0.2, clip_ratio_c=3.0)
    assert float(loss) == pytest.approx(3.0)
    loss, _ = grpo_loss(logp, old, torch.tensor([1.0]), torch.ones(1, 1), eps_clip=0.2)
    assert float(loss) == pytest.approx(-1.2)  # positive advantages: ordinary clip only


def test_k3_is_clamped_like_verl():
    logp = torch.tensor([[-30.0, 0.0, -1.0]])
    ref = torch.tensor([[-2.0, -28.0, -1.5]])
    k3 = kl_penalty(logp, ref, "k3")[0].tolist()
    # d = ref - logp = 28 -> clamp 20 -> e^20 - 21 -> clamp 10 (unclamped ~1.4e12)
    assert k3[0] == pytest.approx(10.0)
    # d = -28 -> clamp -20 -> e^-20 + 19 -> clamp 10
    assert k3[1] == pytest.approx(10.0)
    assert k3[2] == pytest.approx(math.exp(-0.5) + 0.5 - 1.0, rel=1e-6)


def test_gigpo_matches_verl_agent_on_a_shared_batch():
    # Group g: episode a (2 steps, return 1.0), episode b (1 step, return 0.0); gamma 0 so returns = rewards.
    steps = [
        {"episode": "a", "group": "g", "t": 1, "reward": 0.5, "anchor": "s0"},
        {"episode": "a", "group": "g", "t": 2, "reward": 1.0, "anchor": "s1"},
        {"episode": "b", "group": "g", "t": 1, "reward": 0.0, "anchor": "s0"},
    ]
    adv = gigpo_advantages(steps, {"a": 1.0, "b": 0.0}, gamma=0.0, step_weight=1.0)
    # Episode level across steps: scores [1, 1, 0], mean 2/3, std sqrt(1/3).
    s = math.sqrt(1 / 3)
    a_ep = [(1 / 3) / s, (1 / 3) / s, (-2 / 3) / s]
    # Step level: s0 holds returns [0.5, 0.0] -> +-0.25 / 0.35355; s1 is a singleton -> 0.
    a_step = [0.25 / math.sqrt(0.125), 0.0, -0.25 / math.sqrt(0.125)]
    assert adv == pytest.approx([e + w for e, w in zip(a_ep, a_step)], rel=1e-5)
    # A multi-step episode alone in its group: episode advantage 0 (it used to pass its return through).
    alone = gigpo_advantages(steps[:2], {"a": 1.0}, gamma=0.0)
    assert alone == pytest.approx([0.0, 0.0])


def test_gigpo_on_a_search_tree_ranks_siblings_and_is_not_all_positive():
    # Round 1 is the root. 2 and 3 expand 1; 4 and 5 expand 2. Rewards = child score - parent score.
    steps = [
        {"episode": "run", "group": "bench", "t": 2, "parent": 1, "reward": 0.2, "anchor": "root"},
        {"episode": "run", "group": "bench", "t": 3, "parent": 1, "reward": -0.1, "anchor": "root"},
        {"episode": "run", "group": "bench", "t": 4, "parent": 2, "reward": 0.1, "anchor": "node2"},
        {"episode": "run", "group": "bench", "t": 5, "parent": 2, "reward": -0.1, "anchor": "node2"},
    ]
    rets = tree_returns(steps, gamma=0.5)
    # R(4)=0.1, R(5)=-0.1, R(2)=0.2+0.5*mean(0.1,-0.1)=0.2, R(3)=-0.1: no reward from an unrelated branch.
    assert rets == pytest.approx([0.2, -0.1, 0.1, -0.1])
    for st, r in zip(steps, rets):
        st["return"] = r
    adv = gigpo_advantages(steps, {"run": 0.3}, gamma=0.5)  # the run improved: +0.3, alone in its group
    assert adv[0] > adv[1] and adv[2] > adv[3]  # the better sibling edit gets the higher advantage
    assert min(adv) < 0  # one run's non-negative return no longer reinforces every edit
    assert adv == pytest.approx([1 / math.sqrt(2), -1 / math.sqrt(2)] * 2, rel=1e-4)


def test_kl_works_with_the_warm_start_off(tiny_model_dir):
    model, tok = load_model(tiny_model_dir)
    t = RoleTrainer(model, tok.pad_token_id, RLConfig(kl_coef=0.5, lr=5e-2, warmup_steps=0, num_minibatches=1), 1.0)
    sample = {"prompt_ids": [1, 5], "token_ids": [6, 2], "logprobs": [-4.0, -4.0], "advantage": 1.0}
    first = t.train_step([sample])
    assert t.ref_model is not None  # no warm start snapshotted one: RL's starting weights are the reference
    assert first["kl"] == pytest.approx(0.0, abs=1e-6)
    second = t.train_step([sample])
    assert second["kl"] > 1e-6  # used to be logged as 0.0 with no KL applied


def test_logprobs_must_cover_every_token(tiny_model_dir):
    model, tok = load_model(tiny_model_dir)
    t = RoleTrainer(model, tok.pad_token_id, RLConfig(), 1.0)
    with pytest.raises(ValueError, match="1 logprobs for 2 tokens"):
        t.train_step([{"prompt_ids": [1, 5], "token_ids": [6, 2], "logprobs": [-1.0], "advantage": 1.0}])
