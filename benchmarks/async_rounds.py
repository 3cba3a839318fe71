"""Pipelined rounds: the demo synchronous and with staleness 1, from one warm start, in one run.

Both arms are the real training flow (`python -m flows.plan_act`, one CLI run each, same seed) starting
from the same warm-start weights, with the same number of rounds and one held-out evaluation at the
end. The synchronous arm is the default layout (trainer colocated in engine replica 0, which spares the
weight copy); the staleness-1 arm gives each trained role its own trainer actor (pipelining needs that),
so that round t+1 generates while round t trains. Prints rounds/hour (from the rounds' wall time, the
warm start and final evaluation excluded), held-out pass@1 and greedy success of both (code repair: the
team's solve rate at budget 1 on unseen packages and on unseen functions), the staleness the
pipelined trainers saw, the overlap bound for the synchronous arm's round shape, and a last line
`speedup X.XXx; held-out pass@1 sync A, staleness-1 B`.

The bound: a synchronous round of T seconds of which Tr train can at best become max(T - Tr, Tr) when
training overlaps everything else, so staleness 1 can gain at most T / max(T - Tr, Tr); the benchmark
prints that bound, the share of it the pipelined arm reached (speedup / bound) and the share of the
possible gain ((speedup - 1) / (bound - 1), which a round with little training cannot flatter). Overlap
needs idle cores too: a round that kept the machine's cores busy for C CPU-seconds cannot take less than
C / cores, so the benchmark also prints that CPU bound (cores x round / C, from the rounds'
`time/host_cpu_s`, every process of the machine: run it on a quiet one) and the share of the tighter
of the two bounds reached.

    python benchmarks/async_rounds.py --from runs/demo/checkpoints/warm_start     # the demo's 60 rounds
    python benchmarks/async_rounds.py                                              # warm-starts first (~8 min)
    python benchmarks/async_rounds.py --quick                                      # smoke config, 2 rounds (the test)
    python benchmarks/async_rounds.py --config configs/repair-smollm.yaml --own-warm-start   # real-model repair
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# The pipelined arm: separate trainer actors, and 0.4 CPU per actor so that four actors leave Ray room for
# the flow's tasks on a 2-CPU machine (the synchronous arm's two actors reserve 0.5 each).
PIPELINED = [
    "pipeline.max_staleness=1",
    "planner.resources.colocate_trainer=false",
    "actor.resources.colocate_trainer=false",
    "planner.resources.num_cpus=0.4",
    "actor.resources.num_cpus=0.4",
]


# The held-out figures each arm is judged by: the synthetic task's pass@1 and greedy success, or code
# repair's team solve rate at budget 1 on unseen packages and unseen functions.
QUALITY = (("pass@1", "greedy/success"), ("unseen_packages/team/solve_at_1", "unseen_functions/team/solve_at_1"))


def quality_keys(summary: dict) -> tuple[str, str]:
    """The pair of QUALITY the run's summary holds."""
    for pair in QUALITY:
        if f"final/{pair[0]}" in summary:
            return pair
    raise SystemExit(f"no held-out figure of {QUALITY} in the run's summary: {sorted(summary)}")


def run_flow(config: str, overrides: list[str], log: Path) -> float:
    """One training-flow CLI run; returns its wall seconds (its console goes to `log`)."""
    args = [sys.executable, "-m", "flows.plan_act", "--config", config]
    for o in overrides:
        args += ["--set", o]
    t0 = time.perf_counter()
    with open(log, "w") as f:
        rc = subprocess.run(args, cwd=REPO, stdout=f, stderr=subprocess.STDOUT).returncode
    if rc != 0:
        raise SystemExit(f"{' '.join(args)} failed ({rc}); its output: {log}\n{log.read_text()[-3000:]}")
    return time.perf_counter() - t0


def arm_figures(run_dir: Path, tracking_uri: str) -> dict:
    """Rounds/hour, held-out figures and the staleness the trainers saw, from the run's folder and MLflow."""
    import mlflow

    state = json.loads((run_dir / "state.json").read_text())
    summary = json.loads((run_dir / "summary.json").read_text())
    seconds = sum(row["time/round_s"] for row in state["table"] if row.get("time/round_s") is not None)
    rounds = len(state["table"])
    client = mlflow.MlflowClient(tracking_uri)
    run = client.search_runs(
        [client.get_experiment_by_name("async-rounds").experiment_id], f"tags.mlflow.runName = '{run_dir.name}'"
    )[0]
    stages = {}
    for key in ("time/round_s", "time/train_s", "time/host_cpu_s"):
        hist = client.get_metric_history(run.info.run_id, key)
        stages[key] = sum(m.value for m in hist) / max(1, len(hist))
    seen = {}
    for role in ("planner", "actor"):
        hist = client.get_metric_history(run.info.run_id, f"{role}/staleness_max")
        seen[role] = max((m.value for m in hist), default=0.0)
    first, second = quality_keys(summary)
    return {
        "rounds": rounds,
        "seconds": seconds,
        "rounds_per_hour": 3600.0 * rounds / seconds,
        "quality": (first, second),
        "held_a": summary.get(f"final/{first}"),
        "held_b": summary.get(f"final/{second}"),
        "warm_held_a": summary.get(f"warm_start/{first}"),
        "staleness_max": seen,
        "round_s": stages["time/round_s"],
        "train_s": stages["time/train_s"],
        "host_cpu_s": stages["time/host_cpu_s"],
    }


def overlap_bound(round_s: float, train_s: float) -> float:
    """The most staleness 1 can speed up a round of `round_s` seconds whose training takes `train_s`."""
    return round_s / max(round_s - train_s, train_s, 1e-9)


