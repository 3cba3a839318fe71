"""HF engine throughput: batched KV-cache generation vs a naive per-prompt `model.generate` loop.

Same model, same prompts (the Plan/Act planner's), same sampling settings; generated tokens are counted
up to and including EOS. Prints tokens/s of each and the ratio, measured in this run.

    python benchmarks/engine_throughput.py                                  # tiny planner, CPU
    python benchmarks/engine_throughput.py --from runs/demo/checkpoints/warm_start/planner
    python benchmarks/engine_throughput.py --device cuda --prompts 512      # on a GPU machine
    python benchmarks/engine_throughput.py --tiny                           # seconds (the suite runs it)
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from planact.config import load_config  # noqa: E402
from planact.engines.base import SamplingParams  # noqa: E402
from planact.engines.hf import HFEngine  # noqa: E402
from planact.envs.plan_act import PlanActEnv, planner_prompt  # noqa: E402
from planact.models import load_model, materialize_tiny, param_count  # noqa: E402


def generated_tokens(ids: list[int], eos: int) -> int:
    """Tokens up to and including the first EOS."""
    return ids.index(eos) + 1 if eos in ids else len(ids)


def naive_loop(model, tok, prompts: list[str], params: SamplingParams, device: str) -> int:
    """One `model.generate` call per prompt; returns generated tokens."""
    total = 0
    for p in prompts:
        ids = torch.tensor([[tok.bos_token_id] + tok.encode(p, add_special_tokens=False)], device=device)
        out = model.generate(
            ids,
            attention_mask=torch.ones_like(ids),
            do_sample=params.temperature > 0,
            temperature=params.temperature or None,
            top_p=params.top_p,
            max_new_tokens=params.max_new_tokens,
            eos_token_id=tok.eos_token_id,
            pad_token_id=tok.pad_token_id,
        )
        total += generated_tokens(out[0, ids.shape[1] :].tolist(), tok.eos_token_id)
    return total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--from", dest="path", help="HF checkpoint folder (default: a freshly built tiny planner)")
    ap.add_argument("--prompts", type=int, default=256)
    ap.add_argument("--max-new-tokens", type=int, default=24)
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads (a Ray actor's default is 1)")
    ap.add_argument("--tiny", action="store_true", help="16 prompts, 8 new tokens (tests: the benchmark cannot rot)")
    args = ap.parse_args()
    if args.tiny:
        args.prompts, args.max_new_tokens = 16, 8
    torch.set_num_threads(args.threads)
    cfg = load_config("configs/demo.yaml")
    path = args.path or materialize_tiny(cfg.planner.tiny, Path(tempfile.mkdtemp()) / "planner", seed=0)
    model, tok = load_model(path, args.device, native=False)  # the baseline is transformers' generate
    model.eval()
    prompts = [planner_prompt(t) for t in PlanActEnv(cfg.env, 0).sample_tasks(1, args.prompts)]
    params = SamplingParams(temperature=args.temperature, max_new_tokens=args.max_new_tokens, n=1, seed=0)
    engine = HFEngine(model, tok)
    engine.generate(prompts[:8], params)  # warm-up (allocator, kernels)

    t0 = time.perf_counter()
    groups = engine.generate(prompts, params)
    t_batched = time.perf_counter() - t0
    n_batched = sum(len(c.token_ids) for g in groups for c in g)

    torch.manual_seed(0)
    t0 = time.perf_counter()
    with torch.no_grad():
        n_naive = naive_loop(model, tok, prompts, params, args.device)
    t_naive = time.perf_counter() - t0

    batched, naive = n_batched / t_batched, n_naive / t_naive
    print(
        f"model: {param_count(model) / 1e6:.2f}M params on {args.device} ({args.threads} CPU threads); "
        f"{len(prompts)} prompts, max_new_tokens {args.max_new_tokens}, T={args.temperature}"
    )
    print(f"{'':28}{'tokens':>8}{'seconds':>10}{'tokens/s':>12}")
    print(f"{'HF engine (batched, KV)':28}{n_batched:>8}{t_batched:>10.2f}{batched:>12.0f}")
    print(f"{'naive per-prompt generate':28}{n_naive:>8}{t_naive:>10.2f}{naive:>12.0f}")
    print(f"ratio batched / naive: {batched / naive:.1f}x")


if __name__ == "__main__":
    main()
