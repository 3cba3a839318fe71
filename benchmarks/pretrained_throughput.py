"""A pretrained model's CPU throughput on the three paths the repair team uses, each against its baseline.

  scoring     candidate edits of one function after ~400 tokens of its module (the patch model's choice):
              the prompt computed once and shared (HFEngine._score_shared) vs each candidate scored in
              its own forward pass;
  generation  chat prompts answered batched with the KV cache vs the same engine one prompt at a time;
  training    one GRPO step on the same samples through LoRA adapters vs full fine-tuning.

Prints tokens/s of each arm and the ratio, measured in this run on the same model and inputs, and the
training step's sampler/trainer logprob gap (docs/engines.md, "Weights that reach the sampler").

    python benchmarks/pretrained_throughput.py                     # SmolLM2-135M-Instruct (imported on first use)
    python benchmarks/pretrained_throughput.py --threads 2
    python benchmarks/pretrained_throughput.py --tiny              # a tiny local model, seconds (the suite runs it)
"""

from __future__ import annotations

import argparse
import ast
import copy
import inspect
import sys
import tempfile
import textwrap
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from graph_planner.candidates import candidate_edits  # noqa: E402
from graph_planner.team.file_prompts import file_context  # noqa: E402
from planact.config import LoRAConfig, RLConfig  # noqa: E402
from planact.engines.base import SamplingParams  # noqa: E402
from planact.engines.hf import HFEngine  # noqa: E402
from planact.lora import apply_lora  # noqa: E402
from planact.models import load_model, param_count, tiny_code_model  # noqa: E402
from planact.registry import resolve_model  # noqa: E402
from planact.rl.trainer import RoleTrainer  # noqa: E402


def repair_request(max_candidates: int, context_chars: int) -> tuple[str, list[str]]:
    """A standard-library module's text before one of its functions, and that function's candidate edits."""
    source = Path(inspect.getsourcefile(textwrap)).read_text()
    lines = source.splitlines(True)
    best: tuple[int, str, list[str]] = (0, "", [])
    # The first function of at most 1,200 characters (the repair configs' bound) with enough candidate
    # edits, else the one with the most: the same on every machine with the same Python.
    for fn in (n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.FunctionDef)):
        text = "".join(lines[fn.lineno - 1 : fn.end_lineno])
        cands = [c.edit["new"] for c in candidate_edits("textwrap.py", fn.lineno, text)] if len(text) <= 1200 else []
        if len(cands) > len(best[2]):
            best = (fn.lineno, text, cands)
        if len(cands) >= max_candidates:
            break
    return file_context(source, best[0], context_chars), best[2][:max_candidates]


def timed(fn):
    """(result, seconds) of fn()."""
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def scoring(engine: HFEngine, prompt: str, cands: list[str]) -> dict:
    """Shared-prefix scoring vs one forward pass per candidate (prompt + candidate)."""
    p_ids = engine.encode(prompt, raw=True)
    c_ids = [engine.tokenizer.encode(c, add_special_tokens=False) + [engine.tokenizer.eos_token_id] for c in cands]
    tokens = sum(len(c) for c in c_ids)
    shared, t_shared = timed(lambda: engine._score_shared(p_ids, c_ids, 1.0))
    one_by_one = HFEngine(engine.model, engine.tokenizer, max_batch=1)
    alone, t_alone = timed(lambda: one_by_one._score(p_ids, c_ids, 1.0))
    diff = max(abs(a - b) for x, y in zip(shared, alone) for a, b in zip(x, y))
    return {
        "prompt_tokens": len(p_ids),
        "candidates": len(cands),
        "tokens": tokens,
        "shared_s": t_shared,
        "alone_s": t_alone,
        "max_abs_diff": diff,
    }


def generation(engine: HFEngine, prompts: list[str], max_new: int) -> dict:
    """Batched generation vs one prompt per call, greedy so both produce the same tokens."""
    params = SamplingParams(temperature=0.0, max_new_tokens=max_new, n=1, seed=0)
    batched, t_b = timed(lambda: engine.generate(prompts, params))
    single, t_s = timed(lambda: [engine.generate([p], params)[0] for p in prompts])
    return {
        "prompts": len(prompts),
        "tokens_batched": sum(len(g[0].token_ids) for g in batched),
        "batched_s": t_b,
        "tokens_single": sum(len(g[0].token_ids) for g in single),
        "single_s": t_s,
    }


