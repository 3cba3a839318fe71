"""A jailed task's pass is judged twice before it earns reward or enters the result cache.

Review 20 (A24): a jailed body that guessed among 8 answers where no test told it which one (its randomness is the
child's own: getrandom, RDRAND, a new zygote's hash seed) passed one run in 8; judged once, that lucky run was a
confirmed pass, cached, and the same text scored 1 on every later submission. The judge's own logic is exercised here
with a stand-in for the sandbox's runs (each real run is a sandboxed pytest, tested in tests/integration).
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from graph_planner import judge
from graph_planner.corpus import testrun
from graph_planner.result_cache import ResultCache

TESTS = ["tests/test_core.py::test_a", "tests/test_core.py::test_b"]
TARGET = ("pkg.core", "pkg/core.py", "target", 1, 3, "pkg", "def target(x):\n    return x\n")


class Runs:
    """The sandbox's runtime as the judge sees it: a fresh checkout, then the next scripted test run."""

    def __init__(self, tmp_path, outcomes: list[str]):
        self.tmp_path, self.outcomes, self.calls = tmp_path, list(outcomes), []

    def reset(self, task):
        (self.tmp_path / "pkg").mkdir(exist_ok=True)
        return self.tmp_path

    def run_tests(self, tests, suite, guard, confirm=False):
        self.calls.append((guard, confirm))
        outcome = self.outcomes.pop(0)
        return testrun.TestRun(outcomes={t: outcome for t in tests}, seconds=0.1, cpu_s=0.1)


@pytest.fixture
def jailed(monkeypatch):
    monkeypatch.setattr(judge, "off_target", lambda task, patch: [])
    monkeypatch.setattr(judge, "jail_target", lambda task, patch: TARGET)
    return SimpleNamespace(instance_id="pkg__t1", jail={"module": "pkg.core"}, suite=testrun.Suite(timeout_s=30.0))


def _submit(runs, cache, task):
    patch = {"pkg/core.py": "def target(x):\n    return x + 1\n"}
    return judge.run_patch(runs, cache, task, patch, TESTS, "submit", 10.0)


def test_a_pass_the_confirming_run_does_not_repeat_scores_0_and_is_not_cached(jailed, tmp_path):
    runs, cache = Runs(tmp_path, ["passed", "failed"]), ResultCache()
    result = _submit(runs, cache, jailed)
    assert not judge.passed(result) and result["status"] == "tampered" and "confirming run" in result["tampered"]
    assert [confirm for _, confirm in runs.calls] == [False, True]
    assert all(guard.jail == TARGET for guard, _ in runs.calls)  # both runs with the function in the jail
    assert cache.entries == {}  # nothing a later submission of the same text could reuse


def test_a_pass_both_runs_agree_on_is_confirmed_and_cached_and_a_failure_runs_once(jailed, tmp_path):
    runs, cache = Runs(tmp_path, ["passed", "passed"]), ResultCache()
    result = _submit(runs, cache, jailed)
    assert judge.passed(result) and result["confirmed"] and result["jailed"]
    assert _submit(runs, cache, jailed)["cached"]  # the confirmed pass is reused, not run again
    failing = Runs(tmp_path, ["failed"])
    assert not judge.passed(_submit(failing, ResultCache(), jailed)) and len(failing.calls) == 1
