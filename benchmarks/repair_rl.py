"""Plan/Act RL on code repair vs its honest controls, over several seeds.

Per seed: one warm start (planner on the imperfect teacher's localisation, actor on true inverse edits
plus unvalidated mutants); from it an RL arm (N rounds of the repair round in-process: multi-turn
planner with GiGPO, constrained actor with GRPO, rewards from the packages' tests) and an SFT arm that
continues supervised training on the same demonstrations for the same wall time. Then every system is
evaluated on unseen functions of the training packages and on unseen packages at test budgets 1 and 2
(Submits per task): warm start, RL, SFT, the rule agent and a random candidate of the rule agent's
top function. Prints each seed, then mean and spread, and the differences in points.

    python benchmarks/repair_rl.py --seeds 0 1 2          # the measurement (~100 min per seed on 2 cores)
    python benchmarks/repair_rl.py --seeds 0 --set actor.warm_start.patience=0 --set actor.warm_start.steps=450
                                                          # the demo's short actor warm start (~25 min)
    python benchmarks/repair_rl.py --tiny --set env.repair.corpus=...   # the smoke mode the tests run
    python benchmarks/repair_rl.py --config configs/repair-smollm.yaml --seeds 0 1 2
                                                          # SmolLM2 + LoRA: "warm" is its zero-shot start
    python benchmarks/repair_rl.py --merge s0.json s1.json s2.json   # seeds run side by side (--seeds N --json sN.json)
    python benchmarks/repair_rl.py --config configs/repair-smollm.yaml --no-teacher --rounds 24 --seeds 0 1 2 \
        --set planner.group_size=4 --set planner.rl.lr=1.0e-3 --set planner.rl.micro_batch_tokens=2048
                                                          # RL with no teacher: see NO_TEACHER (the measured
                                                          # settings; three seeds side by side, one per
                                                          # process with --seeds N --json sN.json, peak ~7 GiB each)
"""

from __future__ import annotations

import argparse
import copy
import json
import random
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from planact.config import load_config  # noqa: E402
from planact.envs.base import evaluate, make_env  # noqa: E402
from planact.progress import PhasePrinter  # noqa: E402
from planact.rl.sft import sft_continuation  # noqa: E402
from planact.role_spec import role_spec, warm_start_demos  # noqa: E402
from planact.workers import RoleWorker  # noqa: E402

# 'real': the release-history fixes, evaluated when --set env.repair.eval_real_corpus=runs/corpus-real is given
SPLITS = ("unseen_functions", "unseen_packages", "unseen_2025", "real")
# A measurement evaluates every held-out task (the demo config caps its evaluations to fit its time budget);
# a --set on the command line still overrides this and PLATEAU.
WHOLE_SPLITS = [f"env.repair.eval_{s}=100000" for s in SPLITS]
# The actor's warm start trains to its plateau (until the held-out demonstration loss has not improved for
# 3 evaluations 250 steps apart; the best weights are kept): RL must beat a warm start that imitation alone
# cannot improve. On 2 cores that is ~3,000-4,000 steps, ~90 min a seed; the demo's 450 steps stop far
# short of it (final loss ~2.0). The planner's warm start stays short on purpose: imitating its imperfect
# teacher to certainty would leave RL's group of plans nothing to compare, and the SFT arm continues it.
PLATEAU = ["actor.warm_start.steps=6000", "actor.warm_start.patience=3", "actor.warm_start.eval_every=250"]
# --no-teacher: the planner starts zero-shot (no warm start, so no teacher's labels) and learns localisation from
# the repair reward alone (GiGPO on its turns), the patch model fixed. No SFT arm: there are no labels to imitate,
# so zero-shot vs after RL is the whole comparison. Meant for a pretrained planner (configs/repair-smollm.yaml);
# a tiny planner zero-shot names functions at random.
# A frozen role serves no adapter (a LoRA adapter at its start leaves the model's outputs unchanged anyway).
NO_TEACHER = [
    "planner.warm_start.enabled=false",
    "actor.warm_start.enabled=false",
    "actor.train=false",
    "actor.lora.enabled=false",
]


