"""Benchmarks in their tiny modes, so they cannot rot: round_overhead.py (it broke once when the experience
pool joined the round and nothing ran it), rl_vs_sft.py over seeds, one cell of fault_matrix.py,
engine_throughput.py, gpu_determinism.py, async_rounds.py (which is also the pipelined flow's end-to-end test). (aflow_rl_vs_mcts.py runs in test_search_offline.py, beside the executor it needs;
trainer_scaling.py, repair_throughput.py and repair_rl.py beside their own features.)"""

from __future__ import annotations

import re

import pytest

from .conftest import run_script


@pytest.mark.slow
def test_round_overhead_benchmark_tiny_mode(prefect_api):
    out = run_script("benchmarks/round_overhead.py", "--tiny", timeout=600)
    # The ratio is the quotient of the two medians it prints (a wrong baseline would show here).
    loop = float(re.search(r"plain loop : ([0-9.]+) s/round", out.stdout).group(1))
    flow = float(re.search(r"prefect flow \(rounds as task runs on Ray\): ([0-9.]+) s/round", out.stdout).group(1))
    ratio = float(re.search(r"ratio flow/loop: ([0-9.]+)", out.stdout).group(1))
    assert loop > 0 and flow > 0 and abs(ratio - flow / loop) <= 0.01 + 0.01 * ratio, out.stdout
    # Both sides did the same stages, experience included (the loop is a fair baseline).
    for side in ("loop", "flow"):
        stages = re.search(rf"^{side} stages \(median s\): (.*)$", out.stdout, re.M).group(1)
        assert all(s in stages for s in ("planner_generate", "actor_execute", "experience", "train")), stages


def test_rl_vs_sft_benchmark_over_seeds_tiny():
    """benchmarks/rl_vs_sft.py with two independent warm starts on the smoke config: per-seed tables, then
    mean, sd and per-seed figures for every arm and paired difference."""
    out = run_script(
        "benchmarks/rl_vs_sft.py", "--config", "configs/smoke.yaml", "--seeds", "0", "1", "--rounds", "1", timeout=600
    )
    assert "seed 0. RL: 1 GRPO rounds" in out.stdout and "seed 1. RL: 1 GRPO rounds" in out.stdout
    assert "over 2 seeds (0 1): mean (sd) and per seed" in out.stdout
    for arm in ("warm", "rl", "sft", "rl-warm", "rl-sft"):
        assert re.search(rf"^pass@1\s+{arm}\s", out.stdout, re.M), arm


@pytest.mark.slow
def test_fault_matrix_tiny_mode(prefect_api):
    """benchmarks/fault_matrix.py with one cell: a trainer actor SIGKILLs itself mid-train; the run completes
    with every round, metric step, update and experience item once, and no Ray process left behind.
    (A SIGKILLed driver and planact.reaper are tested in test_resume.py.) The suite's Prefect server serves
    it: only a cell that takes the server down starts its own."""
    out = run_script("benchmarks/fault_matrix.py", "--tiny", timeout=900)
    assert re.search(r"^trainer\.mid_train:2\s+completed", out.stdout, re.M), out.stdout
    assert "1 of 1 cells completed or resumed with nothing lost" in out.stdout


def test_engine_throughput_benchmark_tiny_mode():
    out = run_script("benchmarks/engine_throughput.py", "--tiny", timeout=300)
    assert "16 prompts, max_new_tokens 8" in out.stdout
    # The ratio is the quotient of the two rates the table prints (not a claim that batching wins: beside a loaded
    # suite the other throughput benchmark measured batching at 0.41x once; speed is the benchmark's to report).
    rate = {
        name: float(re.search(rf"^{re.escape(name)}\s+\d+\s+[0-9.]+\s+([0-9]+)$", out.stdout, re.M).group(1))
        for name in ("HF engine (batched, KV)", "naive per-prompt generate")
    }
    ratio = float(re.search(r"ratio batched / naive: ([0-9.]+)x", out.stdout).group(1))
    quotient = rate["HF engine (batched, KV)"] / rate["naive per-prompt generate"]
    assert abs(ratio - quotient) <= 0.06 + 0.05 * ratio, out.stdout


