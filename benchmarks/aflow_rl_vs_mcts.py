"""Policy-guided AFlow search vs plain AFlow MCTS at the same round budget, over paired seeds.

Offline: the synthetic Plan/Act benchmark, the local planner+actor executor (warm-started once and
cached), the structured-edit optimizer, in one process (no Prefect/Ray: the search itself is measured).
Arms, each run for the same number of rounds per seed:
  mcts          plain AFlow (uniform random edit, AFlow's parent selection)
  policy        GiGPO edit policy trained on the run's own expansions only
  policy+pool   the same, also trained on the earlier seeds' expansions (what the shared experience pool gives)
Prints per seed and on average: best validation score, the round that first reached it, round 1's score.

    python benchmarks/aflow_rl_vs_mcts.py                 # 10 rounds, seeds 0 1 2 (~3 min after the executor)
    python benchmarks/aflow_rl_vs_mcts.py --rounds 15 --seeds 0 1 2 3 4
    python benchmarks/aflow_rl_vs_mcts.py --tiny          # seconds after the executor (the suite runs it)
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
from aflow_rl.search import Search, run_local  # noqa: E402


def best_and_round(history: list[dict]) -> tuple[float, int]:
    """Best score and the first round that reached it."""
    best = max(h["score"] for h in history)
    return best, next(h["round"] for h in history if h["score"] == best)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--root", default="runs", help="where the executor models are cached (runs/aflow-executor)")
    ap.add_argument("--executor", default=None, help="an executor checkpoint folder to use instead of building one")
    ap.add_argument(
        "--limit", type=int, default=None, help="validation problems per evaluation (default: the config's)"
    )
    ap.add_argument(
        "--tiny", action="store_true", help="2 rounds, seeds 0 1, 20 problems (tests: the benchmark cannot rot)"
    )
    args = ap.parse_args()
    if args.tiny:
        args.rounds, args.seeds, args.limit = 2, [0, 1], args.limit or 20
    torch.set_num_threads(1)
    extra = {
        **({"executor": {"checkpoint": args.executor}} if args.executor else {}),
        **({"limit": args.limit} if args.limit else {}),
    }
    work = Path(tempfile.mkdtemp(prefix="aflow-bench-"))
    results: dict[str, list[tuple[float, int, float]]] = {"mcts": [], "policy": [], "policy+pool": []}
    pool_steps: list[dict] = []
    pool_returns: dict[str, float] = {}
    t_start = time.perf_counter()
    for seed in args.seeds:
        for arm in results:
            cfg = AFlowConfig(
                run_name=f"{arm.replace('+', '-')}-s{seed}",
                root=args.root,
                seed=seed,
                workspace=str(work / arm / str(seed) / "workflows"),
                policy={"enabled": arm != "mcts"},
                search={"max_rounds": args.rounds},
                **extra,
            )
            # Each arm keeps its policy under its own run name; remove a stale one from an earlier invocation.
            (cfg.run_dir() / "policy.pt").unlink(missing_ok=True)
            shared = arm == "policy+pool"
            t0 = time.perf_counter()
            hist = run_local(
                cfg,
                log=lambda *_: None,
                other_steps=pool_steps if shared else None,
                other_returns=pool_returns if shared else None,
            )
            best, at = best_and_round(hist)
            results[arm].append((best, at, hist[0]["score"]))
            print(
                f"seed {seed} {arm:12s} best {best:.3f} at round {at:2d}  (round 1 {hist[0]['score']:.3f}; "
                f"{time.perf_counter() - t0:.0f} s)",
                flush=True,
            )
            if shared:
                s = Search(cfg)
                pool_steps += s.experience_steps(cfg.run_name)
                scores = s.ws.scores()
                pool_returns[cfg.run_name] = max(scores.values()) - scores[1]
    print(f"\n{len(args.seeds)} seeds x {args.rounds} rounds per arm ({time.perf_counter() - t_start:.0f} s in all)")
    print(f"{'arm':12s} {'mean best':>10s} {'std':>6s} {'mean rounds-to-best':>20s}  per seed (best@round)")
    base = statistics.fmean(b for b, _, _ in results["mcts"])
    for arm, rows in results.items():
        bests = [b for b, _, _ in rows]
        mean = statistics.fmean(bests)
        print(
            f"{arm:12s} {mean:10.3f} {statistics.pstdev(bests):6.3f} {statistics.fmean(a for _, a, _ in rows):20.1f}  "
            + "  ".join(f"{b:.3f}@{a}" for b, a, _ in rows)
            + ("" if arm == "mcts" else f"   ratio to mcts {mean / base:.2f}" if base else "")
        )
    for arm in ("policy", "policy+pool"):  # paired by seed: the same split, executor and round budget
        diffs = [b - m for (b, _, _), (m, _, _) in zip(results[arm], results["mcts"])]
        spread = statistics.stdev(diffs) if len(diffs) > 1 else 0.0
        better, worse = sum(d > 0 for d in diffs), sum(d < 0 for d in diffs)
        print(
            f"paired {arm} - mcts: mean {statistics.fmean(diffs):+.3f} (sd {spread:.3f}; "
            f"{better} of {len(diffs)} seeds better, {worse} worse; sign test p = {sign_test(better, worse):.3f})"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
