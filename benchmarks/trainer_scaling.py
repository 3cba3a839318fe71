r"""Trainer-group scaling: the same GRPO round trained by N = 1, 2 (...) ranks, data-parallel and FSDP2-sharded.

Each N runs in fresh processes (torch.multiprocessing, one per rank, a gloo or NCCL group on
loopback) on the same model and the same round of samples; it prints tokens/s per N, the ratio to
N = 1 measured in this run, and the largest difference of the updated weights from N = 1's (the
data-parallel step must equal the single-process one). Every N > 1 runs twice: full copies per rank
(`dp`) and sharded with FSDP2 (`fsdp`: each rank holds 1/N of the parameters, gradients and AdamW
state; the gathers and reduce-scatters cost time). On 2 shared CPU cores expect little or no
speed-up: the ranks compete for the same cores; the figure that matters there is the weight difference.

    python benchmarks/trainer_scaling.py                     # CPU, gloo, N = 1 and 2, the demo actor's shape
    python benchmarks/trainer_scaling.py --tiny              # seconds; what the test runs
    python benchmarks/trainer_scaling.py --device cuda --ranks 1   # ~0.5B Llama built locally, bf16 autocast, MFU
    python benchmarks/trainer_scaling.py --device cuda --sweep     # each trainer switch on/off at N = 1, in one run
    python benchmarks/trainer_scaling.py --ranks 1 --switch packed=true --switch attention=varlen
    python benchmarks/trainer_scaling.py --ranks 1 --model planact:smollm2-135m-instruct --length 384 \
        --response-length 24                                     # a pretrained model, repair-like samples

`--sweep` measures the speed switches (the model's SDPA attention; RLConfig: precision bf16, fused_adamw,
micro_batch_tokens, packed with varlen attention, compile) added one at a time at N = 1: tokens/s, ratio to
the plain fp32 step, max |dW| from it, peak memory (GPU: torch's peak allocation; CPU: the rank process's
peak RSS), and on a GPU TFLOP/s and MFU.
"""

from __future__ import annotations

import argparse
import random
import resource
import socket
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402
import yaml  # noqa: E402

from planact.config import RLConfig, TinyModelSpec  # noqa: E402
from planact.rl import data_parallel, fsdp, varlen  # noqa: E402,F401  (varlen: registers the attention)
from planact.rl.data_parallel import DataParallel, backend_for  # noqa: E402
from planact.rl.trainer import RoleTrainer  # noqa: E402

# A Qwen2.5-0.5B-like shape (about 0.5B parameters with its 151k vocabulary), built from a config:
# no weights are downloaded, throughput does not depend on them.
GPU_SPEC = dict(hidden_size=896, num_layers=24, num_heads=14, intermediate_size=4864, vocab=151936)
PEAK_BF16_TFLOPS = {"H100": 989.0, "H200": 989.0, "A100": 312.0}  # dense, per GPU


def build_model(args) -> torch.nn.Module:
    """`--model` loaded, or a Llama of the requested shape built locally (the same seed in every rank)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    if args.model:
        from planact.lora import resolve_base
        from planact.models import load_model

        return load_model(resolve_base(args.model), args.device)[0]

    s = GPU_SPEC if args.device.startswith("cuda") else vars(TinyModelSpec(**args.spec))
    vocab = s.get("vocab", 64)
    cfg = LlamaConfig(
        vocab_size=vocab,
        hidden_size=s["hidden_size"],
        num_hidden_layers=s["num_layers"],
        num_attention_heads=s["num_heads"],
        num_key_value_heads=s["num_heads"],
        intermediate_size=s["intermediate_size"],
        max_position_embeddings=4096,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        attn_implementation="eager",
    )
    torch.manual_seed(0)
    return LlamaForCausalLM(cfg).to(args.device)


def longest_response(args) -> int:
    """The longest response a round's sample can have (--response-length, else --length)."""
    return args.response_length or args.length


def longest(args) -> int:
    """The longest prompt + response a round's sample can have."""
    return args.length + longest_response(args)


