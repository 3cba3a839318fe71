"""The trainer's speed switches change how a GRPO step is computed, not what it computes: a step with each
switch on equals the plain step (within float tolerance; bf16 within bf16's). CPU here; their speed on a GPU
is measured by benchmarks/trainer_scaling.py --device cuda."""

from __future__ import annotations

import pytest
import torch

from planact.config import RLConfig, TinyModelSpec
from planact.models import build_tiny_model, build_tokenizer
from planact.rl import varlen  # noqa: F401  (registers the varlen attention)
from planact.rl.logprobs import make_batch, token_logprobs
from planact.rl.trainer import RoleTrainer

from .rl_samples import random_samples

BASE = {"lr": 3e-3, "num_minibatches": 2, "kl_coef": 0.05, "warmup_steps": 0}


def _samples(n: int = 11) -> list[dict]:
    return random_samples(n, seed=1, max_prompt=14, max_response=10)  # uneven: micro-batch weights matter


def _train(attention: str = "eager", **switches) -> tuple[dict, dict]:
    torch.manual_seed(0)
    tok = build_tokenizer()
    spec = TinyModelSpec(hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64)
    model = build_tiny_model(spec, len(tok), seed=3, tokenizer=tok)
    model.config._attn_implementation = attention
    trainer = RoleTrainer(model, tok.pad_token_id, RLConfig(**{**BASE, **switches}), temperature=1.0)
    metrics = {}
    for _ in range(2):  # two rounds: optimizer state and the KL reference stay in step too
        metrics = trainer.train_step(_samples())
    return {k: v.detach().clone() for k, v in model.state_dict().items()}, metrics


@pytest.fixture(scope="module")
def plain():
    return _train()


def _max_diff(a: dict, b: dict) -> float:
    return max(float((a[k] - b[k]).abs().max()) for k in a)


def test_micro_batches_take_the_same_step(plain):
    weights, metrics = _train(micro_batch_tokens=40)  # ~2-3 rows per micro-batch here
    assert _max_diff(weights, plain[0]) < 1e-5
    for k in ("loss", "pg_loss", "kl", "entropy", "clip_frac"):
        assert metrics[k] == pytest.approx(plain[1][k], abs=1e-5), k


def test_micro_batches_respect_the_budget_and_keep_every_row():
    tok = build_tokenizer()
    spec = TinyModelSpec(hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64)
    model = build_tiny_model(spec, len(tok), seed=0, tokenizer=tok)
    trainer = RoleTrainer(model, tok.pad_token_id, RLConfig(micro_batch_tokens=40), 1.0)
    rows = _samples(30)
    parts = trainer.micro_batches(rows)
    assert sorted(r["sample_id"] for p in parts for r in p) == list(range(30)) and len(parts) > 1
    for part in parts:
        width = max(len(r["prompt_ids"]) + len(r["token_ids"]) for r in part)
        assert len(part) == 1 or len(part) * width <= 40


@pytest.mark.parametrize(("attention", "budget"), [("eager", 0), ("eager", 40), ("varlen", 0), ("varlen", 40)])
def test_packed_micro_batches_take_the_same_step(plain, attention, budget):
    # Packed: samples end to end in one row (one micro-batch, or several), attended through transformers'
    # block-diagonal mask (eager) or sample by sample (varlen).
    weights, metrics = _train(attention, packed=True, micro_batch_tokens=budget)
    assert _max_diff(weights, plain[0]) < 1e-5
    for k in ("loss", "pg_loss", "kl", "entropy", "clip_frac"):
        assert metrics[k] == pytest.approx(plain[1][k], abs=1e-5), k


@pytest.mark.parametrize("attention", ["eager", "sdpa", "varlen"])
def test_a_packed_row_scores_each_sample_as_if_alone(attention):
    """Packed logprobs equal padded ones token for token, and no sample sees its neighbours in the row."""
    tok = build_tokenizer()
    spec = TinyModelSpec(hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64)
    model = build_tiny_model(spec, len(tok), seed=3, tokenizer=tok).eval()
    model.config._attn_implementation = attention
    rows = _samples(7)
    prompts, responses = [r["prompt_ids"] for r in rows], [r["token_ids"] for r in rows]

    def scores(prompts, responses, packed):
        batch, starts = make_batch(prompts, responses, tok.pad_token_id, packed=packed)
        with torch.no_grad():
            lp, _ = token_logprobs(model, batch)
        return [lp[row, col : col + len(r)] for (row, col), r in zip(starts, responses)]

    padded, packed = scores(prompts, responses, False), scores(prompts, responses, True)
    for a, b in zip(padded, packed):
        assert torch.allclose(a, b, atol=1e-5)
    # Another first sample in the row: every later sample's logprobs stay exactly what they were.
    other = scores([[5, 6, 7, 8, 9, 10, 11]] + prompts[1:], [[12, 13]] + responses[1:], True)
    for a, b in zip(packed[1:], other[1:]):
        assert torch.allclose(a, b, atol=1e-6)


