"""benchmarks/repair_rl.py --no-teacher on the config it is meant for: the overrides must give a valid run
config, or a newcomer's hours-long measurement dies at its first line."""

from __future__ import annotations

from planact.config import load_config

from .tool_module import load_tool


def test_no_teacher_overrides_validate_on_the_smollm2_config():
    """SmolLM2's LoRA patch model, frozen by --no-teacher, must not keep an adapter no trainer serves."""
    bench = load_tool("repair_rl", "benchmarks")
    cfg = load_config("configs/repair-smollm.yaml", bench.WHOLE_SPLITS + bench.PLATEAU + bench.NO_TEACHER)
    assert not cfg.actor.train and not cfg.actor.lora.enabled and not cfg.actor.warm_start.enabled
    assert cfg.planner.train and cfg.planner.lora.enabled and not cfg.planner.warm_start.enabled