def rl_arm(workers, env, rounds: int) -> tuple[float, list[dict]]:
    """N repair rounds in-process (the flow's round without orchestration); returns wall seconds and metrics."""
    p, a = workers
    t0, log = time.perf_counter(), []
    for r in range(1, rounds + 1):
        batch = env.sample_tasks(r)
        plans = env.plan(batch, p, seed=r)
        answers = a.choose(env.actor_requests(batch, plans), n=env.cfg.actor.group_size, seed=r + 1)
        res = env.score(batch, plans, answers)
        for w, samples in ((p, res.planner_samples), (a, res.actor_samples)):
            if w.rc.train:  # a frozen role (--no-teacher's patch model) samples but never updates
                res.metrics.update({f"{w.role}/{k}": v for k, v in w.train(samples).items()})
        log.append(res.metrics)
        # a round takes minutes on 2 cores: say where the arm is, so a long run never looks hung
        spent = time.perf_counter() - t0
        m, eta = res.metrics, spent / r * (rounds - r)
        print(
            f"  RL round {r}/{rounds}: success {m.get('success', 0.0):.2f}, planner target correct "
            f"{m.get('planner/target_correct', 0.0):.2f}, {spent:.0f} s, ETA {eta:.0f} s",
            flush=True,
        )
    return time.perf_counter() - t0, log


def sft_arm(workers, env, cfg, seconds: float, seed: int) -> int:
    """Continue SFT on the teacher's demonstrations for `seconds` (planact.rl.sft.sft_continuation)."""
    rng = random.Random(f"{seed}:sft-continuation")
    demos = {w.role: w.demonstrations(env, 8000, rng) for w in workers}
    return sft_continuation(workers, demos, cfg, seconds, seed, chunk=10)


def plateau(curve: list[dict]) -> dict:
    """Where a warm start with patience stopped: last step, the step whose weights it kept, their held-out loss."""
    kept = [p["best_heldout_loss"] for p in curve if "best_heldout_loss" in p]
    if not kept:
        return {}
    step = next(p["step"] for p in curve if p.get("heldout_loss") == kept[0])
    return {"stopped": curve[-1]["step"], "kept": step, "heldout_loss": kept[0]}


def one_seed(args, seed: int) -> dict:
    """Warm start, both arms and every evaluation for one seed."""
    root = tempfile.mkdtemp(prefix="planact-repair-rl-")
    measurement = [] if args.tiny else WHOLE_SPLITS + PLATEAU
    measurement += NO_TEACHER if args.no_teacher else []
    cfg = load_config(
        args.config, measurement + args.overrides + [f"checkpoint.root={root}", f"run_name=seed{seed}", f"seed={seed}"]
    )
    # The localisation contexts and each held-out evaluation take minutes: they print k of n with an ETA.
    show = PhasePrinter()
    env = make_env(cfg, progress=show)
    t0 = time.perf_counter()
    base = (RoleWorker(role_spec(cfg, "planner")), RoleWorker(role_spec(cfg, "actor")))
    # A pretrained role without a warm start (configs/repair-smollm.yaml) starts zero-shot: "warm" is then that.
    curves = {
        w.role: w.warm_start(warm_start_demos(env, w.role, w.rc.warm_start, seed), seed)
        for w in base
        if w.rc.warm_start.enabled
    }
    ws_s = time.perf_counter() - t0
    # A deep-copied torch optimizer drops the LR scheduler's wrapper of its step() (Optimizer.__setstate__
    # keeps only its state), so the copy steps its own parameters and the copied scheduler its own
    # optimizer, but torch warns on every scheduler step that step() was "overridden": noise, silenced.
    warnings.filterwarnings("ignore", message=r"Seems like `optimizer.step\(\)` has been overridden")
    # The SFT arm starts from a copy; the RL arm trains the warm-started workers themselves (a third copy of a
    # pretrained team would cost ~2.7 GB for nothing: the warm start is evaluated before either arm trains).
    # --no-teacher has no SFT arm, so no copy.
    sf = () if args.no_teacher else tuple(copy.deepcopy(w) for w in base)
    rl = base
    out = {
        "seed": seed,
        "warm_start_s": ws_s,
        "warm_start_loss": {r: [p for p in c if "loss" in p][-1]["loss"] for r, c in curves.items()},
        "warm_start_plateau": {r: stop for r, c in curves.items() if (stop := plateau(c))},
    }
    out["warm"] = evaluate(env, *base, progress=show)
    _progress(seed, "zero-shot" if args.no_teacher else f"warm start {ws_s:.0f} s", out["warm"])
    out["rl_s"], out["rl_log"] = rl_arm(rl, env, args.rounds or cfg.rounds)
    out["rl"] = evaluate(env, *rl, progress=show)
    _progress(seed, f"RL {out['rl_s']:.0f} s", out["rl"])
    out["tasks"] = {s: out["warm"].get(f"{s}/tasks", 0.0) for s in SPLITS}
    if args.no_teacher:
        return out
    t_sft = time.perf_counter()
    out["sft_steps"] = sft_arm(sf, env, cfg, out["rl_s"], seed)
    out["sft_s"] = time.perf_counter() - t_sft
    out["sft"] = evaluate(env, *sf, progress=show)
    _progress(seed, f"SFT {out['sft_steps']} steps", out["sft"])
    return out