def test_packed_stale_samples_get_the_same_proximal_logprobs():
    stale = [{**s, "staleness": 1} for s in _samples()]
    tok = build_tokenizer()
    spec = TinyModelSpec(hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64)
    out = []
    for packed in (False, True):
        model = build_tiny_model(spec, len(tok), seed=3, tokenizer=tok)
        trainer = RoleTrainer(model, tok.pad_token_id, RLConfig(**BASE, packed=packed), temperature=1.0)
        out.append(trainer._with_proximal(stale)[0])
    for a, b in zip(*out):
        assert a["prox_logprobs"] == pytest.approx(b["prox_logprobs"], abs=1e-5)


def test_packed_micro_batches_count_real_tokens():
    tok = build_tokenizer()
    spec = TinyModelSpec(hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64)
    model = build_tiny_model(spec, len(tok), seed=0, tokenizer=tok)
    rows = _samples(30)
    padded = RoleTrainer(model, tok.pad_token_id, RLConfig(micro_batch_tokens=60), 1.0).micro_batches(rows)
    parts = RoleTrainer(model, tok.pad_token_id, RLConfig(micro_batch_tokens=60, packed=True), 1.0).micro_batches(rows)
    assert sorted(r["sample_id"] for p in parts for r in p) == list(range(30))
    for part in parts:
        assert len(part) == 1 or sum(len(r["prompt_ids"]) + len(r["token_ids"]) for r in part) <= 60
    assert len(parts) < len(padded)  # no padding counted: fewer, fuller micro-batches


def test_fused_adamw_takes_the_same_step(plain):
    assert _max_diff(_train(fused_adamw=True)[0], plain[0]) < 1e-5


def test_bf16_autocast_stays_within_bf16_tolerance_of_fp32(plain):
    weights, metrics = _train(precision="bf16")
    assert metrics["loss"] == pytest.approx(plain[1]["loss"], abs=0.05)
    start = _train(lr=1e-12)[0]  # the weights before any update

    def norm(a: dict, b: dict) -> float:
        return sum(float((a[k] - b[k]).pow(2).sum()) for k in a) ** 0.5

    # The update agrees to bf16 precision (Adam's steps are near-sign, so compare whole-update norms).
    assert norm(weights, plain[0]) < 0.25 * norm(plain[0], start)


def test_a_compiled_forward_takes_the_same_step(plain, monkeypatch):
    # The trainer's wiring (a compiled module sharing the parameters, trained through) with torch's
    # aot_eager backend: the same graph capture and autograd, without inductor's minute of C++ builds
    # on a fresh machine. Inductor's own kernels are torch's to test.
    compile_ = torch.compile
    monkeypatch.setattr(torch, "compile", lambda model, **kw: compile_(model, backend="aot_eager", **kw))
    weights, metrics = _train(compile=True)
    assert _max_diff(weights, plain[0]) < 1e-4
    assert metrics["loss"] == pytest.approx(plain[1]["loss"], abs=1e-4)


def test_packed_steps_survive_degenerate_samples_like_padded_ones():
    """Model output is what it is: an empty response, a one-token prompt and a row longer than the budget
    train to the same loss packed as padded, and a round of only empty responses is a zero-loss step."""
    odd = [
        {"prompt_ids": [5, 6, 7], "token_ids": [], "logprobs": [], "advantage": 1.0},
        {"prompt_ids": [5, 6], "token_ids": [8, 9], "logprobs": [-1.0, -2.0], "advantage": -1.0},
        {"prompt_ids": [9], "token_ids": [4], "logprobs": [-1.0], "advantage": 1.0},
        {"prompt_ids": [4] * 30, "token_ids": [7] * 20, "logprobs": [-2.0] * 20, "advantage": 0.5},
    ]
    tok = build_tokenizer()
    spec = TinyModelSpec(hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64)
    losses = []
    for attention, packed in (("eager", False), ("varlen", True)):
        model = build_tiny_model(spec, len(tok), seed=3, tokenizer=tok)
        model.config._attn_implementation = attention
        rl = RLConfig(packed=packed, micro_batch_tokens=16, warmup_steps=0, num_minibatches=1)
        trainer = RoleTrainer(model, tok.pad_token_id, rl, temperature=1.0)
        losses.append(trainer.train_step(odd)["loss"])
        assert trainer.train_step(odd[:1])["loss"] == 0.0
    assert losses[1] == pytest.approx(losses[0], abs=1e-5)
