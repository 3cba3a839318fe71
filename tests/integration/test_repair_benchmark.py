"""benchmarks/repair_throughput.py, state_digest_gold.py and free_form.py in their tiny modes, so they cannot rot."""

from __future__ import annotations

import json
import re

from .conftest import run_script


def test_repair_throughput_benchmark_runs_and_prints_the_scaling():
    out = run_script("benchmarks/repair_throughput.py", "--tiny", "--slots", "2", timeout=300)
    lines = out.stdout.strip().splitlines()
    assert lines[1].startswith("1 slot:") and lines[2].startswith("2 slots:")
    assert "scaling efficiency" in lines[3] and "tasks/s" in lines[2]
    # the verdict's defences, measured on the same gold patches: the guard's and the double judgement's cost
    guard, twice, jailed = (float(line.split(": ")[1].split("x")[0]) for line in (lines[-4], lines[-3], lines[-1]))
    assert lines[-4].startswith("guard:") and lines[-3].startswith("a pass judged twice:")
    assert guard >= 0.5 and twice > 1.0  # a confirming run is a second run: judging twice cannot be free
    # the tiny corpus qualifies for the call jail: the path model-written text takes, measured the same way
    assert lines[-2].startswith("jailed tasks (") and lines[-1].startswith("a pass judged twice in the call jail:")
    assert jailed > 1.0, out.stdout


def test_state_digest_gold_benchmark_passes_every_gold_fix_of_its_tiny_corpus():
    """The digest's gold benchmark on its built-in package: every gold fix, compared with its own state
    reference through Submit, passes and none is voided (a voided gold fix is a false refusal)."""
    out = run_script("benchmarks/state_digest_gold.py", "--tiny", timeout=300)
    rows = [json.loads(line.split("] ", 1)[1]) for line in out.stdout.splitlines() if line.startswith("[")]
    assert rows and all(r["passed"] and not r["voided"] and r["reference"] == "ok" for r in rows), out.stdout
    total = json.loads(out.stdout[out.stdout.index("\n{") :])["all"]
    assert total["tasks"] == len(rows) and total["passed"] == len(rows) and total["keys"] > 0, total


def test_free_form_benchmark_tiny_mode():
    """benchmarks/free_form.py --tiny: both sampling arms' rates and their ratio, the model's replies judged
    (malformed and refused counted), and the scripted gold replies solving every task through the same path."""
    out = run_script("benchmarks/free_form.py", "--tiny", timeout=300)
    rates = [float(x) for x in re.findall(r"([0-9.]+) tokens/s", out.stdout)]
    ratio = float(re.search(r"ratio engine / plain: ([0-9.]+)x", out.stdout).group(1))
    assert len(rates) == 2 and min(rates) > 0 and abs(ratio - rates[0] / rates[1]) <= 0.01 + 0.01 * ratio, out.stdout
    model = re.search(r"^model: solve rate [0-9.]+ \((\d+)/(\d+)\), malformed (\d+), refused (\d+)", out.stdout, re.M)
    assert model and int(model.group(2)) >= 2, out.stdout
    assert int(model.group(1)) + int(model.group(3)) + int(model.group(4)) <= int(model.group(2))
    gold = re.search(r"^gold control: solve rate 1\.000 \((\d+)/(\d+)\), malformed 0, refused 0", out.stdout, re.M)
    assert gold and gold.group(1) == gold.group(2) == model.group(2), out.stdout