def _progress(seed: int, what: str, m: dict) -> None:
    print(
        f"seed {seed}: {what}; team solve@1 "
        + ", ".join(f"{s} {m[f'{s}/team/solve_at_1']:.3f}" for s in SPLITS if f"{s}/team/solve_at_1" in m)
        + f" (localised {m.get('unseen_functions/team/localised', 0):.2f})",
        flush=True,
    )


def _stat(xs: list[float]) -> str:
    mean = statistics.fmean(xs)
    spread = statistics.stdev(xs) if len(xs) > 1 else 0.0
    return f"{mean:.3f} +- {spread:.3f}"


def report_no_teacher(runs: list[dict]) -> None:
    """Per seed, then mean +- std: the share of held-out tasks whose buggy function the team named, and the
    solve rate at budget 1, zero-shot and after RL."""
    for split in SPLITS:
        if not all(r["tasks"].get(split, 0) for r in runs):
            continue
        figs = {
            (a, m): [r[a][f"{split}/team/{m}"] for r in runs]
            for a in ("warm", "rl")
            for m in ("localised", "solve_at_1")
        }
        print(f"  {split} ({int(runs[0]['tasks'][split])} tasks):")
        for r in runs:
            print(
                f"    seed {r['seed']}: localised zero-shot {r['warm'][f'{split}/team/localised']:.3f} -> RL "
                f"{r['rl'][f'{split}/team/localised']:.3f}; solve@1 {r['warm'][f'{split}/team/solve_at_1']:.3f} -> "
                f"{r['rl'][f'{split}/team/solve_at_1']:.3f} (rule {r['warm'][f'{split}/rule/solve_at_1']:.3f})"
            )
        for m in ("localised", "solve_at_1"):
            zero, rl = figs[("warm", m)], figs[("rl", m)]
            gain = [100 * (a - b) for a, b in zip(rl, zero)]
            print(
                f"    {m:10s} zero-shot {_stat(zero)}  RL {_stat(rl)}  RL - zero-shot {statistics.fmean(gain):+.1f} "
                f"points (per seed: {', '.join(f'{g:+.1f}' for g in gain)})"
            )


