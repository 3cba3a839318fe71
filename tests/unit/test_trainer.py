"""Trainer: real gradients move the model the right way; warm start lowers loss; state round-trips."""

import copy

import pytest
import torch

from planact.config import RLConfig, WarmStartConfig
from planact.engines.base import SamplingParams
from planact.engines.hf import HFEngine
from planact.models import load_model
from planact.rl.logprobs import make_batch, pad_batch, token_logprobs
from planact.rl.sft import demo_loss, sft
from planact.rl.trainer import RoleTrainer


def _seq_logprob(model, s, pad):
    b = pad_batch([s["prompt_ids"]], [s["token_ids"]], pad)
    with torch.no_grad():
        lp, _ = token_logprobs(model, b)
    return float((lp * b["resp_mask"]).sum())


def test_grpo_step_raises_positive_and_lowers_negative_samples(tiny_model_dir):
    model, tok = load_model(tiny_model_dir)
    engine = HFEngine(model, tok)
    comps = engine.generate(["sort the digits ="], SamplingParams(temperature=1.0, max_new_tokens=6, n=2, seed=3))[0]
    samples = [
        {"prompt_ids": c.prompt_ids, "token_ids": c.token_ids, "logprobs": c.logprobs, "advantage": a}
        for c, a in zip(comps, (1.0, -1.0))
    ]
    before = [_seq_logprob(model, s, tok.pad_token_id) for s in samples]
    trainer = RoleTrainer(model, tok.pad_token_id, RLConfig(lr=1e-2, warmup_steps=0, num_minibatches=1), 1.0)
    m = trainer.train_step(samples)
    after = [_seq_logprob(model, s, tok.pad_token_id) for s in samples]
    assert after[0] > before[0] and after[1] < before[1]
    for key in ("loss", "kl", "entropy", "clip_frac", "grad_norm", "tokens_per_s"):
        assert key in m
    assert m["grad_norm"] > 0 and m["clip_frac"] == 0.0  # first minibatch is exactly on-policy


def test_zero_advantage_round_skips_the_update(tiny_model_dir):
    model, tok = load_model(tiny_model_dir)
    ref = copy.deepcopy(model.state_dict())
    trainer = RoleTrainer(model, tok.pad_token_id, RLConfig(), 1.0)
    m = trainer.train_step([{"prompt_ids": [1, 5], "token_ids": [6, 2], "logprobs": [-1.0, -1.0], "advantage": 0.0}])
    assert m["skipped"] == 1.0
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in ref.items())


def test_warm_start_learns_demonstrations(tiny_model_dir):
    model, tok = load_model(tiny_model_dir)
    demos = [
        (
            [tok.bos_token_id] + tok.encode(f"{d} =", add_special_tokens=False),
            tok.encode(str((d + 1) % 10), add_special_tokens=False) + [tok.eos_token_id],
        )
        for d in range(10)
    ]
    curve = sft(model, tok.pad_token_id, demos, WarmStartConfig(steps=60, batch_size=16, warmup_steps=5), log_every=20)
    assert curve[-1]["loss"] < curve[0]["loss"] * 0.5
    assert curve[-1]["lr"] < WarmStartConfig().lr  # annealed


def test_warm_start_stops_at_its_plateau_and_keeps_the_best_weights(tiny_model_dir):
    """With patience, the warm start measures held-out demonstrations, stops once they stop improving (well
    before `steps`), and the weights it returns are the best it measured, not the last."""

    model, tok = load_model(tiny_model_dir)
    demos = [
        (
            [tok.bos_token_id] + tok.encode(f"{d} {e} =", add_special_tokens=False),
            tok.encode(str((d + e) % 10), add_special_tokens=False) + [tok.eos_token_id],
        )
        for d in range(10)
        for e in range(10)
    ] * 2
    cfg = WarmStartConfig(
        steps=5000, batch_size=16, warmup_steps=5, lr=1e-2, patience=2, eval_every=10, heldout=32, min_delta=0.05
    )
    curve = sft(model, tok.pad_token_id, demos, cfg, log_every=10)
    held = [p["heldout_loss"] for p in curve if "heldout_loss" in p]
    last_step = curve[-1]["step"]
    assert last_step < 5000 and len(held) >= 3  # stopped at the plateau, not at `steps`
    best = curve[-1]["best_heldout_loss"]
    assert best in held and min(held) >= best * (1 - cfg.min_delta)  # later evaluations never beat it by 5%
    assert demo_loss(model, tok.pad_token_id, demos[-32:], 16) == pytest.approx(best, rel=1e-5)  # best weights kept
    with pytest.raises(ValueError):
        WarmStartConfig(heldout=2)


