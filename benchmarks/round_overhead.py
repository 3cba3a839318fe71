"""What orchestration costs: the same N Plan/Act rounds through the Prefect flow and through a plain loop.

Both run the one round implementation (flows/rounds.py): as named task runs of a flow on Ray, and as plain
calls in this process (`play_round(..., plain=True)`). Both drive the same named Ray actors (same models,
same batch sizes, same seeds and barrier), in alternating blocks of rounds
so that both sides are timed on the same stretch of training. Prints
seconds per round for each and the ratio flow/loop, measured in this run.

    python benchmarks/round_overhead.py --rounds 16 --from runs/demo/checkpoints/warm_start
    python benchmarks/round_overhead.py --tiny          # smoke-sized rounds, one timed round each (the test)
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import psutil  # noqa: E402
from prefect import flow  # noqa: E402

from flows import runtime  # noqa: E402
from flows.rounds import play_round  # noqa: E402
from planact.config import load_config  # noqa: E402
from planact.session import TrainingSession  # noqa: E402
from tasks import QUIET_ENV, quiet_state_lines  # noqa: E402


# The training flow's shape: rounds as named task runs of one flow run on the session's Ray. Module level, so
# that task runs submitted to Ray carry a flow they can import rather than a closure over the session.
@flow(name="round-overhead-bench", task_runner=runtime.SessionRayTaskRunner())
def bench_flow(cfg, planner, actor, pool, incarnation, n: int, first: int) -> tuple[list[float], list[dict]]:
    """n rounds through the flow; returns each round's wall time and its stage timings."""
    times, stages = [], []
    for r in range(first, first + n):
        t0 = time.perf_counter()
        out = play_round(cfg, r, planner, actor, pool, incarnation)
        times.append(time.perf_counter() - t0)
        stages.append(stage_times(out["metrics"]))
    return times, stages


def stage_times(metrics: dict) -> dict:
    """A round's per-stage seconds (its whole wall time, timed by the caller, left out), for both sides."""
    return {k: v for k, v in metrics.items() if k.startswith("time/") and k != "time/round_s"}


