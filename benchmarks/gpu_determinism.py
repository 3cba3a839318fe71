"""Same seed, same device, twice: are sampling, the warm start (SFT) and GRPO updates bit-identical?

Each repeat runs in a fresh process (as a resumed or repeated run would): a tiny Llama and the character
tokenizer are built from the seed on the device, trained by planact's own `sft` for some steps, then
`--rounds` GRPO rounds of `HFEngine.generate` -> a reward (characters matching a target) ->
`group_advantages` -> `RoleTrainer.train_step`. Each process reports a digest of every sampled token and
logprob and of the final weights; the parent compares the repeats of each mode, and every mode with the CPU run.

Modes: `cpu`; `cuda` (PyTorch's defaults); `cuda-deterministic` (`torch.use_deterministic_algorithms(True)`
and `CUBLAS_WORKSPACE_CONFIG=:4096:8`, which must be set before cuBLAS starts, hence one process each).

    python benchmarks/gpu_determinism.py            # every mode the machine has (cuda modes need a GPU)
    python benchmarks/gpu_determinism.py --tiny     # CPU only, seconds (the suite runs it)
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from planact.config import RLConfig, TinyModelSpec, WarmStartConfig  # noqa: E402
from planact.engines.base import SamplingParams, encode_prompt  # noqa: E402
from planact.engines.hf import HFEngine  # noqa: E402
from planact.models import build_tiny_model, build_tokenizer  # noqa: E402
from planact.rl.advantages import group_advantages  # noqa: E402
from planact.rl.sft import sft  # noqa: E402
from planact.rl.trainer import RoleTrainer  # noqa: E402

# (prompt, target) pairs: the reward is how many leading characters of the answer match the target.
TASKS = [(f"add {a} {b}:", str(a + b)) for a in range(3, 9) for b in range(2, 7)]


def reward(text: str, target: str) -> float:
    """Characters of `target` matched from the start of `text`, over its length."""
    n = 0
    for got, want in zip(text, target):
        if got != want:
            break
        n += 1
    return n / len(target)


def run_once(
    device: str, seed: int, sft_steps: int, rounds: int, group: int, weights_out: str, hidden: int = 64, layers: int = 2
) -> dict:
    """One repeat: SFT then GRPO rounds on `device`; digests of samples and final weights."""
    torch.manual_seed(seed)
    tok = build_tokenizer()
    spec = TinyModelSpec(hidden_size=hidden, num_layers=layers, num_heads=4, intermediate_size=2 * hidden)
    model = build_tiny_model(spec, len(tok), seed, tok).to(device)
    demos = [(encode_prompt(tok, p), tok.encode(t, add_special_tokens=False) + [tok.eos_token_id]) for p, t in TASKS]
    t0 = time.perf_counter()
    sft(
        model,
        tok.pad_token_id,
        demos,
        WarmStartConfig(steps=sft_steps, batch_size=16, lr=3e-3, warmup_steps=5),
        seed=seed,
    )
    trainer = RoleTrainer(model, tok.pad_token_id, RLConfig(lr=1e-3, warmup_steps=0, num_minibatches=2), 1.0)
    engine = HFEngine(model, tok)
    samples_hash = hashlib.sha256()
    for r in range(rounds):
        comps = engine.generate(
            [p for p, _ in TASKS], SamplingParams(temperature=1.0, max_new_tokens=6, n=group, seed=seed * 1000 + r)
        )
        samples = []
        for (_, target), grp in zip(TASKS, comps):
            adv = group_advantages([reward(c.text, target) for c in grp])
            for c, a in zip(grp, adv):
                samples_hash.update(json.dumps([c.token_ids, c.logprobs]).encode())
                samples.append(
                    {"prompt_ids": c.prompt_ids, "token_ids": c.token_ids, "logprobs": c.logprobs, "advantage": a}
                )
        trainer.train_step(samples)
        engine.weight_version += 1
    state = {k: v.detach().cpu() for k, v in model.state_dict().items()}
    torch.save(state, weights_out)
    weights_hash = hashlib.sha256(b"".join(state[k].numpy().tobytes() for k in sorted(state)))
    return {
        "samples": samples_hash.hexdigest()[:16],
        "weights": weights_hash.hexdigest()[:16],
        "seconds": round(time.perf_counter() - t0, 2),
    }


def child(args: argparse.Namespace) -> None:
    """Entry point of one repeat's process: applies the mode, runs, prints one JSON line."""
    device = "cpu" if args.mode == "cpu" else "cuda"
    if args.mode == "cuda-deterministic":
        torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)  # one float path on CPU whatever the core count
    print(
        json.dumps(
            run_once(
                device, args.seed, args.sft_steps, args.rounds, args.group, args.weights_out, args.hidden, args.layers
            )
        )
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tiny", action="store_true", help="CPU only, 10 SFT steps, 2 rounds (seconds)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--sft-steps", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--group", type=int, default=8, help="samples per prompt (a GRPO group)")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=64, help="model width (the tiny Llama; 4 heads)")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--mode", help=argparse.SUPPRESS)
    ap.add_argument("--weights-out", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.mode:
        return child(args)
    if args.tiny:
        args.sft_steps, args.rounds, args.group = 10, 2, 4
    modes = ["cpu"] + (["cuda", "cuda-deterministic"] if torch.cuda.is_available() and not args.tiny else [])
    if not torch.cuda.is_available():
        print("no CUDA device: CPU only")
    print(
        f"seed {args.seed}, hidden {args.hidden} x {args.layers} layers, {args.sft_steps} SFT steps, {args.rounds} "
        f"GRPO rounds x {len(TASKS)} prompts x "
        f"{args.group} samples, {args.repeats} repeats per mode, one process each"
    )
    results: dict[str, list[dict]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for mode in modes:
            env = dict(os.environ)
            if mode == "cuda-deterministic":
                env["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"
            for i in range(args.repeats):
                out = Path(tmp) / f"{mode}-{i}.pt"
                cmd = [
                    sys.executable,
                    __file__,
                    "--mode",
                    mode,
                    "--weights-out",
                    str(out),
                    "--seed",
                    str(args.seed),
                    "--sft-steps",
                    str(args.sft_steps),
                    "--rounds",
                    str(args.rounds),
                    "--group",
                    str(args.group),
                    "--hidden",
                    str(args.hidden),
                    "--layers",
                    str(args.layers),
                ]
                proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
                if proc.returncode != 0:
                    raise SystemExit(f"{mode} repeat {i} failed:\n{proc.stderr[-3000:]}")
                results.setdefault(mode, []).append({**json.loads(proc.stdout.strip().splitlines()[-1]), "path": out})
        ref = torch.load(results["cpu"][0]["path"])
        print(
            f"{'mode':<20} {'samples equal':>14} {'weights equal':>14} {'max |dw| repeats':>17} "
            f"{'max |dw| vs cpu':>16} {'s per run':>10}"
        )
        for mode, reps in results.items():
            ws = [torch.load(r["path"]) for r in reps]
            d_rep = max(float((ws[0][k] - w[k]).abs().max()) for w in ws[1:] for k in ref) if len(ws) > 1 else 0.0
            d_cpu = max(float((ws[0][k] - ref[k]).abs().max()) for k in ref)
            same_s = len({r["samples"] for r in reps}) == 1
            same_w = len({r["weights"] for r in reps}) == 1
            secs = sum(r["seconds"] for r in reps) / len(reps)
            print(f"{mode:<20} {str(same_s):>14} {str(same_w):>14} {d_rep:>17.3g} {d_cpu:>16.3g} {secs:>10.2f}")
    bitwise = [m for m, reps in results.items() if len({(r["samples"], r["weights"]) for r in reps}) == 1]
    print(f"bit-identical across repeats: {', '.join(bitwise) or 'none'}")


if __name__ == "__main__":
    main()
