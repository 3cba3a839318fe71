"""Register a run's trained roles in the MLflow Model Registry on demand, from any of its checkpoints.

    register_checkpoint_models(config, checkpoint)     flow; versions go to the run's own MLflow run
      run state (MLflow run, held-out figures) -> register-models -> models:/<name>/<version> per role

The training flow does this itself at the end of a run (tracking.register_models); this flow is for a
run that was stopped early, trained before registration existed, or an earlier checkpoint.

Run it: python -m flows.register --config configs/demo.yaml [--param checkpoint=runs/demo/checkpoints/round_00020]
"""

from __future__ import annotations

import re
from pathlib import Path

from prefect import flow

from flows import command, runtime
from planact.config import RunConfig, validate_config
from planact.registry import ROLES, has_model, registered_name
from planact.storage import RunState
from planact.tracking import tracking_uri
from tasks.plan_act import register_models


@flow(name="register-models", log_prints=True)
def register_checkpoint_models(config: RunConfig = runtime.DEMO, checkpoint: str | None = None) -> dict:
    """Log each role saved in a checkpoint (default: the run's last) as an MLflow model and register a version."""
    cfg = validate_config(config)
    state = RunState(cfg.run_dir(), cfg.agent_role).data
    folder = checkpoint or state.get("checkpoint")
    if not folder or not state.get("mlflow_run_id"):
        raise ValueError(f"checkpoint: run {cfg.run_name!r} has no completed checkpoint under {cfg.run_dir()}")
    roles = [r for r in ROLES if has_model(Path(folder) / r)]
    if not roles:
        raise ValueError(f"checkpoint: {folder} holds no planner/ or actor/ model")
    m = re.search(r"round_(\d+)$", str(folder).rstrip("/"))
    round_idx = int(m.group(1)) if m else state["last_completed_round"]
    heldout = (state.get("evals") or {}).get(str(round_idx), {})  # the figures logged for that round, if any
    versions = register_models(cfg, tracking_uri(cfg), state["mlflow_run_id"], str(folder), round_idx, heldout, roles)
    registered = {role: f"models:/{registered_name(cfg, role)}/{v}" for role, v in versions.items()}
    for role, uri in registered.items():
        print(f"registered {role}: {uri}")
    return {"registered": registered, "checkpoint": str(folder), "mlflow_run_id": state["mlflow_run_id"]}


def main(argv: list[str] | None = None) -> int:
    """Console entry point."""
    return command.cli(argv, register_checkpoint_models, summary=lambda name, result, s: None)


if __name__ == "__main__":
    raise SystemExit(main())
