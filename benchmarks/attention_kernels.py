"""Eager vs SDPA attention for a role's hf model: engine and trainer speed, and whether their log-probabilities agree.

A role's engine samples with a KV cache and left padding; its trainer recomputes the same tokens'
log-probabilities in one padded forward pass. RL needs the two to agree (the GRPO ratio starts at 1).
This loads one locally built model with `resources.attention` = eager and = sdpa (planact's own
load_model, HFEngine and RoleTrainer, fp32 as planact runs them), samples a batch, trains one GRPO step
on it, and prints tokens/s of each, the ratio to eager measured in the same run, and the largest
difference between the engine's and the trainer's log-probability of a sampled token.

    python benchmarks/attention_kernels.py --device cuda      # a 24-layer, 896-wide Llama (Qwen2.5-0.5B's body)
    python benchmarks/attention_kernels.py --tiny             # seconds on a CPU (what the test runs)
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from planact.config import RLConfig, TinyModelSpec  # noqa: E402
from planact.engines.base import SamplingParams  # noqa: E402
from planact.engines.hf import HFEngine  # noqa: E402
from planact.models import build_tiny_model, build_tokenizer, load_model  # noqa: E402
from planact.rl.logprobs import pad_batch, token_logprobs  # noqa: E402
from planact.rl.trainer import RoleTrainer  # noqa: E402

GPU_SPEC = TinyModelSpec(hidden_size=896, num_layers=24, num_heads=14, intermediate_size=4864, max_positions=2048)
CPU_SPEC = TinyModelSpec(hidden_size=64, num_layers=2, num_heads=4, intermediate_size=128, max_positions=256)


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def measure(folder: Path, attention: str, args) -> dict:
    """Sample, re-score and train once with one attention kernel."""
    model, tok = load_model(folder, args.device, attention)
    engine = HFEngine(model, tok, name=attention)
    rng = random.Random(0)
    digits = "0123456789"
    prompts = [
        "".join(rng.choice(digits) for _ in range(rng.randint(args.prompt_len // 2, args.prompt_len))) + ":"
        for _ in range(args.prompts)
    ]
    params = SamplingParams(temperature=1.0, max_new_tokens=args.new_tokens, n=1, seed=0)
    engine.generate(prompts[:2], params)  # warm-up (kernels, allocator)
    _sync(args.device)
    t0 = time.perf_counter()
    groups = engine.generate(prompts, params)
    _sync(args.device)
    gen_s = time.perf_counter() - t0
    comps = [g[0] for g in groups]
    new_tokens = sum(len(c.token_ids) for c in comps)
    with torch.no_grad():
        batch = pad_batch([c.prompt_ids for c in comps], [c.token_ids for c in comps], tok.pad_token_id, args.device)
        lp, _ = token_logprobs(model, batch)
    gap = 0.0
    for i, c in enumerate(comps):
        start = len(c.prompt_ids)
        trainer_lp = lp[i, start : start + len(c.token_ids)].float().cpu()
        gap = max(gap, float((trainer_lp - torch.tensor(c.logprobs)).abs().max()) if c.token_ids else 0.0)
    samples = [
        {
            "prompt_ids": c.prompt_ids,
            "token_ids": c.token_ids,
            "logprobs": c.logprobs,
            "advantage": 1.0 if i % 2 else -1.0,
            "sample_id": i,
        }
        for i, c in enumerate(comps)
    ]
    trainer = RoleTrainer(
        model, tok.pad_token_id, RLConfig(lr=1e-5, warmup_steps=0, num_minibatches=args.minibatches), temperature=1.0
    )
    _sync(args.device)
    t0 = time.perf_counter()
    trainer.train_step(samples)
    _sync(args.device)
    train_s = time.perf_counter() - t0
    peak = torch.cuda.max_memory_allocated() / 2**30 if args.device.startswith("cuda") else 0.0
    del model, engine, trainer
    if args.device.startswith("cuda"):
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    trained_tokens = sum(len(c.prompt_ids) + len(c.token_ids) for c in comps)
    return {
        "attention": attention,
        "gen_tps": new_tokens / gen_s,
        "train_tps": trained_tokens / train_s,
        "gap": gap,
        "peak_gib": peak,
    }


def main(argv: list[str] | None = None) -> int:
    """Build the model once, measure each kernel, print the table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu", help="cpu or cuda")
    ap.add_argument("--prompts", type=int, default=64, help="prompts sampled (one completion each)")
    ap.add_argument("--prompt-len", type=int, default=256, help="longest prompt in tokens")
    ap.add_argument("--new-tokens", type=int, default=128, help="tokens sampled per prompt")
    ap.add_argument("--minibatches", type=int, default=4, help="optimizer steps of the GRPO step")
    ap.add_argument("--tiny", action="store_true", help="a seconds-long CPU run (tests)")
    args = ap.parse_args(argv)
    if args.tiny:
        args.prompts, args.prompt_len, args.new_tokens, args.minibatches = 8, 16, 8, 1
    spec = GPU_SPEC if args.device.startswith("cuda") else CPU_SPEC
    tok = build_tokenizer()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "model"
        model = build_tiny_model(spec, len(tok), 0, tok)
        model.save_pretrained(folder)
        tok.save_pretrained(folder)
        params = sum(p.numel() for p in model.parameters())
        del model
        rows = [measure(folder, a, args) for a in ("eager", "sdpa")]
    name = torch.cuda.get_device_name(0) if args.device.startswith("cuda") else "cpu"
    print(
        f"attention kernels on {name}: {params:,} parameters (fp32), {args.prompts} prompts of up to "
        f"{args.prompt_len} tokens, {args.new_tokens} new tokens each"
    )
    print(
        f"{'attention':>9} {'engine tok/s':>13} {'ratio':>6} {'train tok/s':>12} {'ratio':>6} "
        f"{'max |engine lp - trainer lp|':>29} {'peak GiB':>9}"
    )
    base = rows[0]
    for r in rows:
        print(
            f"{r['attention']:>9} {r['gen_tps']:>13.0f} {r['gen_tps'] / base['gen_tps']:>6.2f} {r['train_tps']:>12.0f} "
            f"{r['train_tps'] / base['train_tps']:>6.2f} {r['gap']:>29.2e} {r['peak_gib']:>9.1f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
