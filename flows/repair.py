"""Code-repair evaluation as a flow: an agent on a corpus split, episodes as Ray tasks, results in MLflow.

    repair_evaluate(config)                          flow; one MLflow run
      load-corpus (build if missing) -> run-episodes (Ray, one sandbox slot per CPU)
        -> summarise -> MLflow metrics + telemetry artifact -> markdown artifact

Run it: python -m flows.repair --config configs/repair-eval.yaml [--set split=train --set limit=20]
"""

from __future__ import annotations

import time
from pathlib import Path

from prefect import flow
from prefect.runtime import flow_run

from flows import command, runtime
from graph_planner.config import RepairEvalConfig, load_repair_config, validate_repair_config
from graph_planner.evaluate import markdown, summarize
from planact.ray_setup import connect_ray
from planact.tracking import Tracker
from tasks.repair import load_corpus, run_episodes, write_summary

DEFAULT = load_repair_config(Path(__file__).resolve().parents[1] / "configs" / "repair-eval.yaml")


@flow(name="repair-evaluate", log_prints=True)
def repair_evaluate(config: RepairEvalConfig = DEFAULT) -> dict:
    """Solve rate, test runs and time per task of an agent on a code-repair corpus split."""
    cfg = validate_repair_config(config)
    tasks = load_corpus(cfg)
    tracker = Tracker(cfg, tags={"prefect.flow_run_id": str(flow_run.get_id()), "planact.kind": "repair-evaluate"})
    owns_ray = connect_ray(cfg, runtime.worker_env(), namespace="planact-repair")
    with runtime.tracked(tracker, owns_ray):
        t0 = time.monotonic()
        episodes = run_episodes(cfg, tasks)
        summary = summarize(episodes, time.monotonic() - t0)
        folder = write_summary(cfg, summary, episodes)
        tracker.log_metrics({k: float(v) for k, v in summary.items() if isinstance(v, (int, float))}, step=0)
        tracker.log_artifact(folder / "telemetry.jsonl", "telemetry")
        tracker.log_artifact(folder / "summary.json")
        tracker.finish("FINISHED")
        report = markdown(summary, f"{cfg.agent} agent on {cfg.split} ({len(tasks)} tasks)")
        runtime.publish_markdown(f"{report}\nMLflow run: {tracker.run_url()}\n", f"planact-repair-{cfg.run_name}")
        print(
            f"solve rate {summary['solve_rate']:.3f} ({summary['solved']}/{summary['tasks']}), mean test runs "
            f"{summary['mean_test_runs']:.2f}, seconds per task {summary['mean_seconds']:.2f}"
        )
        return {**summary, "mlflow_run_id": tracker.run_id, "run_dir": str(folder)}


def _print(run_name: str, result: dict, seconds: float) -> None:
    print(f"repair-evaluate '{run_name}' finished in {seconds:.0f} s; mlflow_run_id: {result['mlflow_run_id']}")


def main(argv: list[str] | None = None) -> int:
    """Console entry point."""
    return command.cli(
        argv,
        repair_evaluate,
        load=load_repair_config,
        check=lambda cfg: None,
        default_config="configs/repair-eval.yaml",
        summary=_print,
    )


if __name__ == "__main__":
    raise SystemExit(main())
