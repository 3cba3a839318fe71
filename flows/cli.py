"""`planact`: one command for planact's workloads and tools (as `prefect`, `mlflow` and `ray` have).

planact train [--config configs/demo.yaml ...]     the Plan/Act training flow (planact-train)
planact repair corpus|evaluate ...                 code-repair corpus and evaluation (planact-repair)
planact models import|import-gguf|list ...         pretrained models for offline use
planact sandbox [--kind code|pytest]               what a sandbox of each kind can see
"""

from __future__ import annotations

import sys

COMMANDS = {
    "train": ("the Plan/Act training flow on Ray, tracked in MLflow (same as planact-train)", "flows.plan_act"),
    "evaluate": ("held-out evaluation of a run's checkpoint, logged to MLflow", "flows.evaluate"),
    "register": ("register a run's checkpoint (both roles) in the MLflow Model Registry", "flows.register"),
    "aflow": ("AFlow workflow search guided by a GiGPO policy", "flows.aflow"),
    "aflow-train": ("train AFlow's optimizer model with RL on parallel searches", "flows.aflow_train"),
    "repair": ("code-repair corpus building and agent evaluation (same as planact-repair)", "graph_planner.cli"),
    "models": ("import pretrained models for offline use, list them", "planact.model_import"),
    "sandbox": ("print what a sandbox of each kind can see", "sandbox.describe"),
}


def main(argv: list[str] | None = None) -> int:
    """Dispatch `planact <command> ...` to the command's own entry point."""
    import importlib

    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in COMMANDS:
        print(__doc__.strip().splitlines()[0] + "\n\ncommands:")
        for name, (what, _) in COMMANDS.items():
            print(f"  {name:<11} {what}")
        return 0 if argv[:1] in ([], ["-h"], ["--help"]) else 2
    return importlib.import_module(COMMANDS[argv[0]][1]).main(argv[1:])


if __name__ == "__main__":
    raise SystemExit(main())