class GcClock:
    """Seconds this process spent in the cyclic garbage collector (its pauses stop every thread)."""

    def __init__(self) -> None:
        self.seconds, self._t0 = 0.0, 0.0
        gc.callbacks.append(self._on)

    def _on(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._t0 = time.perf_counter()
        else:
            self.seconds += time.perf_counter() - self._t0


def cpu_seconds() -> tuple[float, float]:
    """CPU seconds so far of this process (the flow's or loop's driver, all threads) and of the Prefect server."""
    me = psutil.Process()
    server = 0.0
    for child in me.children(recursive=True):
        try:
            cmd = " ".join(child.cmdline())
            if "prefect" in cmd and "ray" not in cmd:
                t = child.cpu_times()
                server += t.user + t.system
        except psutil.Error:
            pass
    t = me.cpu_times()
    return t.user + t.system, server


def main() -> None:
    """Measure and print per-round wall time of flow and loop, and their ratio."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--config", default="configs/demo.yaml")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--warmup", type=int, default=2, help="untimed rounds first (Ray worker start-up)")
    ap.add_argument("--blocks", type=int, default=4, help="alternating blocks of loop and flow rounds")
    ap.add_argument(
        "--from",
        dest="ckpt",
        default=None,
        help="checkpoint folder to load first (e.g. runs/demo/checkpoints/warm_start) so rollouts have "
        "realistic lengths; without it the models are untrained",
    )
    ap.add_argument("--set", dest="overrides", action="append", default=[])
    ap.add_argument(
        "--prefect-state-lines",
        action="store_true",
        help="print Prefect's per-task state lines, as the CLI's flag of that name does",
    )
    ap.add_argument("--tiny", action="store_true", help="smoke config, 1 warm-up + 1 timed round (tests)")
    args = ap.parse_args()
    if args.tiny:
        args.config, args.rounds, args.warmup = "configs/smoke.yaml", 1, 1
    root = tempfile.mkdtemp(prefix="planact-bench-")
    cfg = load_config(
        args.config,
        args.overrides
        + [
            f"checkpoint.root={root}",
            "run_name=bench",
            "planner.warm_start.enabled=false",
            "actor.warm_start.enabled=false",
        ],
    )
    runtime.ensure_prefect_api()
    if not args.prefect_state_lines:  # the console the training CLI gives by default
        os.environ[QUIET_ENV] = "1"
        quiet_state_lines()
    session = TrainingSession(cfg, env_vars=runtime.worker_env())
    planner, actor = session.ensure_agents()
    if args.ckpt:
        from planact.agents import restore_group

        for g in (planner, actor):
            restore_group(g, str(Path(args.ckpt).resolve()))

    # Loop and flow rounds alternate in blocks: both train the same models as they go, so running all loop
    # rounds first would time the two sides on different weights (other answer lengths, other costs).
    def loop_rounds(n: int, first: int) -> tuple[list[float], list[dict]]:
        times, rows = [], []
        for r in range(first, first + n):
            t0 = time.perf_counter()
            m = play_round(cfg, r, planner, actor, session.experience, session.incarnation, plain=True)["metrics"]
            times.append(time.perf_counter() - t0)
            rows.append(stage_times(m))
        return times, rows

    loop_rounds(args.warmup, 0)  # untimed: Ray worker start-up, first Prefect task runs
    bench_flow(cfg, planner, actor, session.experience, session.incarnation, args.warmup, 1000)
    blocks = max(1, min(args.blocks, args.rounds))
    per = [args.rounds // blocks + (b < args.rounds % blocks) for b in range(blocks)]
    loop_times, loop_stages, flow_times, stages = [], [], [], []
    cpu = {"loop": [0.0, 0.0], "flow": [0.0, 0.0]}  # driver, Prefect server CPU seconds
    gc_clock, gc_s = GcClock(), {"loop": 0.0, "flow": 0.0}
    done = args.warmup
    for n in per:
        c0, g0 = cpu_seconds(), gc_clock.seconds
        t, rows = loop_rounds(n, done)
        c1, g1 = cpu_seconds(), gc_clock.seconds
        loop_times += t
        loop_stages += rows
        t, rows = bench_flow(cfg, planner, actor, session.experience, session.incarnation, n, 1000 + done)
        c2, g2 = cpu_seconds(), gc_clock.seconds
        gc_s["loop"] += g1 - g0
        gc_s["flow"] += g2 - g1
        flow_times += t
        stages += rows
        done += n
        for side, a, b in (("loop", c0, c1), ("flow", c1, c2)):
            cpu[side] = [cpu[side][i] + b[i] - a[i] for i in range(2)]
    loop_t = statistics.median(loop_times)
    flow_t = statistics.median(flow_times)
    print(
        f"rounds timed: {args.rounds} each, in {blocks} alternating blocks (after {args.warmup} warm-up rounds each), "
        f"{cfg.env.tasks_per_round} tasks x {cfg.planner.group_size} plans x {cfg.actor.group_size} answers"
    )
    print(f"plain loop : {loop_t:.3f} s/round (median)")
    print(f"prefect flow (rounds as task runs on Ray): {flow_t:.3f} s/round (median)")
    print(
        f"orchestration overhead: {flow_t - loop_t:+.3f} s/round = {100 * (flow_t - loop_t) / flow_t:.1f}% of a flow "
        "round"
    )
    print(
        f"ratio flow/loop: {flow_t / loop_t:.2f} (medians; means {statistics.mean(flow_times):.3f} / "
        f"{statistics.mean(loop_times):.3f} = {statistics.mean(flow_times) / statistics.mean(loop_times):.2f})"
    )
    for name, times in (("loop", loop_times), ("flow", flow_times)):
        print(f"{name} rounds (s): " + " ".join(f"{t:.2f}" for t in times))
    for side in ("loop", "flow"):  # where a flow round's extra time can go on a machine with few cores
        print(
            f"{side} CPU per round: driver {cpu[side][0] / args.rounds:.3f} s, Prefect server "
            f"{cpu[side][1] / args.rounds:.3f} s; driver in garbage collection {gc_s[side] / args.rounds:.3f} s"
        )
    for name, rows in (("loop", loop_stages), ("flow", stages)):
        print(
            f"{name} stages (median s): "
            + ", ".join(f"{k[5:-2]} {statistics.median(s[k] for s in rows if k in s):.3f}" for k in rows[-1])
        )
    session.close()


if __name__ == "__main__":
    main()
