"""Does RL give what supervised training cannot? RL vs an equal-time SFT continuation from one warm start.

Both arms start from the same annealed warm start (planner + actor). The RL arm
runs N GRPO rounds (the demo's round, in-process, no orchestration); the SFT
arm continues cross-entropy training on the same teacher's demonstrations
(at the warm start's final learning rate) for the same wall time. Prints
held-out pass@1 at the sampling temperature and greedy success for the warm
start and both arms, and the differences in points.

    python benchmarks/rl_vs_sft.py                       # warm-starts first (~3 min)
    python benchmarks/rl_vs_sft.py --from runs/demo/checkpoints/warm_start
    python benchmarks/rl_vs_sft.py --seeds 0 1 2         # independent warm starts: mean, sd, per seed
"""

from __future__ import annotations

import argparse
import copy
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from planact.config import load_config  # noqa: E402
from planact.envs.plan_act import PlanActEnv, planner_prompt  # noqa: E402
from planact.envs.synthetic import SyntheticEnv  # noqa: E402
from planact.rl.sft import sft_continuation  # noqa: E402
from planact.role_spec import role_spec, warm_start_demos  # noqa: E402
from planact.rollout import actor_requests, evaluate, score_round  # noqa: E402
from planact.workers import RoleWorker  # noqa: E402

KEYS = ("pass@1", "greedy/success", "greedy/success_but_first")


def heldout(workers, env, cfg) -> dict:
    """Held-out pass@1 (T = the actor's sampling temperature) and greedy success."""
    p, a = workers

    def plan_fn(prompts, t, n):
        return p.generate(prompts, t, n=n, seed=1)

    def act_fn(prompts, t, n):
        return a.generate(prompts, t, n=n, seed=2)

    return evaluate(
        [t.to_dict() for t in env.heldout], plan_fn, act_fn, cfg.actor.sampling.temperature, cfg.tracking.eval_samples
    )


def rl_arm(workers, env, cfg, rounds: int) -> float:
    """N GRPO rounds; returns wall seconds."""
    p, a = workers
    t0 = time.perf_counter()
    for r in range(1, rounds + 1):
        batch = [t.to_dict() for t in env.sample_tasks(r)]
        plans = p.generate([planner_prompt(t) for t in batch], n=cfg.planner.group_size, seed=r)
        answers = a.generate(actor_requests(batch, plans), n=cfg.actor.group_size, seed=r + 1)
        res = score_round(batch, plans, answers, cfg.credit, (cfg.planner.rl.std_normalize, cfg.actor.rl.std_normalize))
        p.train(res.planner_samples)
        a.train(res.actor_samples)
    return time.perf_counter() - t0


def sft_arm(workers, env, cfg, seconds: float, seed: int) -> int:
    """Continue SFT on the teacher's demonstrations for `seconds` (planact.rl.sft.sft_continuation)."""
    rng = random.Random(f"{seed}:sft-continuation")
    demos = {w.role: w.demonstrations(SyntheticEnv(cfg), 8000, rng) for w in workers}
    return sft_continuation(workers, demos, cfg, seconds, seed, chunk=20)


def one_seed(args, seed: int) -> dict[str, dict]:
    """Warm start (or load), then both arms, for one seed; prints that seed's table."""
    root = tempfile.mkdtemp(prefix="planact-rlsft-")
    cfg = load_config(args.config, args.overrides + [f"checkpoint.root={root}", "run_name=rlsft", f"seed={seed}"])
    env = PlanActEnv(cfg.env, cfg.seed)
    base = (RoleWorker(role_spec(cfg, "planner")), RoleWorker(role_spec(cfg, "actor")))
    t0 = time.perf_counter()
    if args.ckpt:
        for w in base:
            w.load_checkpoint(args.ckpt)
    else:
        for w in base:
            w.warm_start(warm_start_demos(SyntheticEnv(cfg), w.role, w.rc.warm_start, cfg.seed), cfg.seed)
    print(f"seed {seed}: warm start ready in {time.perf_counter() - t0:.0f} s", flush=True)
    rl = tuple(copy.deepcopy(w) for w in base)
    sf = tuple(copy.deepcopy(w) for w in base)
    for w in rl:
        w.trainer.snapshot_reference()

    m0 = heldout(base, env, cfg)
    rounds = args.rounds or cfg.rounds
    rl_s = rl_arm(rl, env, cfg, rounds)
    m_rl = heldout(rl, env, cfg)
    steps = sft_arm(sf, env, cfg, rl_s, cfg.seed)
    m_sft = heldout(sf, env, cfg)

    print(
        f"\nseed {seed}. RL: {rounds} GRPO rounds in {rl_s:.0f} s; SFT continuation: {steps} steps in the same "
        f"time (teacher order error {cfg.env.teacher_order_error})"
    )
    print(
        f"{'held-out metric':28s} {'warm start':>10s} {'RL':>8s} {'SFT':>8s} {'RL-ws':>8s} {'SFT-ws':>8s} "
        f"{'RL-SFT':>8s}"
    )
    for key in KEYS:
        a, b, c = m0[key], m_rl[key], m_sft[key]
        print(
            f"{key:28s} {a:10.3f} {b:8.3f} {c:8.3f} {100 * (b - a):+8.1f} {100 * (c - a):+8.1f} {100 * (b - c):+8.1f}"
        )
    n = len(env.heldout)
    print(
        f"(differences in percentage points; {n} held-out tasks: about +-{100 * (0.25 / n) ** 0.5:.1f} points "
        "of sampling noise per figure at most)",
        flush=True,
    )
    return {"warm": m0, "rl": m_rl, "sft": m_sft}


def main() -> None:
    """Run both arms from one warm start per seed and print the comparison, then mean and spread over seeds."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--config", default="configs/demo.yaml")
    ap.add_argument("--rounds", type=int, default=None, help="RL rounds (default: the config's)")
    ap.add_argument("--from", dest="ckpt", default=None, help="a warm-start checkpoint folder to start from (one seed)")
    ap.add_argument(
        "--seeds",
        type=int,
        nargs="+",
        default=None,
        help="independent warm starts (default: the config's seed); mean and spread are printed",
    )
    ap.add_argument("--set", dest="overrides", action="append", default=[])
    args = ap.parse_args()
    torch.set_num_threads(1)
    seeds = args.seeds or [load_config(args.config, args.overrides).seed]
    if args.ckpt and len(seeds) > 1:
        raise SystemExit("--from gives one warm start; independent seeds need their own (drop --from)")
    runs = [one_seed(args, s) for s in seeds]
    if len(runs) < 2:
        return
    print(f"\nover {len(runs)} seeds ({' '.join(map(str, seeds))}): mean (sd) and per seed")
    for key in KEYS:
        for arm in ("warm", "rl", "sft"):
            vals = [r[arm][key] for r in runs]
            print(
                f"{key:28s} {arm:5s} {statistics.fmean(vals):.3f} ({statistics.stdev(vals):.3f})   "
                + " ".join(f"{v:.3f}" for v in vals)
            )
        for a, b in (("rl", "warm"), ("sft", "warm"), ("rl", "sft")):
            diffs = [100 * (r[a][key] - r[b][key]) for r in runs]
            print(
                f"{key:28s} {a}-{b:5s} {statistics.fmean(diffs):+.1f} points (sd {statistics.stdev(diffs):.1f})   "
                + " ".join(f"{d:+.1f}" for d in diffs)
            )


if __name__ == "__main__":
    main()
