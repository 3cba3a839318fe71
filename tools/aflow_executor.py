"""The AFlow tests' executor, shipped in tests/data/aflow-executor: a planner and an actor warm-started on the
teacher's demonstrations (200 and 1,000 steps), as `aflow_rl.executor.ensure_planact_checkpoint` builds them.

Building it cost ~80-100 CPU-s in every suite run; shipped, it costs nothing (1.6 MB). Its fingerprint.txt
names the code and settings that decided its weights; tests/unit/test_shipped_executor.py fails when they
changed, and this rebuilds it:

    python tools/aflow_executor.py          # ~100 CPU-s; then commit tests/data/aflow-executor
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHIPPED = REPO / "tests" / "data" / "aflow-executor"
# Fewer steps than the demo's executor (300/1500): weaker models, but workflows with and without a plan still
# score apart, which is what the AFlow tests need (half of these steps no longer did).
STEPS = (200, 1000)


def build(out: Path = SHIPPED) -> Path:
    """Warm-start the executor from scratch into `out` (replacing what is there); returns `out`."""
    from aflow_rl.config import LLMConfig
    from aflow_rl.executor import ensure_planact_checkpoint

    with tempfile.TemporaryDirectory() as tmp:
        built = ensure_planact_checkpoint(LLMConfig(planner_steps=STEPS[0], actor_steps=STEPS[1]), tmp, threads=1)
        shutil.rmtree(out, ignore_errors=True)
        shutil.copytree(built, out)
    return out


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    print(build())
