"""The kill-point matrix: a Plan/Act run SIGKILLed at each point where a real run dies, then checked.

Each cell runs the smoke config (4 rounds) through the CLI with `PLANACT_FAULT=<point>:<n>`
(planact.faults): the process that reaches the point for the n-th time kills itself with SIGKILL, once.
Points in the flow process kill the driver (the run must resume when re-run); points in Ray actors
kill a trainer, an engine or the experience pool (the run must survive: supervision recreates the
actor and the Prefect task retries); `<point>@supervisor` kills the schedulemesh supervisor at that
point instead (Ray restarts it, it recreates the agents that died with it from its state file). After the run (and
the resume, if the driver died) the cell
checks what a user relies on:
  * rounds 1..4 completed, each once in the round table;
  * no MLflow metric step logged twice or missing (success, losses, rewards);
  * every round's experience of both roles in the pool, no torn lines (acknowledged means kept);
  * every round trained both roles (no loss missing after a recreated trainer), and each update counts
    once in the final checkpoint (its weight version is the warm start's plus one per round);
  * no Ray process left behind.
It prints one line per cell: point x outcome ("completed", "resumed, nothing lost", or what broke).

    python benchmarks/fault_matrix.py            # 13 cells, ~20 minutes on 2 cores
    python benchmarks/fault_matrix.py --tiny     # one cell of 2 rounds: a trainer dies (what the test runs)
    python benchmarks/fault_matrix.py --pipelined --points flow.round_recorded trainer.mid_train   # pipelined rounds
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from planact.experience import ExperienceStore  # noqa: E402
from tools.services import free_port, kill_tree, start_mlflow, start_prefect, stop  # noqa: E402

# (point, n): the n-th pass of the point in one process, chosen to land in round 2 of the smoke run.
CELLS = [
    ("flow.round_recorded", 2),  # driver: round 2 ran, its checkpoint not taken yet
    ("flow.mid_checkpoint", 3),  # driver: round 2's checkpoint on disk, state not pointing at it
    ("flow.mid_metrics", 3),  # driver: some metrics logged to MLflow, the rest pending
    ("trainer.mid_train", 2),  # a trainer actor: gradient step taken, not published
    ("trainer.mid_sync", 3),  # a trainer actor: weights about to reach the engine
    ("trainer.mid_checkpoint", 2),  # a trainer actor: weights written, optimizer state not yet
    ("engine.mid_generate", 4),  # an engine actor: mid-generation
    ("pool.mid_append", 3),  # the experience pool actor: items sent, not on disk
    ("orchestrator.mid_arrive", 3),  # the barrier's orchestrator actor: an arrival recorded, not released
    ("engine.mid_generate@supervisor", 4),  # the scheduler head mid-generation: its agents die with it
    ("trainer.mid_train@supervisor", 2),  # the scheduler head while a trainer steps
    ("outage.mlflow", 30),  # the MLflow tracking server down for 30 s from the end of round 1
    ("outage.prefect", 30),  # the Prefect API server down for 30 s from the end of round 1
]
KEYS = ("success", "planner/loss", "actor/loss", "planner/reward_mean", "actor/reward_mean")


def ray_processes(ray_tmp: Path) -> set[int]:
    """PIDs of the Ray daemons and workers of the sessions under `ray_tmp` (one cell's RAY_TMPDIR)."""
    # Each Ray process keeps its session's log files open, and a cell's sessions live under its own
    # RAY_TMPDIR: matching on that, not on "started during the cell", leaves alone the Ray processes of
    # anything else running on the machine (the test suite runs this beside other tests).
    prefix = f"{ray_tmp}/"
    out = set()
    for p in psutil.process_iter(["pid", "cmdline"]):
        cmd = " ".join(p.info["cmdline"] or [])
        if not ("raylet" in cmd or "gcs_server" in cmd or cmd.startswith("ray::")):
            continue
        try:
            if prefix in cmd or any(f.path.startswith(prefix) for f in p.open_files()):
                out.add(p.info["pid"])
        except psutil.Error:  # gone, or not ours to read
            pass
    return out


def _reap_cell(ray_tmp: Path) -> dict[int, str]:
    """Wait up to 20 s for a cell's Ray processes to exit, kill what is left, remove its Ray folder; returns
    the leftovers (pid -> command line)."""
    deadline = time.time() + 20  # Ray's daemons notice a dead driver within seconds (its reaper process)
    while (orphans := ray_processes(ray_tmp)) and time.time() < deadline:
        time.sleep(0.5)
    left = {pid: _name(pid) for pid in orphans}
    for pid in orphans:
        try:
            psutil.Process(pid).kill()
        except psutil.NoSuchProcess:
            pass
    shutil.rmtree(ray_tmp, ignore_errors=True)
    return left


def _name(pid: int) -> str:
    try:
        return " ".join(psutil.Process(pid).cmdline())[:60]
    except psutil.NoSuchProcess:
        return "?"


class Outage(threading.Thread):
    """Takes a server down for `seconds` once the run has completed round 1, then brings it back."""

    def __init__(self, root: Path, down, up, seconds: float = 30.0):
        super().__init__(daemon=True)
        self.root, self.down, self.up, self.seconds = root, down, up, seconds
        self.happened = threading.Event()

    def run(self) -> None:
        state = self.root / "fm" / "state.json"
        deadline = time.time() + 300
        while time.time() < deadline:
            try:
                if json.loads(state.read_text())["last_completed_round"] >= 1:
                    break
            except (OSError, ValueError, KeyError):
                pass
            time.sleep(0.2)
        self.down()
        time.sleep(self.seconds)
        self.up()
        self.happened.set()


def run_cli(root: Path, rounds: int, env: dict, log: Path, extra: tuple[str, ...] = ()) -> int:
    """One training CLI run to its end; its whole process tree is gone afterwards."""
    args = [
        sys.executable,
        "-m",
        "flows.plan_act",
        "--config",
        "configs/smoke.yaml",
        "--set",
        f"checkpoint.root={root}",
        "--set",
        "run_name=fm",
        "--set",
        f"rounds={rounds}",
        "--set",
        "tracking.register_models=false",
        *extra,
    ]
    with open(log, "a") as fh:
        proc = subprocess.Popen(args, cwd=ROOT, env=env, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            proc.wait(timeout=600)
        finally:
            kill_tree(proc.pid)
    return proc.returncode


def check(root: Path, rounds: int) -> list[str]:
    """What is wrong with the finished run (empty: nothing)."""
    from mlflow.tracking import MlflowClient

    problems = []
    state = json.loads((root / "fm" / "state.json").read_text())
    want = list(range(1, rounds + 1))
    if state["last_completed_round"] != rounds or [r["round"] for r in state["table"]] != want:
        problems.append(f"rounds {[r['round'] for r in state['table']]}")
    if any(r.get("planner/loss") is None or r.get("actor/loss") is None for r in state["table"]):
        problems.append("a round without a loss")
    for role in ("planner", "actor"):  # warm start publishes version 1, every round's update one more
        meta = json.loads((Path(state["checkpoint"]) / role / "meta.json").read_text())
        if meta["weight_version"] != rounds + 1:
            problems.append(
                f"{role} weight_version {meta['weight_version']} (expected {rounds + 1}: an update lost "
                "or applied twice)"
            )
    client = MlflowClient(f"sqlite:///{root / 'mlflow.db'}")
    for key in KEYS:
        steps = sorted(m.step for m in client.get_metric_history(state["mlflow_run_id"], key))
        if steps != want:
            problems.append(f"{key} steps {steps}")
    pool = ExperienceStore(root / "fm" / "experience")
    missing = [(r, role) for r in want for role in ("planner", "actor") if not pool.query(run="fm", round=r, role=role)]
    if missing:
        problems.append(f"experience missing {missing}")
    if pool.stats()["torn_lines"]:
        problems.append("torn experience lines")
    return problems


PIPELINED = (
    "--set",
    "pipeline.max_staleness=1",
    "--set",
    "planner.resources.colocate_trainer=false",
    "--set",
    "actor.resources.colocate_trainer=false",
    "--set",
    "planner.resources.num_cpus=0.4",
    "--set",
    "actor.resources.num_cpus=0.4",
)


def cell(point: str, nth: int, rounds: int, work: Path, prefect: dict, base: tuple[str, ...] = ()) -> str:
    """Run one cell; returns its outcome. `point` may name a victim (`<point>@supervisor`); the
    `outage.mlflow` / `outage.prefect` cells take that server down for `nth` seconds after round 1."""
    point, _, victim = point.partition("@")
    root = work / f"{point}-{nth}{'-' + victim if victim else ''}"
    root.mkdir(parents=True)
    env = {
        **os.environ,
        "PREFECT_API_URL": prefect["url"],
        "PLANACT_FAULT_DIR": str(root),
        # short (Ray's socket paths must fit 107 bytes) and the cell's own: what ray_processes looks for
        "RAY_TMPDIR": tempfile.mkdtemp(prefix="fm-ray-", dir="/tmp"),
        "TOKENIZERS_PARALLELISM": "false",
        "RAY_USAGE_STATS_ENABLED": "0",
    }
    extra: tuple[str, ...] = base
    outage = mlflow = None
    if point == "outage.mlflow":
        port = free_port()
        mlflow = {"proc": start_mlflow(root, port, root / "mlartifacts")[0]}
        extra = (*base, "--set", f"tracking.tracking_uri=http://127.0.0.1:{port}")
        outage = Outage(
            root,
            lambda: stop(mlflow["proc"]),
            lambda: mlflow.update(proc=start_mlflow(root, port, root / "mlartifacts")[0]),
            seconds=nth,
        )
    elif point == "outage.prefect":
        outage = Outage(
            root,
            lambda: stop(prefect["proc"]),
            lambda: prefect.update(proc=start_prefect(prefect["home"], prefect["port"])[0]),
            seconds=nth,
        )
    else:
        env["PLANACT_FAULT"] = f"{point}:{nth}" + (f"@{victim}" if victim else "")
    log = root / "cli.log"
    if outage:
        outage.start()
    try:
        rc = run_cli(root, rounds, env, log, extra)
        if outage:
            outage.join()  # the server is back before any resume
        fired = outage.happened.is_set() if outage else (root / f"planact-fault-{point}-{nth}").exists()
        resumed = False
        if rc != 0:
            resumed = True
            rc = run_cli(root, rounds, env, log, extra)
    finally:
        if mlflow:
            stop(mlflow["proc"])
        orphans = _reap_cell(Path(env["RAY_TMPDIR"]))
    names = sorted(set(orphans.values()))
    if not fired:
        return "fault never fired (point not reached)"
    if rc != 0:
        return f"FAILED: exit {rc} after resume (see {log})"
    problems = check(root, rounds) + (
        [f"{len(orphans)} Ray processes left after 20 s ({', '.join(names)})"] if orphans else []
    )
    if problems:
        return "FAILED: " + "; ".join(problems)
    return "resumed, nothing lost" if resumed else "completed"


def main(argv: list[str] | None = None) -> int:
    """Run the cells and print the matrix."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tiny", action="store_true", help="one cell, 2 rounds (tests)")
    ap.add_argument("--points", nargs="+", default=None, help="run only these points")
    ap.add_argument(
        "--pipelined",
        action="store_true",
        help="every cell with pipeline.max_staleness 1 (separate trainer actors, rounds overlapping)",
    )
    args = ap.parse_args(argv)
    cells = [("trainer.mid_train", 2)] if args.tiny else [c for c in CELLS if not args.points or c[0] in args.points]
    rounds = 2 if args.tiny else 4
    work = Path(tempfile.mkdtemp(prefix="planact-faults-"))
    prefect = {"home": work / "prefect", "port": free_port(), "proc": None, "url": os.environ.get("PREFECT_API_URL")}
    if not prefect["url"] or any(p == "outage.prefect" for p, _ in cells):
        # one server for every cell (a run without one starts a temporary server each time); a Prefect API
        # already in the environment (the test suite's) serves unless a cell takes the server down
        prefect["proc"], prefect["url"] = start_prefect(prefect["home"], prefect["port"])
    failed = 0
    try:
        print(f"{'kill point':26s} outcome")
        for point, nth in cells:
            t0 = time.perf_counter()
            outcome = cell(point, nth, rounds, work, prefect, PIPELINED if args.pipelined else ())
            failed += outcome.startswith(("FAILED", "fault never"))
            print(f"{point + ':' + str(nth):26s} {outcome}  ({time.perf_counter() - t0:.0f} s)", flush=True)
    finally:
        if prefect["proc"] is not None:
            stop(prefect["proc"])
    print(f"{len(cells) - failed} of {len(cells)} cells completed or resumed with nothing lost")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
