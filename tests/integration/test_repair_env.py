"""PlannerEnv on a real (tiny) package: corpus build, gold-patch re-validation, rule agent, telemetry,
malformed actions, and the patch screen. Every test run is real pytest in the real sandbox."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from graph_planner.agents import RuleAgent, run_episode
from graph_planner.corpus.build import MUTANT_CPU_FLOOR_S
from graph_planner.env import EnvLimits, PlannerEnv
from graph_planner.tasks import load_tasks

from .conftest import REPO
from .repair_fixture import build_minilib


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return build_minilib(tmp_path_factory.mktemp("repair"))


@pytest.fixture
def env(tmp_path):
    e = PlannerEnv(limits=EnvLimits(test_cpu_s=10), telemetry=tmp_path / "telemetry.jsonl")
    yield e
    e.runtime.close()


def test_corpus_tasks_are_swe_bench_instances_with_reasons_for_drops(corpus):
    report = json.loads((corpus / "report.json").read_text())["packages"][0]
    assert report["kept"] >= 5 and report["tried"] == report["kept"] + sum(report["dropped"].values())
    # a mutant's limit comes from the clean suite's CPU seconds (not its wall seconds, which follow the load)
    assert (
        0 < report["suite_cpu_s"]
        and abs(report["mutant_cpu_limit_s"] - max(MUTANT_CPU_FLOOR_S, 4 * report["suite_cpu_s"])) < 0.05
    )
    rows = [json.loads(line) for line in (corpus / "heldout.jsonl").read_text().splitlines()]
    for row in rows:
        assert {
            "instance_id",
            "repo",
            "version",
            "base_commit",
            "patch",
            "test_patch",
            "FAIL_TO_PASS",
            "PASS_TO_PASS",
            "problem_statement",
            "mutation",
            "file",
            "function",
            "difficulty",
        } <= set(row)
        assert row["FAIL_TO_PASS"] and row["patch"].startswith("--- a/minilib/core.py")
        # the statement is written from the failing tests, never from the fix
        assert row["FAIL_TO_PASS"][0] in row["problem_statement"]
        assert row["patch"] not in row["problem_statement"]
    # no two kept mutants of one function fail the same tests
    keys = [(r["function"], tuple(r["FAIL_TO_PASS"])) for r in rows]
    assert len(keys) == len(set(keys))


def test_every_task_revalidates_gold_fixes_and_bug_fails(corpus, env):
    for task in load_tasks(corpus, split="heldout"):
        env.reset(task)
        obs, reward, done, _ = env.step({"type": "submit"})
        assert reward == 0.0 and done and task.fail_to_pass[0] in obs["tests"]["failed"]
        env.reset(task)
        obs, _, _, _ = env.step({"type": "repair", "apply": False, "patch": task.gold_patch})
        assert obs["applied"], obs
        obs, reward, done, info = env.step({"type": "submit"})
        assert reward == 1.0 and obs["resolved"], (task.instance_id, obs)


def test_rule_agent_repairs_token_level_bugs_and_logs_every_step(corpus, env, tmp_path):
    tasks = [
        t for t in load_tasks(corpus, split="heldout") if t.meta["mutation"] in ("comparison", "binop", "constant")
    ]
    assert tasks
    stats = [run_episode(env, t, RuleAgent()) for t in tasks]
    assert sum(s["resolved"] for s in stats) >= 1
    assert all(s["test_runs"] <= env.limits.test_runs + 1 for s in stats)
    # its edits are planact's own candidates (candidates.menu_edit): judged on these unjailed tasks, none unjudged
    assert all(s["unjudged"] == 0 for s in stats)
    lines = [json.loads(line) for line in (tmp_path / "telemetry.jsonl").read_text().splitlines()]
    assert len(lines) == sum(s["steps"] for s in stats)
    assert {"action", "observation", "reward", "done", "step", "instance_id"} <= set(lines[0])
    assert any(line["test"] and line["test"]["mode"] == "fail_to_pass" for line in lines)


def test_the_candidates_op_lists_the_menu_whose_inverse_fixes_a_negated_condition(corpus, env):
    """Explore(candidates): the environment's enumerated edits for a function, proposals capped and last; the
    negate_if task's fix is in the menu (an inverse, not a token edit) and scores 1 as an ordinary Repair."""
    from graph_planner.judge import gold_texts

    task = next(t for t in load_tasks(corpus, split="heldout") if t.meta["mutation"] == "negate_if")
    node, file = f"{task.meta['file']}::{task.meta['function']}", task.meta["file"]
    env.reset(task)
    obs, _, _, _ = env.step({"type": "explore", "op": "candidates", "nodes": [node, "nope.py::x"], "proposals": 5})
    menu, base, fixed = obs["menus"][node], env._read_base(file), gold_texts(task)[file]
    assert obs["unknown_nodes"] == ["nope.py::x"]
    proposed = [m["proposed"] for m in menu]
    assert 0 < sum(proposed) <= 5 and proposed == sorted(proposed)  # proposals last, at most the cap
    fix = next(m for m in menu if base.replace(m["edit"]["old"], m["edit"]["new"], 1) == fixed)
    assert fix["kind"] == "negate_if" and not fix["proposed"]
    env.step({"type": "repair", "apply": False, "edits": [fix["edit"]]})
    _, reward, done, _ = env.step({"type": "submit"})
    assert reward == 1.0 and done


