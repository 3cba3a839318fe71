"""A repository's own tests run in the sandbox decide which mutants become tasks (real pytest runs)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from graph_planner.corpus.mutate import mutants
from graph_planner.corpus.testrun import Suite, load_proof
from graph_planner.corpus.validate import baseline, run_tests, validate_mutant

from .repair_fixture import CLAMP, write_files

FILES = {
    "mini/__init__.py": "",
    "mini/core.py": CLAMP
    + """

        def unused(flag=True):
            return flag
        """,
    "tests/test_core.py": """
        from mini.core import clamp


        def test_inside():
            assert clamp(5, 0, 10) == 5


        def test_low_edge():
            assert clamp(0, 0, 10) == 0 and clamp(-1, 0, 10) == 0


        def test_high():
            assert clamp(11, 0, 10) == 10


        class TestMore:
            def test_equal_bounds(self):
                assert clamp(3, 3, 3) == 3
        """,
}


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    return write_files(tmp_path_factory.mktemp("mini-repo"), FILES)


def test_baseline_reads_every_test_by_node_id(repo):
    base = baseline(repo, runs=2)
    assert base.passing == {
        "tests/test_core.py::test_inside",
        "tests/test_core.py::test_low_edge",
        "tests/test_core.py::test_high",
        "tests/test_core.py::TestMore::test_equal_bounds",
    }
    assert not base.flaky
    # the coverage recorder saw which function each test calls; `unused` is called by none
    # ...in the order the clean suite ran them (file order), which every later run of the task keeps
    assert (
        base.covering("mini/core.py", "clamp")
        == base.order
        == [
            "tests/test_core.py::test_inside",
            "tests/test_core.py::test_low_edge",
            "tests/test_core.py::test_high",
            "tests/test_core.py::TestMore::test_equal_bounds",
        ]
    )
    assert base.covering("mini/core.py", "unused") == []
    assert base.covered_functions()["mini/core.py"] == {"clamp"}


def test_a_mutant_is_kept_only_when_a_baseline_test_fails(repo):
    passing = baseline(repo, runs=1)
    source = (repo / "mini" / "core.py").read_text()
    by_desc = {m.description: m for m in mutants("mini/core.py", source)}
    kept = validate_mutant(repo, by_desc["x > hi -> x >= hi"], passing)
    # x >= hi returns hi for x == hi: equal bounds and the high edge still hold, nothing fails -> dropped
    assert not kept.kept and kept.reason == "no baseline test fails"
    flip = validate_mutant(repo, by_desc["x < lo -> x <= lo"], passing)
    assert not flip.kept  # x <= lo returns lo for x == lo: the same value, an equivalent mutant
    broken = validate_mutant(repo, by_desc["remove the early return on line 5"], passing)
    assert broken.kept and broken.fail_to_pass == ["tests/test_core.py::test_high"]
    assert set(broken.pass_to_pass) == passing.passing - {"tests/test_core.py::test_high"}
    untested = validate_mutant(repo, by_desc["default True -> False"], passing)
    assert not untested.kept and untested.reason == "no passing test calls the function"
    # without a coverage map the whole suite decides, with the same answer
    assert validate_mutant(repo, by_desc["remove the early return on line 5"], passing.passing).fail_to_pass == [
        "tests/test_core.py::test_high"
    ]


@pytest.mark.serial  # asserts a wall-clock limit: run with the machine to itself
def test_a_hanging_test_run_is_a_timeout_not_a_task(repo):
    hang = "def clamp(x, lo, hi):\n    while True:\n        pass\n"
    run = run_tests(repo, suite=Suite(timeout_s=3), overrides={"mini/core.py": hang})
    assert run.status == "timeout" and run.seconds < 8


@pytest.mark.serial  # asserts a wall-clock limit: run with the machine to itself
def test_a_load_proof_limit_keeps_a_slow_but_finite_run_and_still_stops_a_hang(repo):
    """A mutant's verdict must not depend on how loaded the machine is: a test that waits past the limit
    (as a starved run does) passes under a CPU-time limit, while a busy hang is still a timeout."""
    slow = "import time\n\n\ndef clamp(x, lo, hi):\n    time.sleep(1.5)\n    return max(lo, min(x, hi))\n"
    tests = ["tests/test_core.py::test_high"]
    assert run_tests(repo, tests, Suite(timeout_s=1.0), overrides={"mini/core.py": slow}).status == "timeout"
    waited = run_tests(repo, tests, load_proof(Suite(), 1.0), overrides={"mini/core.py": slow})
    assert waited.status == "ok" and waited.passed() == set(tests)
    hang = "def clamp(x, lo, hi):\n    while True:\n        pass\n"
    run = run_tests(repo, tests, load_proof(Suite(), 2.0), overrides={"mini/core.py": hang})
    assert run.status == "timeout" and run.seconds < 6


def test_the_clean_suites_cpu_seconds_count_its_work_and_not_its_waiting(tmp_path):
    """A mutant's CPU limit is derived from the clean suite's CPU seconds: a suite that waits 1.5 s
    takes that long on the clock but its CPU time stays the interpreter's and pytest's work."""
    slow = write_files(
        tmp_path,
        {
            "slow/__init__.py": "",
            "slow/core.py": "def one():\n    return 1\n",
            "tests/test_slow.py": "import time\nfrom slow.core import one\n\n\ndef test_one():\n    time.sleep(1.5)\n    assert one() == 1\n",
        },
    )
    base = baseline(slow, runs=2)
    assert base.passing == {"tests/test_slow.py::test_one"}
    assert base.seconds > 1.5 and 0.05 < base.cpu_seconds < base.seconds - 1.0


def test_a_packages_suite_runs_without_the_pytest_plugins_installed_beside_planact(tmp_path):
    """Verdicts must not depend on what else is installed (a reordering or timeout plugin would change them)."""
    repo = write_files(
        tmp_path / "plugins",
        {
            "tests/test_isolated.py": """
            def test_only_pytests_own_plugins(pytestconfig):
                for name in ("xdist", "anyio", "timeout", "hypothesispytest"):
                    assert not pytestconfig.pluginmanager.has_plugin(name), name
            """,
        },
    )
    run = run_tests(repo, suite=Suite(".", (), (), 30.0))
    assert run.outcomes == {"tests/test_isolated.py::test_only_pytests_own_plugins": "passed"}, run.tail[-1500:]


INHERITED = {
    "inh/__init__.py": "",
    "inh/core.py": "def double(x):\n    return 2 * x\n",
    # unittest-style suites that keep their test methods on a base class in the test package's __init__
    "tests/__init__.py": """
        import unittest

        from inh.core import double


        class DoubleChecks:
            def test_double_two(self):
                self.assertEqual(double(2), 4)

            def test_double_zero(self):
                self.assertEqual(double(0), 0)
        """,
    "tests/test_inh.py": """
        import unittest

        import pytest

        from inh.core import double
        from tests import DoubleChecks


        class TestDouble(DoubleChecks, unittest.TestCase):
            pass


        @pytest.mark.parametrize("x,y", [(1, 2), (3, 6)])
        def test_param(x, y):
            assert double(x) == y
        """,
}


def test_inherited_parametrised_and_unittest_tests_are_recorded_under_ids_pytest_can_run_again(tmp_path):
    repo = write_files(tmp_path / "inh", INHERITED)
    base = baseline(repo, runs=1)
    assert (
        set(base.order)
        == base.passing
        == {
            "tests/test_inh.py::TestDouble::test_double_two",
            "tests/test_inh.py::TestDouble::test_double_zero",
            "tests/test_inh.py::test_param[1-2]",
            "tests/test_inh.py::test_param[3-6]",
        }
    )
    # the recorded ids run as they are, one by one and all together, with the host's canaries beside them
    for test in base.order:
        assert run_tests(repo, tests=[test]).outcomes == {test: "passed"}
    again = run_tests(repo, tests=base.order)
    assert again.order == base.order and not again.tampered and again.passed() == base.passing


def test_a_package_whose_tests_inherit_from_a_base_class_yields_tasks_whose_gold_patch_passes_submit(tmp_path):
    """The build checks every kept task's gold patch through the agent's own Submit, and the rule agent
    solves tasks of a package whose test methods live on a base class in tests/__init__.py."""
    from graph_planner.agents.rule import RuleAgent
    from graph_planner.corpus.build import build_corpus
    from graph_planner.corpus.spec import CorpusConfig, PackageSpec
    from graph_planner.env import EnvLimits, PlannerEnv
    from graph_planner.evaluate import run_episode
    from graph_planner.judge import gold_submit
    from graph_planner.runtime import LocalRuntime
    from graph_planner.tasks import load_tasks

    src = write_files(tmp_path / "inh-src", INHERITED)
    spec = PackageSpec(name="inh", version="0.1", source=str(src), split="heldout")
    cfg = CorpusConfig(
        packages=[spec], per_function=4, max_tried=8, max_kept=8, timeout_s=30, kinds=["binop", "constant"]
    )
    summary = build_corpus(cfg, tmp_path / "corpus", log=lambda _: None)
    tasks = load_tasks(tmp_path / "corpus", split="heldout")
    assert summary["tasks"] == len(tasks) > 0 and "unusable" not in summary["packages"][0]
    assert all("::TestDouble::" in t or "test_param[" in t for task in tasks for t in task.fail_to_pass)
    runtime = LocalRuntime()
    try:
        assert [gold_submit(runtime, t) for t in tasks] == [""] * len(tasks)
    finally:
        runtime.close()
    env = PlannerEnv(limits=EnvLimits(test_cpu_s=20))
    try:
        solved = [run_episode(env, t, RuleAgent())["resolved"] for t in tasks]
    finally:
        env.runtime.close()
    assert any(solved)


def test_a_package_whose_gold_patches_all_fail_submit_is_reported_unusable_unless_the_jail_judges_them(tmp_path):
    """Removing a statement that uses `os` makes a task whose own fix the patch check refuses: dropped with
    the reason, and the package, left with none, is reported unusable instead of yielding tasks. Built with
    the call jail, the task qualifies first and its fix goes down the jailed path an agent's takes, where the
    body runs only in the jail and the check judges structure alone: kept."""
    from graph_planner.corpus.build import build_corpus
    from graph_planner.corpus.spec import CorpusConfig, PackageSpec
    from graph_planner.tasks import load_tasks

    files = {
        "paths/__init__.py": "",
        "paths/core.py": "import os\n\n\ndef join(a, b):\n    a = os.path.join(a, b)\n    return a\n",
        "tests/test_paths.py": "from paths.core import join\n\n\ndef test_join():\n    assert join('a', 'b') == 'a/b'\n",
    }
    src = write_files(tmp_path / "paths-src", files)
    spec = PackageSpec(name="paths", version="0.1", source=str(src), split="heldout")
    cfg = CorpusConfig(packages=[spec], per_function=4, max_tried=8, max_kept=8, timeout_s=30, kinds=["remove_stmt"])
    report = build_corpus(cfg, tmp_path / "corpus", log=lambda _: None)["packages"][0]
    assert report["kept"] == 0 and "refused by the patch check" in report["unusable"]
    assert report["gold_failures"] and "os" in report["gold_failures"][0]["reason"]
    jailed = build_corpus(cfg.model_copy(update={"jail": True}), tmp_path / "jailed", log=lambda _: None)
    assert jailed["packages"][0]["kept"] == 1 and not jailed["packages"][0]["gold_failures"], jailed
    assert [t.jail["qualname"] for t in load_tasks(tmp_path / "jailed")] == ["join"]


def test_a_run_the_host_stops_is_a_timeout_not_tampering(tmp_path):
    """Tests that passed before the CPU limit stopped the run leave no end of session: that is the limit's
    failure (timeout), never a voided verdict counted as tampering."""
    files = {
        "slow/__init__.py": "",
        "slow/core.py": "def one():\n    return 1\n",
        "tests/test_slow.py": "from slow.core import one\n\n\ndef test_quick():\n    assert one() == 1\n\n\n"
        "def test_spins():\n    while True:\n        pass\n",
    }
    repo = write_files(tmp_path / "slow", files)
    run = run_tests(
        repo, tests=["tests/test_slow.py::test_quick", "tests/test_slow.py::test_spins"], suite=load_proof(Suite(), 2.0)
    )
    assert (
        run.status == "timeout" and not run.tampered and run.outcomes.get("tests/test_slow.py::test_quick") == "passed"
    )


def test_unittest_subtests_are_one_test_each_and_never_read_as_a_forged_report(tmp_path):
    """pytest reports every subTest under its test's id: not a duplicate report; a failing one fails it."""
    files = {
        "sub/__init__.py": "",
        "sub/core.py": "def sign(x):\n    return (x > 0) - (x < 0)\n",
        "tests/test_sub.py": "import unittest\n\nfrom sub.core import sign\n\n\nclass Signs(unittest.TestCase):\n"
        "    def test_signs(self):\n        for x, s in [(3, 1), (0, 0), (-2, -1)]:\n"
        "            with self.subTest(x=x):\n                self.assertEqual(sign(x), s)\n\n"
        "    def test_one(self):\n        self.assertEqual(sign(9), 1)\n",
    }
    repo = write_files(tmp_path / "sub", files)
    ids = ["tests/test_sub.py::Signs::test_signs", "tests/test_sub.py::Signs::test_one"]
    run = run_tests(repo, tests=ids)
    assert not run.tampered and run.outcomes == {t: "passed" for t in ids}
    broken = run_tests(repo, tests=ids, overrides={"sub/core.py": "def sign(x):\n    return (x > 0) - (x <= 0)\n"})
    assert not broken.tampered and broken.outcomes == {ids[0]: "failed", ids[1]: "passed"}


