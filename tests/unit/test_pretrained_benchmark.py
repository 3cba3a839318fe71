"""benchmarks/pretrained_throughput.py's training arms: the step they time scores its samples under the weights
that drew them, so the sampler/trainer logprob check does not report a sync failure the benchmark made."""

from __future__ import annotations

from planact.config import LoRAConfig
from planact.models import load_model
from planact.rl.sampler_gap import TOLERANCE

from .tool_module import load_tool


def test_timed_step_after_the_warm_up_is_on_policy(tiny_model_dir, capsys):
    """The warm-up step's update must not reach the timed step: its gap is float rounding, not one update."""
    bench = load_tool("pretrained_throughput", "benchmarks")
    model, tok = load_model(tiny_model_dir)
    cands = ["reverse the digits = 3 2 1", "sort the digits = 1 2 3 4", "x = 7"]
    t = bench.training(model, tok, "add one to each digit =", cands, LoRAConfig(enabled=True), 4)
    printed = capsys.readouterr().out
    assert "weight sync broken" not in printed, printed
    for arm in ("lora", "full"):
        assert t[arm]["gap"] < TOLERANCE["fp32"], (arm, t[arm]["gap"])