def make_round(args, vocab: int) -> list[dict]:
    """One round of GRPO samples with uneven lengths (fixed seed)."""
    # Made-up sampling logprobs: the trainer's sampler/trainer gap check says so on the console every round
    # ("logprob gap ... exceeds"); that line is expected here and measures nothing.
    rng = random.Random(1)
    out = []
    most = longest_response(args)
    for i in range(args.samples):
        p, t = rng.randint(args.length // 4, args.length), rng.randint(most // 4, most)
        out.append(
            {
                "prompt_ids": [rng.randint(3, vocab - 1) for _ in range(p)],
                "token_ids": [rng.randint(3, vocab - 1) for _ in range(t)],
                "logprobs": [-rng.uniform(0.5, 3.0) for _ in range(t)],
                "advantage": rng.choice([-1.0, 1.0]),
                "sample_id": i,
            }
        )
    return out


def run_rank(rank: int, world: int, port: int, args, out, sharded: bool = False) -> None:
    """One rank: build the model, train `steps` rounds, report time, tokens and (rank 0) the weights."""
    torch.set_num_threads(args.threads)
    device = f"cuda:{rank}" if args.device.startswith("cuda") else "cpu"
    args.device = device
    dp = None
    if world > 1:
        data_parallel.join("127.0.0.1", port, rank, world, backend_for(device), 600)
        dp = DataParallel(rank, world, sharded=sharded)
    model = build_model(args)
    params = sum(p.numel() for p in model.parameters())
    if sharded:
        model = fsdp.shard(model, device)
    switches = dict(args.switches)
    # The attention kernel is the model's (resources.attention in a run), not the trainer's.
    model.config._attn_implementation = switches.pop("attention", "eager")
    rl = RLConfig(lr=1e-4, num_minibatches=args.minibatches, **switches)
    trainer = RoleTrainer(model, 0, rl, temperature=1.0)
    samples = make_round(args, model.config.vocab_size)
    trainer.train_step(samples, dp)  # warm-up round (allocations, kernels, a compile), not timed
    if device.startswith("cuda"):
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    for _ in range(args.steps):
        trainer.train_step(samples, dp)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    peak_gib = (
        torch.cuda.max_memory_allocated() / 2**30
        if device.startswith("cuda")
        else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB on Linux
    )
    tokens = args.steps * sum(len(s["prompt_ids"]) + len(s["token_ids"]) for s in samples)  # forward+backward over all
    state = fsdp.gather_full(model, trainer.optimizer)[0] if sharded else model.state_dict()
    weights = {k: v.detach().float().cpu().numpy() for k, v in state.items()} if rank == 0 else None
    if dp is not None:
        data_parallel.leave()
    out.put((rank, dt, tokens, params, weights, peak_gib))


def measure(world: int, args, sharded: bool = False) -> dict:
    """Run one N in fresh processes; wall time is the slowest rank's."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("forkserver")
    # One server imports torch, transformers and the trainer once; each rank process is forked from it
    # (a fresh spawn re-imports them: ~3 s a process, ten processes in the tiny mode alone).
    ctx.set_forkserver_preload(["torch", "transformers", "planact.rl.trainer", "planact.rl.varlen"])
    out = ctx.Queue()
    procs = [ctx.Process(target=run_rank, args=(r, world, port, args, out, sharded)) for r in range(world)]
    for p in procs:
        p.start()
    results = [out.get(timeout=3600) for _ in procs]
    for p in procs:
        p.join()
    dt = max(r[1] for r in results)
    tokens, params = results[0][2], results[0][3]
    weights = next(r[4] for r in results if r[0] == 0)
    return {
        "peak_gib": max(r[5] for r in results),
        "world": world,
        "mode": "fsdp" if sharded else "dp",
        "seconds": dt,
        "tokens_per_s": tokens / dt,
        "params": params,
        "weights": weights,
    }


def main(argv: list[str] | None = None) -> None:
    """Parse arguments, measure each N, print the table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, nargs="+", default=[1, 2], help="N values to measure")
    ap.add_argument("--device", default="cpu", help="cpu (gloo) or cuda (NCCL, one GPU per rank, the 0.5B shape)")
    ap.add_argument("--samples", type=int, default=64, help="samples per round")
    ap.add_argument("--length", type=int, default=48, help="longest prompt (and response) in tokens")
    ap.add_argument("--response-length", type=int, default=0, help="longest response (0 = --length)")
    ap.add_argument(
        "--model", default="", help="a checkpoint folder or planact:<name> (e.g. planact:smollm2-135m-instruct)"
    )
    ap.add_argument("--steps", type=int, default=3, help="timed rounds per N (after one warm-up round)")
    ap.add_argument("--minibatches", type=int, default=2, help="optimizer steps per round")
    ap.add_argument("--threads", type=int, default=1, help="torch threads per rank")
    ap.add_argument(
        "--modes",
        nargs="+",
        choices=["dp", "fsdp"],
        default=["dp", "fsdp"],
        help="how N > 1 ranks train: full copies (dp) and/or FSDP2 shards (fsdp)",
    )
    ap.add_argument("--tiny", action="store_true", help="seconds-long budget (tests)")
    ap.add_argument("--sweep", action="store_true", help="measure each trainer switch at N = 1 (see the docstring)")
    ap.add_argument("--micro-tokens", type=int, default=0, help="--sweep: micro_batch_tokens (0 = samples x length)")
    ap.add_argument(
        "--switch",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an RLConfig field (or attention=sdpa|varlen) for every N, e.g. --switch packed=true "
        "--switch attention=varlen --switch micro_batch_tokens=1024",
    )
    args = ap.parse_args(argv)
    args.switches = {"precision": "bf16"} if args.device.startswith("cuda") else {}
    for item in args.switch:
        key, _, value = item.partition("=")
        args.switches[key] = yaml.safe_load(value)  # true, 1024, sdpa: YAML's scalars, as in a config file
    RLConfig(**{k: v for k, v in args.switches.items() if k != "attention"})  # a bad switch fails here, named
    args.spec = dict(hidden_size=128, num_layers=4, num_heads=4, intermediate_size=384)
    if args.tiny:
        args.samples, args.length, args.steps = 16, 16, 1
        args.spec = dict(hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64)
    if args.sweep:
        args.ranks = [1]  # the sweep measures N = 1 only; the default [1, 2] would ask for a second GPU
    if args.device.startswith("cuda"):
        have = torch.cuda.device_count()
        if have == 0 or max(args.ranks) > have:
            raise SystemExit(f"--device cuda: {max(args.ranks)} GPUs asked for, {have} visible")
    if args.sweep:
        return sweep(args)
    rows = [measure(n, args, mode == "fsdp") for n in args.ranks for mode in (args.modes if n > 1 else ["dp"])]
    base = rows[0]
    print(
        f"trainer scaling on {args.device}: {base['params']:,} parameters, {args.samples} samples of up to "
        f"{longest(args)} tokens, {args.minibatches} minibatches, {args.steps} timed rounds; switches "
        f"{args.switches or 'none'}"
    )
    print(
        f"{'N':>3} {'mode':>5} {'tokens/s':>12} {'ratio to N=' + str(base['world']):>14} "
        f"{'max |dW| vs N=' + str(base['world']):>18}"
    )
    for r in rows:
        print(
            f"{r['world']:>3} {r['mode']:>5} {r['tokens_per_s']:>12.0f} "
            f"{r['tokens_per_s'] / base['tokens_per_s']:>14.2f} {max_diff(r, base):>18.2e}"
        )
    print_mfu(args, [(f"N={r['world']} {r['mode']}", r) for r in rows])