def test_test_modules_that_need_a_missing_package_are_ignored_and_a_broken_package_does_not_stop_the_build(
    tmp_path,
):
    """A test module importing a package this machine lacks is left out (reported, and the tasks' Submit
    leaves it out too); a package where no test passes is reported unusable with pytest's last words while
    the next package still builds, into the split its entry names (unseen_2025 here)."""
    from graph_planner.corpus.build import build_corpus
    from graph_planner.corpus.spec import CorpusConfig, PackageSpec
    from graph_planner.judge import gold_submit
    from graph_planner.runtime import LocalRuntime
    from graph_planner.tasks import load_tasks

    broken = write_files(
        tmp_path / "broken-src",
        {"brk/__init__.py": "", "tests/test_brk.py": "import brk\n\n\ndef test_no():\n    assert False\n"},
    )
    mixed = write_files(
        tmp_path / "mixed-src",
        {
            **{k.replace("mini", "mixed"): v.replace("mini.", "mixed.") for k, v in FILES.items()},
            "mixed/more.py": "def double(x):\n    return x * 2\n",
            "tests/test_more.py": "from mixed.more import double\n\n\ndef test_double():\n    assert double(3) == 6\n",
            "tests/test_needs_numpy.py": "import numpy_is_not_here\n\n\ndef test_arr():\n    assert True\n",
        },
    )
    cfg = CorpusConfig(
        packages=[
            PackageSpec(name="brk", version="0.1", source=str(broken), split="heldout"),
            PackageSpec(name="mixed", version="0.1", source=str(mixed), split="unseen_2025"),
        ],
        per_function=4,
        max_tried=8,
        max_kept=8,
        timeout_s=30,
        kinds=["binop"],
    )
    summary = build_corpus(cfg, tmp_path / "corpus", log=lambda _: None)
    brk, mix = summary["packages"]
    assert "no test passes" in brk["unusable"] and "1 failed" in brk["unusable"]
    assert summary["unusable"] == {"brk-0.1": brk["unusable"]}
    assert mix["modules_ignored"] == {
        "tests/test_needs_numpy.py": "ModuleNotFoundError: No module named 'numpy_is_not_here'"
    }
    assert mix["kept"] > 0 and summary["unseen_2025"] == mix["kept"] and summary["heldout"] == 0
    tasks = load_tasks(tmp_path / "corpus", split="unseen_2025")
    assert len(tasks) == mix["kept"] and all(t.meta["split"] == "unseen_2025" for t in tasks)
    assert len(load_tasks(tmp_path / "corpus")) == mix["kept"]
    runtime = LocalRuntime()
    try:
        assert [gold_submit(runtime, t) for t in tasks] == [""] * len(tasks)
    finally:
        runtime.close()


