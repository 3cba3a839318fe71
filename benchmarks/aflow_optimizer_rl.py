"""The AFlow optimizer model trained with RL vs the same model untrained, the edit policy and plain MCTS.

Offline: the synthetic Plan/Act benchmark (the local Plan/Act pair executes it) and, with `--benchmarks
planact humaneval`, HumanEval too (the local candidate coder executes it), the structured edit space.
The optimizer model (aflow_rl.optimizer_rl) is trained for N iterations on searches with training
seeds, one model for every benchmark named; then every arm runs one search per benchmark and held-out
seed at the same round budget:
  trained     the trained optimizer model choosing the edits
  untrained   the same model before training (same initialisation, same tokenizer)
  policy      the GiGPO edit policy trained on the search's own expansions (aflow_rl_vs_mcts.py's arm)
  mcts        plain AFlow (uniform random edit)
Prints, per benchmark, per seed and on average the best validation score, then paired differences
against the untrained model and MCTS with an exact sign test.

    python benchmarks/aflow_optimizer_rl.py                          # 10 iterations, 10 held-out seeds
    python benchmarks/aflow_optimizer_rl.py --benchmarks planact humaneval   # one optimizer, two benchmarks
    python benchmarks/aflow_optimizer_rl.py --tiny [--benchmarks planact humaneval]   # a minute or two (tests)
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
from stats import sign_test  # noqa: E402  (benchmarks/stats.py: this script's folder is on sys.path)

from aflow_rl.config import AFlowConfig  # noqa: E402
from aflow_rl.optimizer_rl import OptimizerModel, run_searches, train_iteration  # noqa: E402
from aflow_rl.search import run_local  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iterations", type=int, default=10)
    ap.add_argument("--searches", type=int, default=4, help="searches per training iteration")
    ap.add_argument("--rounds", type=int, default=6, help="round budget of every search (round 1 included)")
    ap.add_argument("--seeds", type=int, default=10, help="held-out seeds (paired across arms)")
    ap.add_argument("--limit", type=int, default=None, help="validation problems per evaluation (30; --tiny: 20)")
    ap.add_argument("--executor", default=None, help="an executor checkpoint folder to use instead of building one")
    ap.add_argument("--root", default=None, help="where runs are written (default: a temporary folder)")
    ap.add_argument(
        "--benchmarks",
        nargs="+",
        default=["planact", "humaneval"],
        choices=["planact", "humaneval"],
        help="benchmarks the one optimizer trains and is evaluated on",
    )
    ap.add_argument("--seed", type=int, default=42, help="run seed: the optimizer's initialisation and training seeds")
    ap.add_argument(
        "--scoring",
        choices=["sum", "mean"],
        default="mean",
        help="how the optimizer model scores an edit line: summed or mean token log-probability",
    )
    ap.add_argument("--tiny", action="store_true", help="1 iteration of 2 searches, 3 rounds, 2 seeds (tests)")
    args = ap.parse_args()
    if args.tiny:  # an explicit --limit still applies, as in aflow_rl_vs_mcts.py
        args.iterations, args.searches, args.rounds, args.seeds = 1, 2, 3, 2
    args.limit = args.limit or (20 if args.tiny else 30)
    code_timeout = 5.0 if args.tiny else 15.0  # a mutant that loops forever costs this once per process
    torch.set_num_threads(1)
    root = args.root or tempfile.mkdtemp(prefix="aflow-optrl-")
    cfg = AFlowConfig(
        run_name="optrl",
        root=root,
        limit=args.limit,
        code_timeout_s=code_timeout,
        seed=args.seed,
        search={"max_rounds": args.rounds, "validation_repeats": 1},
        optimizer_rl={
            "iterations": args.iterations,
            "searches": args.searches,
            "benchmarks": args.benchmarks,
            "scoring": args.scoring,
        },
        **({"executor": {"checkpoint": args.executor}} if args.executor else {}),
    )
    t0 = time.perf_counter()
    untrained = OptimizerModel(cfg.optimizer_rl, args.benchmarks, cfg.seed)
    trained = OptimizerModel(cfg.optimizer_rl, args.benchmarks, cfg.seed)
    for it in range(1, args.iterations + 1):
        f = train_iteration(cfg, trained, it)
        print(
            f"iteration {it}: "
            + "; ".join(
                f"{b} mean best {f[f'{b}/best']:.3f}, outcome {f[f'{b}/outcome']:+.3f}" for b in args.benchmarks
            )
            + f" ({int(f['transitions'])} steps, {int(f['invalid'])} invalid)",
            flush=True,
        )
    print(f"trained in {time.perf_counter() - t0:.0f} s")

    heldout = list(range(10**6, 10**6 + args.seeds))  # training seeds are hashes mod 1e9: a clash is ~1e-8 likely
    best: dict[tuple[str, str], list[float]] = {}
    for arm, model in (("trained", trained), ("untrained", untrained)):
        trans = run_searches(cfg, model, heldout, f"eval-{arm}")
        by_search = {tr["search"]: tr["best"] for tr in trans if tr["best"] is not None}
        for b in args.benchmarks:
            best[b, arm] = [by_search[f"{b}-s{s}"] for s in heldout]
    for b in args.benchmarks:
        for arm in ("policy", "mcts"):
            best[b, arm] = []
            for s in heldout:
                c = cfg.model_copy(
                    update={
                        "run_name": f"optrl-{arm}-{b}-s{s}",
                        "seed": s,
                        "benchmark": b,
                        "policy": cfg.policy.model_copy(update={"enabled": arm == "policy"}),
                    }
                )
                best[b, arm].append(max(h["score"] for h in run_local(c, log=lambda *_: None)))

    print(f"\n{args.seeds} held-out seeds x {args.rounds} rounds per arm ({time.perf_counter() - t0:.0f} s in all)")
    for b in args.benchmarks:
        print(f"\n{b}\n{'arm':10s} {'mean best':>10s} {'std':>6s}  per seed")
        for arm in ("trained", "untrained", "policy", "mcts"):
            vals = best[b, arm]
            print(
                f"{arm:10s} {statistics.fmean(vals):10.3f} {statistics.pstdev(vals):6.3f}  "
                + " ".join(f"{v:.3f}" for v in vals)
            )
        for base in ("untrained", "mcts"):
            diffs = [x - y for x, y in zip(best[b, "trained"], best[b, base])]
            better, worse = sum(d > 0 for d in diffs), sum(d < 0 for d in diffs)
            base_mean = statistics.fmean(best[b, base])
            rel = f"{100 * (statistics.fmean(best[b, 'trained']) / base_mean - 1):+.1f}%" if base_mean else "n/a"
            print(
                f"{b}: paired trained - {base}: mean {statistics.fmean(diffs):+.3f} ({rel} relative; "
                f"{better} of {len(diffs)} seeds better, {worse} worse; sign test p = {sign_test(better, worse):.3f})"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