def cpu_bound(round_s: float, host_cpu_s: float, cores: int) -> float:
    """The most any overlap can speed up a round that kept the machine busy for `host_cpu_s` CPU-seconds in
    `round_s` seconds: it cannot take less than host_cpu_s / cores."""
    return cores * round_s / max(host_cpu_s, 1e-9)


def main() -> None:
    """Run both arms, print their figures and the speedup line."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--config", default="configs/demo.yaml")
    ap.add_argument("--rounds", type=int, default=None, help="rounds per arm (default: the config's)")
    ap.add_argument(
        "--from",
        dest="ckpt",
        default=None,
        help="warm-start checkpoint folder (holding planner/ and actor/); without it one is trained first",
    )
    ap.add_argument("--set", dest="overrides", action="append", default=[])
    ap.add_argument(
        "--own-warm-start",
        action="store_true",
        help="each arm runs the config's warm start itself (same seed, same weights; a LoRA warm start cannot "
        "be handed over with --from); rounds/hour counts the rounds only either way",
    )
    ap.add_argument(
        "--quick", action="store_true", help="smoke config, 2 rounds per arm, each arm its own seconds-long warm start"
    )
    args = ap.parse_args()
    if args.quick:
        args.config, args.rounds, args.own_warm_start = "configs/smoke.yaml", args.rounds or 2, True
    root = Path(tempfile.mkdtemp(prefix="planact-async-"))
    uri = f"sqlite:///{root / 'mlflow.db'}"
    common = [
        f"checkpoint.root={root}",
        f"tracking.tracking_uri={uri}",
        "tracking.experiment=async-rounds",
        "tracking.register_models=false",
        *args.overrides,
    ]
    from planact.config import load_config

    rounds = args.rounds if args.rounds is not None else load_config(args.config, args.overrides).rounds
    start = [f"rounds={rounds}", f"tracking.eval_every={rounds}"]  # one held-out evaluation, at the end
    ckpt = Path(args.ckpt).resolve() if args.ckpt else None
    if ckpt is None and not args.own_warm_start:
        t = run_flow(args.config, [*common, "run_name=warm", "rounds=0"], root / "warm.log")
        ckpt = root / "warm" / "checkpoints" / "warm_start"
        print(f"warm start trained in {t:.0f} s: {ckpt}")
    if ckpt is not None:
        start += [
            f"planner.model_path={ckpt / 'planner'}",
            f"actor.model_path={ckpt / 'actor'}",
            "planner.warm_start.enabled=false",
            "actor.warm_start.enabled=false",
        ]
    # (--own-warm-start, --quick: each arm runs the config's warm start itself; same seed, same weights.)
    figures = {}
    for name, extra in (("sync", []), ("staleness-1", PIPELINED)):
        run_flow(args.config, [*common, *start, *extra, f"run_name={name}"], root / f"{name}.log")
        figures[name] = arm_figures(root / name, uri)
    print(f"{rounds} rounds per arm from one warm start ({ckpt or 'the same seed'}); config {args.config}")
    first, second = figures["sync"]["quality"]
    if first != "pass@1":
        print(f"held-out columns: A = {first}, B = {second}")
    a, b = ("pass@1", "greedy") if first == "pass@1" else ("A", "B")
    print(f"{'arm':<12} {'rounds/h':>9} {'s/round':>8} {a:>7} {b:>7}  staleness seen (max)")
    for name, f in figures.items():
        print(
            f"{name:<12} {f['rounds_per_hour']:>9.0f} {f['seconds'] / f['rounds']:>8.2f} {f['held_a']:>7.3f} "
            f"{f['held_b']:>7.3f}  planner {f['staleness_max']['planner']:.0f}, actor {f['staleness_max']['actor']:.0f}"
        )
    sync, stale = figures["sync"], figures["staleness-1"]
    print(f"warm start held-out {first} (both arms): {sync['warm_held_a']:.3f}")
    speedup, bound = stale["rounds_per_hour"] / sync["rounds_per_hour"], overlap_bound(sync["round_s"], sync["train_s"])
    print(
        f"overlap bound {bound:.2f}x for the synchronous round shape (training {sync['train_s']:.2f} of "
        f"{sync['round_s']:.2f} s/round); the pipelined arm reached {100 * speedup / bound:.0f}% of it"
    )
    cores = os.cpu_count() or 1
    cpu = cpu_bound(sync["round_s"], sync["host_cpu_s"], cores)
    tight = min(bound, cpu)
    print(
        f"CPU bound {cpu:.2f}x: the synchronous round kept {sync['host_cpu_s'] / (cores * sync['round_s']):.0%} "
        f"of {cores} cores busy ({sync['host_cpu_s']:.2f} CPU-s per {sync['round_s']:.2f} s round, every process "
        f"of the machine); the tighter bound {tight:.2f}x, reached {100 * speedup / tight:.0f}%"
    )
    # speedup / bound flatters a round whose training is a small share (a bound of 1.1 gives 91% for no gain
    # at all); the share of the possible gain says what overlapping actually bought
    gain = (speedup - 1.0) / (bound - 1.0) if bound > 1.0 + 1e-9 else float("nan")
    print(f"share of the possible gain reached: {100 * gain:.0f}% ((speedup - 1) / (bound - 1))")
    print(f"speedup {speedup:.2f}x; held-out {first} sync {sync['held_a']:.3f}, staleness-1 {stale['held_a']:.3f}")
    print(f"runs, logs and MLflow db under {root}")


if __name__ == "__main__":
    main()