def test_trainer_state_round_trip(tiny_model_dir):
    model, tok = load_model(tiny_model_dir)
    t = RoleTrainer(model, tok.pad_token_id, RLConfig(kl_coef=0.1), 1.0)
    t.snapshot_reference()
    t.train_step([{"prompt_ids": [1, 5], "token_ids": [6, 2], "logprobs": [-4.0, -4.0], "advantage": 1.0}])
    state = t.state_dict()
    t2 = RoleTrainer(model, tok.pad_token_id, RLConfig(kl_coef=0.1), 1.0)
    t2.load_state_dict(state)
    assert t2.steps == t.steps and t2.ref_model is not None
    # Not only the counters: the optimizer moments, the schedule and the KL reference come back exactly.
    m1, m2 = t.optimizer.state_dict(), t2.optimizer.state_dict()
    assert m1["state"].keys() == m2["state"].keys() and m1["state"]
    for k in m1["state"]:
        assert torch.equal(m1["state"][k]["exp_avg"], m2["state"][k]["exp_avg"])
        assert torch.equal(m1["state"][k]["exp_avg_sq"], m2["state"][k]["exp_avg_sq"])
    assert t2.scheduler.get_last_lr() == t.scheduler.get_last_lr()
    for a, b in zip(t.ref_model.state_dict().values(), t2.ref_model.state_dict().values()):
        assert torch.equal(a, b)


def test_stale_samples_are_corrected_against_the_current_policy(tiny_model_dir):
    """A sample one weight version old (pipelined rounds): its clip is taken around the trainer's current
    policy and pi_prox/pi_behav weights its tokens; fresh samples train exactly as before."""
    model, tok = load_model(tiny_model_dir)
    engine = HFEngine(model, tok)
    comps = engine.generate(["sort the digits ="], SamplingParams(temperature=1.0, max_new_tokens=6, n=2, seed=3))[0]
    fresh = [
        {"prompt_ids": c.prompt_ids, "token_ids": c.token_ids, "logprobs": c.logprobs, "advantage": a}
        for c, a in zip(comps, (1.0, -1.0))
    ]
    rl = RLConfig(lr=1e-2, warmup_steps=0, num_minibatches=1, stale_weight_cap=5.0)
    # The same samples marked stale but drawn by these very weights: pi_prox == pi_behav, so the update is
    # the fresh one (up to the engine-vs-trainer logprob difference, ~1e-6).
    base = copy.deepcopy(model)
    twin = copy.deepcopy(model)
    m_fresh = RoleTrainer(model, tok.pad_token_id, rl, 1.0).train_step(fresh)
    m_stale = RoleTrainer(twin, tok.pad_token_id, rl, 1.0).train_step([{**s, "staleness": 1} for s in fresh])
    assert m_fresh["staleness_max"] == 0.0 and "stale_weight_mean" not in m_fresh
    assert m_stale["staleness_mean"] == 1.0 and abs(m_stale["stale_weight_mean"] - 1.0) < 1e-4
    assert abs(m_fresh["loss"] - m_stale["loss"]) < 1e-4
    # Drawn by older weights (here: logprobs 1 nat lower than the current policy's): weights e^1, capped.
    old = [{**s, "staleness": 1, "logprobs": [lp - 1.0 for lp in s["logprobs"]]} for s in fresh]
    m_old = RoleTrainer(
        base, tok.pad_token_id, RLConfig(lr=1e-2, warmup_steps=0, num_minibatches=1, stale_weight_cap=2.0), 1.0
    ).train_step(old)
    assert m_old["stale_weight_capped"] == 1.0 and abs(m_old["stale_weight_mean"] - 2.0) < 1e-5
    assert m_old["clip_frac"] == 0.0  # the clip is around the current policy, not the stale one