def test_pretrained_throughput_benchmark_tiny_mode():
    """benchmarks/pretrained_throughput.py --tiny: each of its three comparisons prints a ratio, the
    shared-prefix scores equal the per-candidate ones, and the training step's sampler/trainer gap is rounding."""
    out = run_script("benchmarks/pretrained_throughput.py", "--tiny", timeout=300)
    ratios = re.findall(r"ratio ([0-9.]+)x", out.stdout)
    assert len(ratios) == 3, out.stdout
    # Each ratio is the quotient of the two rates it stands beside. (Not that batching wins: a speed is the
    # benchmark's to measure; beside a loaded suite one run measured 0.41x.)
    rates = re.search(r"batched ([0-9]+) tokens/s, one by one ([0-9]+) tokens/s; ratio ([0-9.]+)x", out.stdout)
    batched, single, ratio = (float(x) for x in rates.groups())
    assert abs(ratio - batched / single) <= 0.02 + 0.05 * ratio and batched > 0 and single > 0, out.stdout
    diff = re.search(r"largest logprob difference ([0-9.e+-]+)", out.stdout)
    assert diff and float(diff.group(1)) < 1e-4, out.stdout
    # The timed training step scores its samples under the weights that drew them (not the warm-up's update).
    gaps = re.search(r"logprob gap LoRA ([0-9.e+-]+), full ([0-9.e+-]+)", out.stdout)
    assert gaps and max(float(g) for g in gaps.groups()) < 1e-4 and "weight sync broken" not in out.stdout, out.stdout


def test_gpu_determinism_benchmark_tiny_mode():
    """benchmarks/gpu_determinism.py --tiny: SFT + GRPO rounds repeated in two fresh processes on the CPU
    give the same samples and the same weights, bit for bit (on a GPU machine it also runs the cuda modes)."""
    out = run_script("benchmarks/gpu_determinism.py", "--tiny", timeout=300)
    assert re.search(r"^cpu\s+True\s+True\s+0\s+0\s", out.stdout, re.M), out.stdout
    assert "bit-identical across repeats: cpu" in out.stdout


@pytest.mark.slow
def test_async_rounds_benchmark_quick_runs_the_pipelined_flow(prefect_api):
    """benchmarks/async_rounds.py --quick: the training flow synchronous and with pipeline.max_staleness 1
    (separate trainer actors), 2 rounds each. The pipelined run's second round was generated one weight
    version behind its trainer (what the loss corrected for); the synchronous run never was."""
    out = run_script("benchmarks/async_rounds.py", "--quick", timeout=900)
    sync = re.search(r"^sync\s+\d+\s+([0-9.]+)\s+([0-9.]+)\s+[0-9.]+\s+planner (\d), actor (\d)$", out.stdout, re.M)
    stale = re.search(
        r"^staleness-1\s+\d+\s+([0-9.]+)\s+([0-9.]+)\s+[0-9.]+\s+planner (\d), actor (\d)$", out.stdout, re.M
    )
    assert sync and stale, out.stdout
    assert sync.group(3, 4) == ("0", "0") and stale.group(3, 4) == ("1", "1"), out.stdout
    assert re.search(r"^speedup [0-9.]+x; held-out pass@1 sync [0-9.]+, staleness-1 [0-9.]+$", out.stdout, re.M)
    bound = re.search(r"^overlap bound ([0-9.]+)x .* reached (\d+)% of it$", out.stdout, re.M)
    assert bound and 1.0 <= float(bound.group(1)) <= 2.0, out.stdout  # overlap can at most halve a round
    cpu = re.search(
        r"^CPU bound ([0-9.]+)x: the synchronous round kept \d+% of (\d+) cores busy \(([0-9.]+) CPU-s per "
        r"([0-9.]+) s round, every process of the machine\); the tighter bound ([0-9.]+)x, reached \d+%$",
        out.stdout,
        re.M,
    )
    assert cpu, out.stdout
    cpu_bound, cores, host_cpu_s, round_s, tighter = (float(x) for x in cpu.groups())
    # The bound the cores set is cores x round / the round's CPU-seconds (of every process: one that forgot the
    # Ray workers' would show here), and the tighter bound the lesser of it and the overlap bound.
    assert host_cpu_s > 0 and abs(cpu_bound - cores * round_s / host_cpu_s) <= 0.01 + 0.02 * cpu_bound, out.stdout
    assert tighter == min(cpu_bound, float(bound.group(1))), out.stdout
    assert re.search(r"^share of the possible gain reached: (-?\d+|nan)% ", out.stdout, re.M), out.stdout
