"""Training AFlow's optimizer model with RL as a Prefect flow: searches fanned out on Ray, one update per iteration.

    aflow_train(config)                       flow; one MLflow run; re-running a run name resumes it
      prepare_executor -> the untrained optimizer saved as iteration_0000
      for iteration i:
        search x N                            Ray tasks: one search each, to its end, with iteration i-1's weights
        -> train_optimizer                    GiGPO over all transitions -> one GRPO update -> iteration_i
        -> experience                         every transition into the run's pool
        -> commit                             state.json names iteration_i; then its metrics go to MLflow

Run it: python -m flows.aflow_train --config configs/aflow-train.yaml
"""

from __future__ import annotations

import json
import shutil
import statistics
import time
from pathlib import Path

from prefect import flow
from prefect.runtime import flow_run
from prefect_ray import RayTaskRunner

from aflow_rl.config import AFlowConfig, check_aflow_runtime, load_aflow_config, validate_aflow_config
from aflow_rl.optimizer_rl import make_optimizer, training_seeds, transition_items
from flows import command, runtime
from planact import faults
from planact.experience import PoolRef, pool_actor
from planact.ray_setup import connect_ray
from planact.storage import atomic_write
from planact.tracking import Tracker
from tasks.aflow import prepare_executor
from tasks.aflow_train import run_search, train_optimizer
from tasks.experience import record_experience
from tasks.plan_act import Payload

DEMO = load_aflow_config(Path(__file__).resolve().parents[1] / "configs" / "aflow-train.yaml")


@flow(name="aflow-train-searches", log_prints=True)
def searches(cfg: AFlowConfig, checkpoint: str, seeds: list[int], tag: str) -> list[dict]:
    """One iteration's searches (every benchmark x every seed), each a Ray task run to its end with the same weights."""
    futures = [run_search.submit(cfg, checkpoint, b, s, tag) for b in cfg.trained_benchmarks() for s in seeds]
    return [tr for f in futures for tr in f.result()]


