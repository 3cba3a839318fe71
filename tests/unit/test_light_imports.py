"""Modules that Ray helper processes import stay free of torch, transformers and mlflow.

The schedulemesh supervisor unpickles RoleWorker/TrainerRank (importing their modules) and Prefect task
workers import the task modules, but neither trains or logs a model: with torch, transformers and mlflow
at module level each such process spent ~5 s of CPU on imports, ~15 s of a 2-core smoke run's start-up.
The flow's driver scores each round with its environment (planact.envs.synthetic): its group advantages are
plain lists, not tensors, which kept torch (~2.5 CPU-s) out of every run's driver.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("torch", "transformers", "mlflow")
MODULES = [
    "planact.workers",
    "planact.trainer_group",
    "planact.agents",
    "planact.registry",
    "planact.tracking",
    "tasks.plan_act",
    "tasks.experience",
    "flows.rounds",
    "planact.envs.synthetic",
]
# One interpreter imports them in turn and names what each import added: every module before one must
# have added none (or its own test fails first), so a heavy library that appears belongs to that import.
# (One process instead of nine: ~2 CPU-s each, most of it importing Prefect and Ray again.)
PROBE = """
import importlib, json, sys
added = {}
for name in sys.argv[1:]:
    importlib.import_module(name)
    added[name] = [m for m in %r if m in sys.modules and not any(m in v for v in added.values())]
print(json.dumps(added))
"""


@pytest.fixture(scope="module")
def heavy_by_module() -> dict[str, list[str]]:
    """Which heavy libraries importing each module pulled in (in one fresh interpreter)."""
    out = subprocess.run(
        [sys.executable, "-c", PROBE % (HEAVY,), *MODULES], capture_output=True, text=True, timeout=180
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("module", MODULES)
def test_worker_side_modules_import_without_heavy_libraries(module, heavy_by_module):
    assert heavy_by_module[module] == [], f"importing {module} pulled in {heavy_by_module[module]}"
