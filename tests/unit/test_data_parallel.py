"""Data-parallel GRPO: two gloo ranks on loopback take the same optimizer steps as one process.

No Ray here: two processes (torch.multiprocessing) form a real torch.distributed group over TCP on
127.0.0.1, each with its own copy of the model, and train on the same round of samples.
"""

from __future__ import annotations

import socket

import pytest
import torch
import torch.multiprocessing as mp

from planact.config import RLConfig, TinyModelSpec
from planact.models import build_tiny_model, build_tokenizer
from planact.rl import data_parallel
from planact.rl.data_parallel import DataParallel, token_balanced
from planact.rl.trainer import RoleTrainer

from .rl_samples import random_samples

RL = RLConfig(lr=3e-3, num_minibatches=2, kl_coef=0.05)


def _model():
    tok = build_tokenizer()
    return build_tiny_model(
        TinyModelSpec(hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64), len(tok), seed=3, tokenizer=tok
    ), tok


def _samples(n: int = 13) -> list[dict]:
    return random_samples(n, seed=0)  # uneven lengths, so the token-balanced split and the weighting matter


def _train(dp: DataParallel | None) -> dict:
    torch.manual_seed(0)
    model, tok = _model()
    trainer = RoleTrainer(model, tok.pad_token_id, RL, temperature=1.0)
    for _ in range(2):  # two rounds: optimizer state and the KL reference must stay in step as well
        metrics = trainer.train_step(_samples(), dp=dp)
    return {"weights": {k: v.detach().clone() for k, v in model.state_dict().items()}, "metrics": metrics}


def _rank(rank: int, port: int, world: int, out):
    torch.set_num_threads(1)
    data_parallel.join("127.0.0.1", port, rank, world, "gloo", 60)
    try:
        result = _train(DataParallel(rank, world))
    finally:
        data_parallel.leave()
    # numpy, not tensors: torch would share tensor memory through file descriptors of a process that exits
    out.put((rank, {**result, "weights": {k: v.numpy() for k, v in result["weights"].items()}}))


def test_token_balanced_split_covers_each_sample_once():
    samples = _samples(11)
    parts = token_balanced(samples, 3)
    assert sorted(i for p in parts for i in p) == list(range(11))
    loads = [sum(len(samples[i]["prompt_ids"]) + len(samples[i]["token_ids"]) for i in p) for p in parts]
    assert max(loads) - min(loads) <= max(len(s["prompt_ids"]) + len(s["token_ids"]) for s in samples)


@pytest.mark.parametrize("world", [2, pytest.param(3, marks=pytest.mark.slow)])
def test_n_ranks_update_the_weights_like_one_process(world):
    torch.set_num_threads(1)
    single = _train(None)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("forkserver")  # ranks forked from one server that imported torch once
    ctx.set_forkserver_preload(["torch", "transformers", "planact.rl.trainer"])
    out = ctx.Queue()
    procs = [ctx.Process(target=_rank, args=(r, port, world, out)) for r in range(world)]
    for p in procs:
        p.start()
    results = dict(out.get(timeout=180) for _ in procs)
    for p in procs:
        p.join(timeout=60)
    assert all(p.exitcode == 0 for p in procs)
    for r in range(world):
        diff = max(
            float((torch.from_numpy(results[r]["weights"][k]) - single["weights"][k]).abs().max())
            for k in single["weights"]
        )
        assert diff < 1e-5, (r, diff)
    assert results[0]["metrics"]["loss"] == pytest.approx(single["metrics"]["loss"], abs=1e-5)
    assert results[0]["metrics"]["grad_norm"] == pytest.approx(single["metrics"]["grad_norm"], rel=1e-4)