def test_coverage_ranks_the_buggy_function_on_its_own_budget_and_caches_the_spectrum(corpus, env):
    """Explore(coverage) names the mutated function for every held-out task, costs no test run, and a
    repeated call (or a later episode on the task) reads the cached spectrum instead of running again."""
    tasks = load_tasks(corpus, split="heldout")
    for task in tasks:
        env.reset(task)
        obs, *_ = env.step({"type": "explore", "op": "coverage"})
        bug = f"{task.meta['file']}::{task.meta['function']}"
        ranked = [r["node"] for r in obs["results"]]
        assert bug in ranked[:2], (task.instance_id, obs)
        assert obs["coverage_run"]["failed"] >= len(task.fail_to_pass) and obs["coverage_run"]["passed"] >= 1
        assert env.stats.coverage_runs == 1 and env.stats.test_runs == 0 and env.stats.coverage_s > 0
        again, *_ = env.step({"type": "explore", "op": "coverage", "formula": "dstar"})
        assert env.stats.coverage_runs == 1 and bug in [r["node"] for r in again["results"]][:2]
    env.limits.coverage_runs = 0
    env.cache.entries.clear()
    env.reset(tasks[0])
    obs, *_ = env.step({"type": "explore", "op": "coverage"})
    assert obs["error"] == "coverage budget spent" and env.stats.coverage_runs == 0


def test_malformed_actions_are_observed_and_counted_never_raised(corpus, env):
    task = load_tasks(corpus, split="heldout")[0]
    env.reset(task)
    for bad in (
        "not json at all",
        '{"type": "explore", "op": "teleport"}',
        '{"type": "repair", "patch": 7}',
        [1, 2],
        {"type": "repair", "patch": "--- a/../../etc/passwd\n+++ b/../../etc/passwd\n@@ -1 +1 @@\n-x\n+y\n"},
        {"type": "repair", "edits": [{"file": "tests/test_core.py", "old": "assert", "new": "assert True or"}]},
    ):
        obs, reward, done, info = env.step(bad)
        assert "error" in obs and reward == 0.0
    assert info["stats"]["malformed"] == 4 and info["stats"]["patch_errors"] == 2
    # the step budget ends an episode that never submits
    env.limits.steps = 8
    while not done:
        obs, reward, done, info = env.step({"type": "explore", "op": "find", "anchors": ["clamp"]})
    assert obs["done_reason"] == "step budget spent" and reward == 0.0


def test_screen_refuses_a_patch_that_could_forge_the_verdict(corpus, env):
    task = load_tasks(corpus, split="heldout")[0]
    env.fixed_origin = "menu"  # the static path's check is under test (model text would never run here)
    env.reset(task)
    forge = "def clamp(x, lo, hi):\n    import os\n    os._exit(0)\n"
    source = env._read_base("minilib/core.py")
    head = source.split("def mean")[0]
    obs, _, _, info = env.step(
        {"type": "repair", "edits": [{"file": "minilib/core.py", "old": head, "new": forge + "\n\n"}]}
    )
    assert not obs["applied"] and "refused" in obs["error"] and info["stats"]["refused"] == 1
    sneaky = head.replace("return x", "return ().__class__.__base__")
    obs, _, _, _ = env.step({"type": "repair", "edits": [{"file": "minilib/core.py", "old": head, "new": sneaky}]})
    assert not obs["applied"] and "__class__" in obs["error"]


def test_evaluation_runs_the_whole_suite_only_for_edits_whose_failing_tests_pass(corpus, tmp_path):
    """Sandbox's eval verdicts equal a plain Submit's, and a wrong edit costs no whole-suite run."""
    from graph_planner.team.sandbox import Sandbox

    box = Sandbox(workers=1, cache_path=tmp_path / "cache.jsonl", test_cpu_s=20)
    try:
        judged = 0
        for task in load_tasks(corpus, split="heldout"):
            minus = [x[1:] for x in task.gold_patch.splitlines() if x.startswith("-") and not x.startswith("---")]
            plus = [x[1:] for x in task.gold_patch.splitlines() if x.startswith("+") and not x.startswith("+++")]
            if len(minus) != 1 or len(plus) != 1:
                continue
            gold = {"file": task.meta["file"], "old": minus[0], "new": plus[0]}
            wrong = {"file": task.meta["file"], "old": minus[0], "new": minus[0] + "  # unchanged"}
            before = dict(box.stats)
            assert box.judge(task, gold, "eval", "gold") == {
                "resolved": True,
                "cached": False,
                "refused": False,
                "runs": 2,
                "full": 1,
                "tampering": 0,
            }
            w = box.judge(task, wrong, "eval", "menu")  # (a stand-in for a wrong candidate)
            assert not w["resolved"] and w["full"] == 0 and w["runs"] == 1
            assert box.stats["full_runs"] - before["full_runs"] == 1
            assert box.judge(task, gold, "eval", "gold")["cached"]  # both of its runs are remembered
            judged += 1
        assert judged >= 3
    finally:
        box.close()