def max_diff(row: dict, base: dict) -> float:
    """Largest difference of the updated weights from the baseline row's."""
    return max(float(abs(row["weights"][k] - base["weights"][k]).max()) for k in base["weights"])


def print_mfu(args, labelled: list[tuple[str, dict]]) -> None:
    """On a GPU: TFLOP/s and MFU of each row (6 x params x tokens/s: forward + backward, no attention term)."""
    if not args.device.startswith("cuda"):
        return
    name = torch.cuda.get_device_name(0)
    peak = next((v for k, v in PEAK_BF16_TFLOPS.items() if k in name), None)
    for label, r in labelled:
        flops = 6 * r["params"] * r["tokens_per_s"]
        mfu = f"{100 * flops / (peak * 1e12 * r['world']):.1f}%" if peak else "unknown peak"
        print(f"{label} on {name}: {flops / 1e12:.1f} TFLOP/s achieved, MFU {mfu}")


def sweep(args) -> None:
    """Each speed switch added in turn, N = 1; one table with the plain fp32 step as the baseline."""
    micro = args.micro_tokens or max(64, args.samples * longest(args) // 4)  # about a quarter of a step
    added = [
        ("fp32", {}),
        ("+sdpa", {"attention": "sdpa"}),
        ("+bf16", {"precision": "bf16"}),
        ("+fused_adamw", {"fused_adamw": True}),
        ("+micro_batches", {"micro_batch_tokens": micro}),
        ("+packed", {"packed": True, "attention": "varlen"}),
        ("+compile", {"compile": True}),
    ]
    steps, on = [], {}
    for name, switch in added:  # each row keeps the switches of the rows above it
        on = {**on, **switch}
        steps.append((name, on))
    if args.tiny:  # the test: no compile (tens of seconds of C++ builds on a CPU), and no separate SDPA row
        # (its equality with eager is a unit test's; +packed still switches the attention, to varlen)
        steps = [(name, on) for name, on in steps if name not in ("+sdpa", "+compile")]
    rows = []
    for name, switches in steps:
        args.switches = switches
        rows.append((name, measure(1, args)))
        # each row as it lands: a run stopped by a time limit still leaves the rows it measured
        print(f"measured {name}: {rows[-1][1]['tokens_per_s']:.0f} tokens/s", file=sys.stderr, flush=True)
    base = rows[0][1]
    print(
        f"trainer switches on {args.device}: {base['params']:,} parameters, {args.samples} samples of up to "
        f"{longest(args)} tokens, {args.minibatches} minibatches, {args.steps} timed rounds; micro-batches of "
        f"{micro} tokens"
    )
    print(f"{'switches':<16} {'tokens/s':>10} {'ratio to fp32':>14} {'max |dW| vs fp32':>17} {'peak GiB':>9}")
    for name, r in rows:
        print(
            f"{name:<16} {r['tokens_per_s']:>10.0f} {r['tokens_per_s'] / base['tokens_per_s']:>14.2f} "
            f"{max_diff(r, base):>17.2e} {r['peak_gib']:>9.2f}"
        )
    print_mfu(args, rows)


if __name__ == "__main__":
    main()