def report(runs: list[dict], budget: int) -> None:
    """Per-seed lines, then mean +- std over seeds and the differences the targets are stated in."""
    if all("sft" not in r for r in runs):  # --no-teacher: no warm start and no SFT control by design
        print(f"\nRL with no teacher, {len(runs)} seed(s), {len(runs[0]['rl_log'])} rounds, mean +- std over seeds:")
        report_no_teacher(runs)
        return
    for r in runs:
        print(
            f"\nseed {r['seed']}: warm start {r['warm_start_s']:.0f} s (final losses "
            + ", ".join(f"{k} {v:.3f}" for k, v in r["warm_start_loss"].items())
            + "".join(
                f"; {k} stopped at step {v['stopped']}, kept step {v['kept']} (held-out loss {v['heldout_loss']:.3f})"
                for k, v in r.get("warm_start_plateau", {}).items()
            )
            + f"); RL {r['rl_s']:.0f} s; SFT continuation {r['sft_steps']} steps in the same time"
            + (f" ({r['sft_s']:.0f} s)" if "sft_s" in r else "")
        )
        for split in SPLITS:
            if not r["tasks"].get(split, 0):
                continue
            cells = []
            for b in range(1, budget + 1):
                row = {
                    name: r[arm].get(f"{split}/{sys_}/solve_at_{b}", float("nan"))
                    for name, arm, sys_ in (
                        ("warm", "warm", "team"),
                        ("RL", "rl", "team"),
                        ("SFT", "sft", "team"),
                        ("rule", "warm", "rule"),
                        ("random", "warm", "random"),
                    )
                }
                cells.append(f"budget {b}: " + " ".join(f"{k} {v:.3f}" for k, v in row.items()))
            print(f"  {split} ({int(r['tasks'][split])} tasks): " + " | ".join(cells))
    print(f"\nmean +- std over {len(runs)} seed(s), budget 1:")
    for split in SPLITS:
        if not all(r["tasks"].get(split, 0) for r in runs):
            continue
        key = f"{split}/team/solve_at_1"
        warm, rl, sf = ([r[a][key] for r in runs] for a in ("warm", "rl", "sft"))
        rule = [r["warm"][f"{split}/rule/solve_at_1"] for r in runs]
        rnd = [r["warm"][f"{split}/random/solve_at_1"] for r in runs]
        print(
            f"  {split:17s} warm {_stat(warm)}  RL {_stat(rl)}  SFT {_stat(sf)}  rule {_stat(rule)}  random "
            f"{_stat(rnd)}"
        )
        print(
            f"  {'':17s} RL - warm {100 * statistics.fmean(a - b for a, b in zip(rl, warm)):+.1f} points, "
            f"RL - SFT {100 * statistics.fmean(a - b for a, b in zip(rl, sf)):+.1f}, "
            f"RL - rule {100 * statistics.fmean(a - b for a, b in zip(rl, rule)):+.1f}"
        )


def budget_of(runs: list[dict]) -> int:
    """The largest test budget the runs were evaluated at (from their own figures, not a config re-read)."""
    return max(int(k.rsplit("_", 1)[1]) for k in runs[0]["warm"] if "/solve_at_" in k)


def main() -> None:
    """Run every seed and print the comparison."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", default="configs/repair-demo.yaml")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--rounds", type=int, default=None, help="RL rounds (default: the config's)")
    ap.add_argument("--tiny", action="store_true", help="smoke mode: the smoke config, one seed, one round")
    ap.add_argument("--json", default=None, help="also write every figure to this file")
    ap.add_argument("--set", dest="overrides", action="append", default=[])
    ap.add_argument(
        "--no-teacher",
        action="store_true",
        help="no warm start and no SFT arm: the planner learns from the reward alone, the patch model fixed",
    )
    ap.add_argument(
        "--merge",
        nargs="+",
        default=None,
        metavar="JSON",
        help="run nothing: print the comparison over the seeds of these --json files (seeds run as separate processes)",
    )
    args = ap.parse_args()
    if args.merge:
        runs = [r for f in args.merge for r in json.loads(Path(f).read_text())]
        report(runs, budget_of(runs))
        return
    if args.tiny:
        args.config, args.seeds, args.rounds = "configs/repair-smoke.yaml", args.seeds[:1], 1
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    runs = []
    for s in args.seeds:
        runs.append(one_seed(args, s))
        if args.json:  # written after every seed, before anything else can fail: an hour of figures is not lost
            Path(args.json).write_text(json.dumps(runs, indent=1, default=str))
    report(runs, budget_of(runs))
    print(
        f"\n(total {time.perf_counter() - t0:.0f} s; test budget = Submits per task, each running FAIL_TO_PASS + "
        "PASS_TO_PASS; differences in percentage points)"
    )


if __name__ == "__main__":
    main()