def test_a_capped_build_stops_early_and_keeps_the_same_first_tasks(corpus, tmp_path):
    """max_kept stops validation once reached; the kept tasks are the uncapped build's first ones."""
    from graph_planner.corpus.build import build_corpus
    from graph_planner.corpus.spec import CorpusConfig, PackageSpec

    from .repair_fixture import write_package

    full = [t.instance_id for t in load_tasks(corpus, split="heldout")]
    spec = PackageSpec(name="minilib", version="0.1", source=str(write_package(tmp_path)), split="heldout")
    capped = CorpusConfig(packages=[spec], per_function=3, max_tried=14, max_kept=3, timeout_s=30)
    build_corpus(capped, tmp_path / "capped", log=lambda _: None)
    report = json.loads((tmp_path / "capped" / "report.json").read_text())["packages"][0]
    assert [t.instance_id for t in load_tasks(tmp_path / "capped", split="heldout")] == full[:3]
    assert report["tried"] < json.loads((corpus / "report.json").read_text())["packages"][0]["tried"]
    assert report["tried"] == report["kept"] + sum(report["dropped"].values())


def test_the_team_sandbox_refuses_edits_that_forge_or_escape_before_any_test_runs(corpus, tmp_path):
    """The RL reward's sandbox keeps PlannerEnv's rules: tests, other files and screened names never run."""
    from graph_planner.team.sandbox import Sandbox

    task = load_tasks(corpus, split="heldout")[0]
    test_file = task.fail_to_pass[0].split("::")[0]
    attacks = [
        {"file": test_file, "old": "assert", "new": "assert True or"},  # edit the judge
        {"file": "../outside.py", "old": "x", "new": "y"},  # escape the copy
        {"file": "minilib/missing.py", "old": "x", "new": "y"},  # plant a new file
        {
            "file": task.meta["file"],
            "old": "def clamp(x, lo, hi):",  # forge from inside the process
            "new": "def clamp(x, lo, hi):\n    import os; os._exit(0)",
        },
    ]
    box = Sandbox(workers=1, cache_path=tmp_path / "cache.jsonl", test_cpu_s=20)
    try:
        why = ["is a test file", "only paths inside the repository", "not a Python file", "patch refused"]
        for edit, reason in zip(attacks, why):
            for mode in ("train", "eval"):
                v = box.judge(task, edit, mode, "menu")  # the static path's rules are under test
                assert v["refused"] and not v["resolved"] and v["runs"] == 0 and reason in v["error"], (edit, v)
        assert box.stats["test_runs"] == 0 and box.stats["refused"] == 2 * len(attacks)
    finally:
        box.close()


def run_benchmark(script: str, corpus, *args: str) -> str:
    """A benchmark's tiny mode on the tiny package's unseen-package split; its stdout."""
    proc = subprocess.run(
        [sys.executable, f"benchmarks/{script}", "--corpus", str(corpus), "--splits", "unseen_packages", *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def test_localisation_benchmark_tiny_mode(corpus):
    """benchmarks/localisation.py on the tiny package (so it cannot rot): both arms, the same test budget."""
    out = run_benchmark("localisation.py", corpus, "--limit", "3", "--workers", "1", "--test-runs", "2")
    graph, sbfl = (
        line.split() for line in out.splitlines() if line.startswith("unseen_packages ") and "change" not in line
    )
    assert graph[1] == "graph" and sbfl[1] == "sbfl" and graph[2] == sbfl[2] == "3"
    assert float(sbfl[3]) == 1.0  # SBFL offers the buggy function for every tiny task
    assert "tasks x 2 arms" in out and "(test budget 2)" in out


def test_reachable_benchmark_tiny_mode(corpus):
    """benchmarks/reachable.py on the tiny package with a tiny untrained proposer (so it cannot rot): per kind
    which candidates hold the gold fix; the model's statements go through Submit."""
    out = run_benchmark("reachable.py", corpus, "--model", "tiny", "--max-gaps", "2")
    assert "+token" in out and "+repository" in out and "+model" in out
    # a token-level bug's fix is a token edit; the removed `total = total + v` is nowhere else in the module
    assert "constant" in out and "(token 1, inverse 0, repository 0)" in out
    assert "remove_stmt    0/1" in out and "model:" in out and "pass Submit" in out
    # how many of the repository-reachable fixes each menu cap keeps (none here: the statement is unique)
    assert "gold fixes among the repository proposals: 0; within the first 16: 0, first 64: 0, first 256: 0" in out
