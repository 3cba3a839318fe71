"""Modules that Ray helper processes import stay free of torch, transformers and mlflow.

The schedulemesh supervisor unpickles RoleWorker/TrainerRank (importing their modules) and Prefect task
workers import the task modules, but neither trains or logs a model: with torch, transformers and mlflow
at module level each such process spent ~5 s of CPU on imports, ~15 s of a 2-core smoke run's start-up.
The flow's driver scores each round with its environment (planact.envs.synthetic): its group advantages are
plain lists, not tensors, which kept torch (~2.5 CPU-s) out of every run's driver.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

HEAVY = ("torch", "transformers", "mlflow")


@pytest.mark.parametrize(
    "module",
    [
        "planact.workers",
        "planact.trainer_group",
        "planact.agents",
        "planact.registry",
        "planact.tracking",
        "tasks.plan_act",
        "tasks.experience",
        "flows.rounds",
        "planact.envs.synthetic",
    ],
)
def test_worker_side_modules_import_without_heavy_libraries(module):
    code = f"import sys, {module}; print(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "", f"importing {module} pulled in {out.stdout.strip()}"