def test_sft_continuation_keeps_to_its_time_and_spends_it_on_training(tiny_model_dir, monkeypatch):
    """The equal-time SFT control: it stops within about one chunk of its budget, even when a step is slow
    (a pretrained role's step takes seconds), and it never spends its time on held-out checks, even when
    the role's warm start had patience (the benchmark's plateau settings)."""
    import time
    from types import SimpleNamespace

    import planact.rl.sft as sft_mod
    from planact.rl.sft import sft_continuation

    model, tok = load_model(tiny_model_dir)
    demos = [([tok.bos_token_id, 5, 6], [7, tok.eos_token_id])] * 600
    ws = WarmStartConfig(steps=100, batch_size=4, patience=3, eval_every=1, heldout=16)
    cfg = SimpleNamespace(actor=SimpleNamespace(warm_start=ws))
    worker = SimpleNamespace(role="actor", model=model, tokenizer=tok)
    calls, real_sft = [], sft_mod.sft

    def slow_sft(m, pad, d, c, seed=0, steps=None, log_every=50):
        t = time.perf_counter()
        time.sleep(0.05 * steps)  # a 50 ms step
        out = real_sft(m, pad, d, c, seed=seed, steps=steps, log_every=log_every)
        calls.append((steps, c.patience, time.perf_counter() - t))
        return out

    monkeypatch.setattr(sft_mod, "sft", slow_sft)
    t0 = time.perf_counter()
    steps = sft_continuation([worker], {"actor": demos}, cfg, seconds=1.0, seed=0, chunk=20)
    took = time.perf_counter() - t0
    assert steps == sum(n for n, _, _ in calls) and steps >= 2
    assert calls[0][0] == 1 and max(n for n, _, _ in calls) < 20  # a chunk lasts ~1/20 of the budget, not 20 steps
    assert took < 1.0 + max(s for _, _, s in calls) + 0.2  # overshoots by at most one chunk
    assert all(p == 0 for _, p, _ in calls)  # no plateau checks inside the control


def test_sft_micro_batches_take_the_same_step_as_one_pass(tiny_model_dir):
    """micro_batch_size only bounds memory: the accumulated gradient (mean over the batch's target tokens,
    demonstrations of different lengths) gives the weights one pass over the whole batch gives."""
    model, tok = load_model(tiny_model_dir)
    twin = copy.deepcopy(model)
    demos = [
        (
            [tok.bos_token_id] + tok.encode(f"{d} " * (1 + d % 4) + "=", add_special_tokens=False),
            [5 + d % 3] * (1 + d % 3),
        )
        for d in range(12)
    ]
    packed_twin = load_model(tiny_model_dir, attention="varlen")[0]
    cfg = WarmStartConfig(steps=3, batch_size=6, warmup_steps=0, lr=1e-3)
    a = sft(model, tok.pad_token_id, demos, cfg, seed=4, log_every=1)
    b = sft(twin, tok.pad_token_id, demos, cfg.model_copy(update={"micro_batch_size": 4}), seed=4, log_every=1)
    # warm_start.packed: the same micro-batches, each one row without padding
    packed = cfg.model_copy(update={"micro_batch_size": 4, "packed": True})
    c = sft(packed_twin, tok.pad_token_id, demos, packed, seed=4, log_every=1)
    for other, curve in ((twin, b), (packed_twin, c)):
        assert [p["loss"] for p in a] == pytest.approx([p["loss"] for p in curve], rel=1e-5)
        # Adam divides by the gradient's own scale, so where a gradient is ~0 float rounding moves a weight by up
        # to lr; everywhere else the two agree to rounding
        diff = [(v - w).abs() for v, w in zip(model.state_dict().values(), other.state_dict().values())]
        assert max(float(d.max()) for d in diff) <= 3 * cfg.lr
        assert sum(int((d > 1e-6).sum()) for d in diff) <= 1e-3 * sum(d.numel() for d in diff)
    assert demo_loss(model, tok.pad_token_id, demos, 5) == pytest.approx(
        demo_loss(model, tok.pad_token_id, demos, 5, packed=True), rel=1e-5
    )


def test_a_varlen_model_samples_what_its_packed_trainer_scores(tiny_model_dir):
    """attention: varlen serves generation (padded prompts, SDPA) and packed training (each sample on its own):
    the engine's sampling logprobs are the ones the packed trainer computes, as on-policy GRPO needs."""
    model, tok = load_model(tiny_model_dir, attention="varlen")
    engine = HFEngine(model, tok)
    prompts = ["sort the digits =", "reverse 12345 ="]  # different lengths: the engine pads one of them
    comps = engine.generate(prompts, SamplingParams(temperature=1.0, max_new_tokens=6, n=2, seed=5))
    rows = [c for group in comps for c in group]
    batch, starts = make_batch([c.prompt_ids for c in rows], [c.token_ids for c in rows], tok.pad_token_id, packed=True)
    with torch.no_grad():
        lp, _ = token_logprobs(model, batch)
    for (row, col), c in zip(starts, rows):
        assert torch.allclose(lp[row, col : col + len(c.token_ids)], torch.tensor(c.logprobs), atol=1e-4)