def test_a_mutant_failing_many_tests_is_kept_and_a_hang_still_stops(tmp_path):
    """Failure reports cost CPU: a mutant that fails every test of a big suite can cost several times the clean
    suite. Judged against a limit that grows per test run, it is kept (the same in every build, however
    noisy CPU time is), while a hang still ends at that finite limit."""
    from graph_planner.corpus.mutate import Mutant

    # 150 tests, each comparing a 150-line table: a failing one makes pytest diff the two texts (~7 ms a test, which
    # no cache of the boot script removes; a bare traceback costs ~1 ms since it shares pytest's source caches, and
    # the failing run then overlapped the clean run's CPU). The hang burns the whole allowance (clean suite + 0.02 s
    # per test), so more tests cost more CPU for the same verdicts.
    deep = "def deep(n):\n    return 0 if n == 0 else deep(n - 1)\n"
    core = deep + "\n\ndef table(n, rows):\n    return '\\n'.join(f'row {k}: {deep(n) + k}' for k in range(rows))\n"
    body = "\n".join(f"def test_{i}():\n    assert table({i % 7 + 20}, 150) == expected(150)\n" for i in range(150))
    repo = write_files(
        tmp_path,
        {
            "big/__init__.py": "",
            "big/core.py": core,
            "tests/test_big.py": "from big.core import table\n\n\n"
            "def expected(rows):\n    return '\\n'.join(f'row {k}: {k}' for k in range(rows))\n\n\n" + body,
        },
    )
    base = baseline(repo, runs=1)
    assert len(base.passing) == 150
    broken = Mutant("big/core.py", "deep", "constant", 2, "0 -> 1", core.replace("return 0 if", "return 1 if"))
    # The tight limit is one plain clean run's CPU (~0.6 s here; the failing run costs ~1.6: in 5 runs of each the
    # cheapest failing run cost 1.96x the dearest clean one, against 0.87x with bare tracebacks). The baseline's own
    # figure comes from its coverage-recording run, too close to the failing run to hold on a loaded machine (CI once
    # measured the failing run under it).
    clean = run_tests(repo, suite=Suite())
    assert clean.status == "ok" and clean.cpu_s
    tight = load_proof(Suite(), clean.cpu_s)
    assert validate_mutant(repo, broken, base, tight).reason == "test run timeout"  # failure reports cost more
    allowed = replace(tight, cpu_per_test_s=0.02)  # ~7 ms per failing test here
    kept = validate_mutant(repo, broken, base, allowed)
    assert kept.kept and len(kept.fail_to_pass) == 150
    loop = "def deep(n):\n    while True:\n        n += 1\n"
    hang = Mutant("big/core.py", "deep", "bound", 2, "loop", core.replace(deep, loop))
    stopped = validate_mutant(repo, hang, base, allowed)
    assert stopped.reason == "test run timeout"
