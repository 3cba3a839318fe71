"""The AFlow tests' shipped executor (tests/data/aflow-executor) is what today's code would build, and the
builder it stands in for still builds: a warm start of a few steps writes both roles and its fingerprint."""

from __future__ import annotations

from transformers import AutoModelForCausalLM

from aflow_rl.config import LLMConfig
from aflow_rl.executor import ensure_planact_checkpoint, executor_fingerprint
from tools.aflow_executor import SHIPPED, STEPS


def test_the_shipped_executor_matches_the_code_that_builds_it():
    shipped = (SHIPPED / "fingerprint.txt").read_text().strip()
    assert shipped == executor_fingerprint(*STEPS), (
        "the code or settings that decide the AFlow executor's weights changed: rebuild it with "
        "`python tools/aflow_executor.py` and commit tests/data/aflow-executor"
    )
    for role in ("planner", "actor"):
        assert AutoModelForCausalLM.from_pretrained(SHIPPED / role).config.vocab_size > 0


def test_a_few_step_warm_start_builds_both_roles_once_with_its_fingerprint(tmp_path):
    cfg = LLMConfig(planner_steps=2, actor_steps=2)
    folder = ensure_planact_checkpoint(cfg, tmp_path, threads=1)
    assert (
        (folder / "fingerprint.txt").read_text().strip() == executor_fingerprint(2, 2) != executor_fingerprint(*STEPS)
    )
    assert all((folder / role / "model.safetensors").is_file() for role in ("planner", "actor"))
    assert ensure_planact_checkpoint(cfg, tmp_path) == folder  # cached: a second call builds nothing