@flow(name="aflow-train", log_prints=True)
def aflow_train(config: AFlowConfig = DEMO) -> dict:
    """Train the AFlow optimizer model on many parallel searches; re-running a run name resumes it."""
    cfg = validate_aflow_config(config)
    runtime.load_api_secrets(cfg)
    check_aflow_runtime(cfg)
    owns_ray = connect_ray(cfg, runtime.worker_env(), namespace="planact")
    run_dir = cfg.run_dir()
    run_dir.mkdir(parents=True, exist_ok=True)
    state_path = run_dir / "optimizer_state.json"
    state = json.loads(state_path.read_text()) if state_path.is_file() else {"iteration": 0}
    tracker = Tracker(
        cfg,
        state.get("mlflow_run_id"),
        tags={
            "prefect.flow_run_id": str(flow_run.get_id()),
            "prefect.flow_run_name": str(flow_run.get_name()),
            "workload": "aflow-train",
            "benchmark": ",".join(cfg.trained_benchmarks()),
        },
    )
    pool = PoolRef(run_dir / "experience", f"aflow-train:{cfg.run_name}", "planact")
    _keep = pool_actor(pool.path, pool.name, pool.namespace)  # noqa: F841  owned by this flow run
    with runtime.tracked(tracker, owns_ray):
        benchmarks = cfg.trained_benchmarks()
        for b in benchmarks:
            print(f"executor ({b}): {prepare_executor(cfg.model_copy(update={'benchmark': b}))}")
        if "checkpoint" not in state:  # a fresh run: the untrained optimizer is iteration 0
            state.update(
                mlflow_run_id=tracker.run_id,
                checkpoint=str(make_optimizer(cfg).save(run_dir / "optimizer" / "iteration_0000")),
            )
            atomic_write(state_path, json.dumps(state))
        elif state["iteration"]:
            print(f"resuming run {cfg.run_name!r} after iteration {state['iteration']}")
        _log_pending(tracker, state, state_path)
        fan_out = searches.with_options(task_runner=RayTaskRunner(address=cfg.ray.address))
        for i in range(state["iteration"] + 1, cfg.optimizer_rl.iterations + 1):
            t0 = time.perf_counter()
            tag = f"it{i}"
            shutil.rmtree(run_dir.parent / f"{cfg.run_name}-{tag}", ignore_errors=True)  # a re-run starts clean
            transitions = fan_out(cfg, state["checkpoint"], training_seeds(cfg, i), tag)
            out = train_optimizer(
                cfg, state["checkpoint"], transitions, i, str(run_dir / "optimizer" / f"iteration_{i:04d}")
            )
            record_experience(pool, Payload(transition_items(cfg.run_name, i, out["transitions"])))
            faults.point("aflow_train.before_commit")  # trained and persisted, not yet the resume point
            # Per-benchmark curves (<benchmark>/best, ...); with several benchmarks also all/<figure> over every search.
            metrics = {
                k if "/" in k else f"all/{k}": v for k, v in out["figures"].items() if "/" in k or len(benchmarks) > 1
            }
            metrics["time/iteration_s"] = time.perf_counter() - t0
            state.update(
                iteration=i,
                checkpoint=str(run_dir / "optimizer" / f"iteration_{i:04d}"),
                pending={"step": i, "metrics": metrics},
            )
            atomic_write(state_path, json.dumps(state))
            _log_pending(tracker, state, state_path)
            print(
                f"iteration {i}/{cfg.optimizer_rl.iterations}: "
                + "; ".join(
                    f"{b} mean best {metrics[f'{b}/best']:.3f} outcome {metrics[f'{b}/outcome']:+.3f} "
                    f"({int(metrics[f'{b}/transitions'])} steps, {int(metrics[f'{b}/invalid'])} invalid)"
                    for b in benchmarks
                )
                + f" ({metrics['time/iteration_s']:.1f} s)"
            )
        best = {
            b: [m.value for m in tracker.client.get_metric_history(tracker.run_id, f"{b}/best")] for b in benchmarks
        }
        tracker.log_artifact(state["checkpoint"], "optimizer")
        tracker.finish("FINISHED")
        return {
            "iterations": state["iteration"],
            "checkpoint": state["checkpoint"],
            "mlflow_run_id": tracker.run_id,
            "mlflow_url": tracker.run_url(),
            "benchmarks": {
                b: {
                    "first_best": h[0] if h else None,
                    "last_best": h[-1] if h else None,
                    "mean_best": statistics.fmean(h) if h else None,
                }
                for b, h in best.items()
            },
        }


def _log_pending(tracker: Tracker, state: dict, state_path) -> None:
    """Log a committed iteration's metrics once (a run killed between commit and logging logs them on resume)."""
    pending = state.pop("pending", None)
    if pending is None:
        return
    if pending["step"] not in tracker.logged_steps(next(iter(pending["metrics"]))):
        tracker.log_metrics(pending["metrics"], step=pending["step"])
    atomic_write(state_path, json.dumps(state))


def print_train_summary(run_name: str, summary: dict, seconds: float) -> None:
    """Final lines: iterations, the mean best score of the first and last iteration's searches, where things are."""
    print(f"aflow-train run '{run_name}' finished in {seconds:.0f} s after {summary['iterations']} iterations")
    for b, f in summary["benchmarks"].items():
        if f["first_best"] is not None:
            print(
                f"{b}: mean best validation of the iteration's searches {f['first_best']:.3f} (first) -> "
                f"{f['last_best']:.3f} (last)"
            )
    for k in ("checkpoint", "mlflow_run_id", "mlflow_url"):
        print(f"{k}: {summary[k]}")


def main(argv: list[str] | None = None) -> int:
    """Console entry point: validate the config, then run the training flow."""
    return command.cli(
        argv,
        aflow_train,
        load=load_aflow_config,
        check=check_aflow_runtime,
        default_config="configs/aflow-train.yaml",
        summary=print_train_summary,
    )


if __name__ == "__main__":
    raise SystemExit(main())