def training(model, tok, prompt: str, cands: list[str], lora: LoRAConfig, samples: int) -> dict:
    """One GRPO step over the same samples: LoRA adapters vs every weight."""
    engine = HFEngine(model, tok)
    p_ids = engine.encode(prompt, raw=True)
    batch = [
        {
            "prompt_ids": p_ids,
            "token_ids": tok.encode(c, add_special_tokens=False) + [tok.eos_token_id],
            "advantage": 1.0 if i % 2 else -1.0,
        }
        for i, c in enumerate((cands * samples)[:samples])
    ]
    for s in batch:  # the engine's logprobs make the first step exactly on-policy
        s["logprobs"] = engine._score(p_ids, [s["token_ids"]], 1.0)[0]
    out = {}
    rl = RLConfig(num_minibatches=1, warmup_steps=0)
    for name, m in (("lora", apply_lora(copy.deepcopy(model), lora, seed=0)), ("full", copy.deepcopy(model))):
        trainer = RoleTrainer(m, tok.pad_token_id, rl, 1.0)
        before = {k: v.detach().clone() for k, v in m.named_parameters() if v.requires_grad}
        trainer.train_step(batch[:1])  # warm-up: optimizer state, allocator
        # The warm-up's optimizer step moved the weights: the samples' logprobs (staleness 0) would then claim
        # weights the trainer no longer holds, and the sampler/trainer check would measure one update (2e-3 with
        # LoRA, 5e-2 full on the tiny model) as a broken sync. Back to the weights that scored them; the optimizer
        # keeps its state (load_state_dict copies in place).
        assert not m.load_state_dict(before, strict=False).unexpected_keys  # every trainable weight restored
        metrics = trainer.train_step(batch)
        out[name] = {
            "tokens_per_s": metrics["tokens_per_s"],
            "seconds": metrics["train_time_s"],
            "trainable": param_count(m, trainable_only=True),
            "gap": metrics.get("sampler_trainer_logprob_gap", float("nan")),
        }
    out["tokens"] = sum(len(s["token_ids"]) for s in batch)
    return out


def main() -> None:
    """Measure and print the three comparisons."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--model", default="planact:smollm2-135m-instruct", help="model_path (folder, planact:<name>, models:/...)"
    )
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads (a Ray actor's default is 1)")
    ap.add_argument("--candidates", type=int, default=12)
    ap.add_argument("--context-chars", type=int, default=1500)
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--max-new-tokens", type=int, default=32)
    ap.add_argument("--samples", type=int, default=8, help="GRPO samples in the training step")
    ap.add_argument("--tiny", action="store_true", help="a tiny local model and small sizes (tests: it cannot rot)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    if args.tiny:
        path = tiny_code_model(Path(tempfile.mkdtemp()) / "tiny")
        args.candidates, args.context_chars, args.prompts, args.max_new_tokens, args.samples = 4, 400, 4, 8, 4
    else:
        path = resolve_model(args.model)
    model, tok = load_model(path)
    engine = HFEngine(model, tok)
    prompt, cands = repair_request(args.candidates, args.context_chars)
    questions = [
        f"Write a Python function that returns the {w} of a list."
        for w in ("sum", "maximum", "minimum", "mean", "median", "length", "product", "reverse")
    ][: args.prompts]
    print(f"model: {path} ({param_count(model) / 1e6:.1f}M parameters), {args.threads} CPU thread(s)")
    s = scoring(engine, prompt, cands)
    shared, alone = s["tokens"] / s["shared_s"], s["tokens"] / s["alone_s"]
    print(
        f"scoring  {s['candidates']} candidate functions ({s['tokens']} tokens) after {s['prompt_tokens']} prompt "
        "tokens: "
        f"shared prefix {shared:.0f} tokens/s ({s['shared_s']:.1f} s), each alone {alone:.0f} tokens/s "
        f"({s['alone_s']:.1f} s); ratio {shared / alone:.2f}x; largest logprob difference {s['max_abs_diff']:.1e}"
    )
    g = generation(engine, questions, args.max_new_tokens)
    b, o = g["tokens_batched"] / g["batched_s"], g["tokens_single"] / g["single_s"]
    print(
        f"generate {g['prompts']} chat prompts, up to {args.max_new_tokens} new tokens: batched {b:.0f} tokens/s, "
        f"one by one {o:.0f} tokens/s; ratio {b / o:.2f}x"
    )
    t = training(model, tok, prompt, cands, LoRAConfig(enabled=True), args.samples)
    print(
        f"training one GRPO step, {args.samples} samples ({t['tokens']} response tokens): LoRA "
        f"{t['lora']['tokens_per_s']:.0f} tokens/s ({t['lora']['trainable']:,} trainable), full fine-tuning "
        f"{t['full']['tokens_per_s']:.0f} tokens/s ({t['full']['trainable']:,}); ratio "
        f"{t['lora']['tokens_per_s'] / t['full']['tokens_per_s']:.2f}x; sampler/trainer logprob gap LoRA "
        f"{t['lora']['gap']:.1e}, full {t['full']['gap']:.1e}"
    )


if __name__ == "__main__":
    main()
