"""Held-out evaluation of a Plan/Act checkpoint as its own flow (and deployment).

    evaluate_checkpoint(config, checkpoint)       flow; one MLflow run tagged with the source run
      agents for "<run>-eval" -> load checkpoint or registered models -> evaluate (held-out split)
      -> metrics + artifact

Run it: python -m flows.evaluate --config configs/demo.yaml [--set ...]   (the run's last checkpoint)
   or:  python -m flows.evaluate --config configs/demo.yaml --param actor_model=models:/demo-actor/1 \
            --param planner_model=models:/demo-planner/1                 (registered versions)
"""

from __future__ import annotations

from prefect import flow
from prefect.runtime import flow_run

from flows import command, runtime
from planact import agents
from planact.config import RunConfig, validate_config
from planact.preflight import check_runtime
from planact.ray_setup import connect_ray
from planact.storage import RunState
from planact.tracking import Tracker
from tasks.plan_act import evaluate_heldout


@flow(name="evaluate-checkpoint", log_prints=True)
def evaluate_checkpoint(
    config: RunConfig = runtime.DEMO,
    checkpoint: str | None = None,
    planner_model: str | None = None,
    actor_model: str | None = None,
) -> dict:
    """Held-out metrics of a run's checkpoint (default: its last completed one), or of registered models.

    `planner_model` / `actor_model` (models:/<name>/<version-or-alias>, or an HF folder) replace that
    role's weights from the checkpoint; with both given no checkpoint is needed.
    """
    cfg = validate_config(config)
    given = {"planner": planner_model, "actor": actor_model}
    # A given model becomes the role's model_path: the role's actors load it (and its tokenizer) directly.
    cfg = cfg.model_copy(
        update={r: getattr(cfg, r).model_copy(update={"model_path": m}) for r, m in given.items() if m}
    )
    check_runtime(cfg)
    folder = checkpoint or RunState(cfg.run_dir(), cfg.agent_role).data.get("checkpoint")
    if not folder and not all(given.values()):
        raise ValueError(
            f"checkpoint: run {cfg.run_name!r} has no completed checkpoint under {cfg.run_dir()}; "
            "train it first, pass checkpoint=<folder>, or pass planner_model and actor_model"
        )
    source = ", ".join(f"{r} {m}" for r, m in given.items() if m) or str(folder)
    # Own agents under "<run>-eval": a run that is still training keeps its pools untouched.
    ecfg = cfg.model_copy(update={"run_name": f"{cfg.run_name}-eval"})
    tracker = Tracker(
        ecfg,
        tags={
            "prefect.flow_run_id": str(flow_run.get_id()),
            "planact.source_run": cfg.run_name,
            "planact.checkpoint": str(folder),
            "planact.models": source,
        },
        run_name=f"{cfg.run_name}-eval",
    )
    owns_ray = connect_ray(ecfg, runtime.worker_env())
    groups: list = []
    with runtime.tracked(tracker, owns_ray, otherwise=lambda: groups and agents.delete_role_groups(ecfg, groups)):
        scheduler = agents.scheduler_for(ecfg)
        groups = [agents.create_role_group(ecfg, role, scheduler) for role in ("planner", "actor")]
        for g in groups:
            if g.trainer is not None and not given[g.role]:  # frozen roles were never checkpointed
                agents.restore_group(g, folder)
        metrics = evaluate_heldout(ecfg, *groups)
        tracker.log_metrics({f"heldout/{k}": v for k, v in metrics.items()}, step=0)
        tracker.finish("FINISHED")
        rows = "".join(f"| {k} | {v:.3f} |\n" for k, v in sorted(metrics.items()))
        runtime.publish_markdown(
            f"# held-out evaluation of `{source}`\n\nMLflow run: {tracker.run_url()}\n\n"
            f"| metric | value |\n|---|---|\n{rows}",
            f"planact-eval-{cfg.run_name}",
        )
        print("held-out: " + ", ".join(f"{k} {v:.3f}" for k, v in sorted(metrics.items())))
        return {**metrics, "checkpoint": str(folder), "models": source, "mlflow_run_id": tracker.run_id}


def main(argv: list[str] | None = None) -> int:
    """Console entry point."""
    return command.cli(argv, evaluate_checkpoint)


if __name__ == "__main__":
    raise SystemExit(main())
