"""Parsing model actions, applying patches, and candidate edits (no sandbox, no services); the patch check's
own tests are tests/unit/test_patch_check.py."""

from __future__ import annotations

import textwrap

import pytest

from graph_planner.actions import ActionError, Explore, Repair, Submit, parse_action
from graph_planner.candidates import candidate_edits
from graph_planner.corpus.mutate import TOKEN_LEVEL, mutants, unified_diff
from graph_planner.patching import PatchError, apply_diff, apply_edits

SRC = textwrap.dedent("""
    import math


    class Box:
        def area(self, w, h):
            if w < 0 or h < 0:
                return 0
            return w * h


    def hyp(a, b):
        return math.sqrt(a * a + b * b)
    """).lstrip()
FILES = {"pkg/geo.py", "tests/test_geo.py"}


def test_actions_parse_from_text_fences_and_dicts_with_clear_errors():
    assert isinstance(parse_action('```json\n{"type": "submit"}\n```'), Submit)
    assert parse_action({"type": "explore", "op": "find", "anchors": ["hyp"]}) == Explore(op="find", anchors=["hyp"])
    assert isinstance(parse_action('Sure! {"type": "repair", "plan": "fix", "target": "pkg/geo.py::hyp"}'), Repair)
    for bad, words in [
        ("no json here", "no JSON"),
        ('{"type": "dance"}', "type"),
        ("{'a': 1}", "invalid JSON"),
        ('{"type": "explore", "op": "find", "hop": 9}', "hop"),
        ("[1]", "no JSON"),
    ]:
        with pytest.raises(ActionError, match=words):
            parse_action(bad)


def test_unified_diff_applies_with_offset_and_refuses_what_it_must():
    fixed = SRC.replace("return w * h", "return w * h + 0")
    diff = unified_diff("pkg/geo.py", SRC, fixed)
    assert apply_diff(diff, lambda p: SRC, FILES) == {"pkg/geo.py": fixed}
    shifted = "# a new header line\n" + SRC  # the hunk's stated line is now off by one
    assert apply_diff(diff, lambda p: shifted, FILES)["pkg/geo.py"] == "# a new header line\n" + fixed
    with pytest.raises(PatchError, match="does not match"):
        apply_diff(diff, lambda p: SRC.replace("w * h", "h * w"), FILES)
    for path, words in [
        ("../etc/passwd", "inside"),
        ("/etc/passwd", "inside"),
        ("tests/test_geo.py", "test file"),
        ("pkg/new.py", "not a Python file"),
    ]:
        with pytest.raises(PatchError, match=words):
            apply_diff(diff.replace("pkg/geo.py", path), lambda p: SRC, FILES | {"tests/test_geo.py"})
    with pytest.raises(PatchError, match="no hunks"):
        apply_diff("just text", lambda p: SRC, FILES)


def test_edit_script_needs_exactly_one_occurrence():
    out = apply_edits([{"file": "pkg/geo.py", "old": "return 0", "new": "return -1"}], lambda p: SRC, FILES)
    assert "return -1" in out["pkg/geo.py"]
    with pytest.raises(PatchError, match="found 2"):
        apply_edits(
            [{"file": "pkg/geo.py", "old": "a * a", "new": "a"}], lambda p: SRC.replace("b * b", "a * a"), FILES
        )


def test_candidates_of_every_token_level_mutant_hold_its_fix():
    for m in mutants("pkg/geo.py", SRC, kinds=TOKEN_LEVEL):
        lines = m.source.splitlines(keepends=True)
        start = next(
            i
            for i, ln in enumerate(lines)
            if ln.lstrip().startswith(("def area", "def hyp")) and m.function.split(".")[-1] in ln
        )
        end = start + 1
        while end < len(lines) and (
            lines[end].startswith(" " * (len(lines[start]) - len(lines[start].lstrip()) + 1)) or not lines[end].strip()
        ):
            end += 1
        func = "".join(lines[start:end]).rstrip("\n") + "\n"
        fixes = [
            apply_edits([c.edit], lambda p, m=m: m.source, FILES)["pkg/geo.py"]
            for c in candidate_edits("pkg/geo.py", start + 1, func)
        ]
        assert SRC in fixes, m.description


def test_result_caches_over_one_file_share_what_each_other_appends(tmp_path):
    # Seeds run side by side over one corpus: a run's outcome must save the other run the same test run.
    from graph_planner.result_cache import ResultCache

    path = tmp_path / "results-cache.jsonl"
    a, b = ResultCache(path), ResultCache(path)
    key = ResultCache.key("t1", {"pkg/m.py": "x = 1\n"}, ["tests/test_m.py::test_x"])
    assert a.get(key) is None
    b.put(key, {"status": "ok", "failed": []})
    assert a.get(key) == {"status": "ok", "failed": []} and a.hits == 1
    with open(path, "a") as fh:  # a writer caught mid-line: nothing is read until its line is whole
        fh.write('{"key": "k2", "result": {"status"')
    assert a.get("k2") is None
    with open(path, "a") as fh:
        fh.write(': "ok"}}\n')
    assert a.get("k2") == {"status": "ok"} and ResultCache(path).get("k2") == {"status": "ok"}


class _CountingRuntime:
    """Stands in for LocalRuntime: records the suite each run gets and answers `status`."""

    def __init__(self, tmp_path, status: str):
        self.tmp_path, self.status, self.suites = tmp_path, status, []

    def reset(self, task):
        return self.tmp_path

    def run_tests(self, tests, suite, guard=None, confirm=False):
        from graph_planner.corpus.testrun import TestRun

        self.suites.append(suite)
        self.confirms = getattr(self, "confirms", 0) + confirm
        return TestRun({t: "passed" for t in tests} if self.status == "ok" else {}, self.status, 1.0)


def test_a_reward_run_is_judged_by_cpu_time_and_an_old_wall_clock_timeout_is_judged_again(tmp_path):
    """A test run starved by a loaded machine must not become a cached reward of 0."""
    from graph_planner.judge import passed, run_patch
    from graph_planner.result_cache import ResultCache
    from graph_planner.tasks import RepairTask

    task = RepairTask("t1", "", ["tests/test_a.py::test_x"], [], "abc", "pkg")
    cache = ResultCache(tmp_path / "cache.jsonl")
    key = ResultCache.key("t1", {}, task.fail_to_pass)
    cache.put(key, {"mode": "fail_to_pass", "status": "timeout", "failed": task.fail_to_pass})  # wall-clock era
    runtime = _CountingRuntime(tmp_path, "ok")
    result = run_patch(runtime, cache, task, {}, task.fail_to_pass, "fail_to_pass", 30.0)
    # a pass is judged twice (the second, confirming run under the same limits) before it is cached
    assert passed(result) and result["confirmed"] and not result.get("cached") and len(runtime.suites) == 2
    assert runtime.confirms == 1 and all(s.cpu_s == 30.0 and s.timeout_s == 4 * 30.0 for s in runtime.suites)
    # a timeout judged by CPU time is a verdict: remembered, not run again (also by the next process)
    hang = _CountingRuntime(tmp_path, "timeout")
    other = ["tests/test_a.py::test_y"]
    assert not passed(run_patch(hang, cache, task, {}, other, "fail_to_pass", 30.0))
    again = run_patch(hang, ResultCache(tmp_path / "cache.jsonl"), task, {}, other, "fail_to_pass", 30.0)
    assert again["cached"] and again["status"] == "timeout" and len(hang.suites) == 1


class _NameGuardRuntime:
    """Stands in for LocalRuntime under the name guard: an unchanged function of the package calls getattr
    with a private name (key KEY) in every run; a run stops there unless its guard allows KEY, and the
    clean code's recording run reports KEY."""

    KEY = "pkg/m.py|helper|getattr|_cache|Box"

    def __init__(self, tmp_path):
        self.tmp_path, self.runs = tmp_path, []

    def reset(self, task):
        return self.tmp_path

    def run_tests(self, tests, suite, guard=None, confirm=False):
        from graph_planner.corpus.testrun import NAMES, TestRun

        allowed = dict(guard.allowed).get(NAMES, ())
        self.runs.append(("record" if guard.record else "confirm" if confirm else "run", self.KEY in allowed))
        if guard.record:
            return TestRun({t: "failed" for t in tests}, "error", 1.0, record={NAMES: [self.KEY]})
        if self.KEY not in allowed:
            return TestRun({}, "error", 1.0, guard=(self.KEY, NAMES))
        return TestRun({t: "passed" for t in tests}, "ok", 1.0)


def test_a_task_without_a_clean_record_is_confirmed_against_the_base_commits_record(tmp_path):
    """A release-history task carries no clean record: the base commit's run of the same tests stands in,
    and the confirming run is judged against it too (it once kept the bare guard and voided every such
    gold fix: "the confirming run disagrees"). A key the base never set off still voids the run."""
    from graph_planner.judge import passed, run_patch
    from graph_planner.result_cache import ResultCache
    from graph_planner.tasks import RepairTask

    task = RepairTask("t1", "", ["tests/test_m.py::test_x"], [], "abc", "pkg")
    (tmp_path / "pkg").mkdir()
    base = "def helper(box):\n    return box\n\n\ndef f(x):\n    return x\n"
    fixed = base.replace("return x\n", "return x + 1\n")
    runtime = _NameGuardRuntime(tmp_path)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("graph_planner.judge.base_text", lambda task, path: base)

        # (no module state digest: this runtime runs nothing, and the task has no gold patch to compare with)
        def judge(runtime) -> dict:
            return run_patch(
                runtime,
                ResultCache(None),
                task,
                {"pkg/m.py": fixed},
                task.fail_to_pass,
                "submit",
                30.0,
                digest=False,
                origin="menu",
            )

        result = judge(runtime)
        assert passed(result) and result["confirmed"] and "tampered" not in result, result
        assert [r[0] for r in runtime.runs] == ["run", "record", "run", "confirm"]
        assert runtime.runs[-1] == ("confirm", True)  # the confirming run allowed what the base commit did
        # control: a key the base commit's run never set off is the patch's, in the first run and after
        runtime = _NameGuardRuntime(tmp_path)
        runtime.KEY = "pkg/m.py|f|getattr|__globals__|function"
        mp.setattr(_NameGuardRuntime, "run_tests", _recording_other_key(_NameGuardRuntime.run_tests))
        again = judge(runtime)
        assert not passed(again)


class _ReachRuntime(_NameGuardRuntime):
    """The buggy base's FAIL_TO_PASS run stops before the package's helper runs; its whole suite reaches it."""

    def run_tests(self, tests, suite, guard=None, confirm=False):
        from graph_planner.corpus.testrun import NAMES, TestRun

        if guard.record:
            self.runs.append(("record", len(tests)))
            return TestRun({}, "error", 1.0, record={NAMES: [self.KEY] if len(tests) > 1 else []})
        return super().run_tests(tests, suite, guard, confirm)


def test_a_record_less_tasks_fail_to_pass_run_is_judged_against_the_base_commits_whole_suite(tmp_path):
    """A FAIL_TO_PASS run of a task without a clean record: the fix lets callers go on into an unchanged helper
    that the buggy base's FAIL_TO_PASS run never reached. Its baseline is the base commit's run of Submit's
    whole list (what Submit mode allows already), not of the same tests, which voided a mutation task's gold
    fix (funcy's get_argnames)."""
    from graph_planner.judge import passed, run_patch
    from graph_planner.result_cache import ResultCache
    from graph_planner.tasks import RepairTask

    task = RepairTask("t1", "", ["tests/test_m.py::test_x"], ["tests/test_m.py::test_y"], "abc", "pkg")
    (tmp_path / "pkg").mkdir()
    base = "def helper(box):\n    return box\n\n\ndef f(x):\n    return x\n"
    runtime = _ReachRuntime(tmp_path)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("graph_planner.judge.base_text", lambda task, path: base)
        fixed = {"pkg/m.py": base.replace("return x\n", "return x + 1\n")}
        result = run_patch(
            runtime, ResultCache(None), task, fixed, task.fail_to_pass, "fail_to_pass", 30.0, origin="menu"
        )
    assert passed(result) and "tampered" not in result, result
    assert ("record", 2) in runtime.runs  # the whole list was recorded, not the one FAIL_TO_PASS test
    # attack beside it: a key the base commit's whole suite never set off is the patch's, and voids the run
    hostile = _ReachRuntime(tmp_path)
    hostile.KEY = "pkg/m.py|f|getattr|__globals__|function"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("graph_planner.judge.base_text", lambda task, path: base)
        mp.setattr(_ReachRuntime, "run_tests", _recording_other_key(_ReachRuntime.run_tests))
        forged = run_patch(
            hostile, ResultCache(None), task, fixed, task.fail_to_pass, "fail_to_pass", 30.0, origin="menu"
        )
    assert not passed(forged), forged  # (the stand-in stops the run; the real guard also marks it void)


def _recording_other_key(run_tests):
    """The stand-in's run_tests whose recording run reports some other key than the one the patch sets off."""
    from graph_planner.corpus.testrun import NAMES, TestRun

    def wrapped(self, tests, suite, guard=None, confirm=False):
        if guard.record:
            self.runs.append(("record", False))
            return TestRun(
                {t: "failed" for t in tests}, "error", 1.0, record={NAMES: ["pkg/m.py|helper|getattr|_x|Box"]}
            )
        return run_tests(self, tests, suite, guard, confirm)

    return wrapped


def test_every_parse_of_graph_planner_holds_the_one_parse_lock():
    """CPython 3.11's AST constructor is not thread-safe (judge slots parse while episodes do): every module
    parses through graph_planner.pyparse, except the patch check, whose entry points hold the same lock."""
    import threading
    from pathlib import Path

    from graph_planner import patch_check, pyparse

    root = Path(pyparse.__file__).parent
    unlocked = sorted(
        str(p.relative_to(root))
        for p in root.rglob("*.py")
        if "ast.parse(" in p.read_text() and p.name not in ("pyparse.py", "patch_check.py")
    )
    assert unlocked == []
    assert patch_check.PARSE_LOCK is pyparse.PARSE_LOCK
    # The lock is re-entrant (screen calls helpers that parse) and really held during a parse.
    seen = []
    with pyparse.PARSE_LOCK:
        t = threading.Thread(target=lambda: seen.append(pyparse.PARSE_LOCK.acquire(timeout=0.05)))
        t.start()
        t.join()
        assert pyparse.parse("x = 1").body
    assert seen == [False]


def test_a_clean_record_from_another_record_version_is_taken_again_when_a_name_stops_a_run():
    # A corpus recorded before the name guard judged `__import__` holds "<names>" without those keys: 37 of
    # funcy's gold fixes stopped on an `import inspect` of unchanged code until the judge took the record again.
    from graph_planner.corpus.testrun import NAMES, PROCESS, RECORD_VERSION
    from graph_planner.judge import _record_lacks
    from graph_planner.tasks import RepairTask

    task = RepairTask("t1", "", ["tests/test_a.py::test_x"], [], "abc", "pkg", clean_events={NAMES: []})
    assert _record_lacks(task, NAMES) and _record_lacks(task, PROCESS)  # version 0: an old corpus
    current = RepairTask(
        "t1", "", ["tests/test_a.py::test_x"], [], "abc", "pkg", clean_events={NAMES: []}, record_version=RECORD_VERSION
    )
    assert not _record_lacks(current, NAMES) and _record_lacks(current, PROCESS)  # no process key recorded


def test_a_corpus_recorded_under_another_guard_version_loads_with_a_warning_to_rebuild_it(tmp_path):
    import json

    from graph_planner.corpus.testrun import RECORD_VERSION
    from graph_planner.tasks import load_tasks

    def row(version: int | None) -> dict:
        env = {"repo_dir": "repos/pkg.git", "clean_events": {"<names>": []}}
        env |= {} if version is None else {"record_version": version}
        return {
            "instance_id": f"t{version}",
            "repo": "pkg",
            "base_commit": "abc",
            "FAIL_TO_PASS": ["t::x"],
            "PASS_TO_PASS": [],
            "planact_env": env,
        }

    (tmp_path / "heldout.jsonl").write_text(json.dumps(row(RECORD_VERSION)) + "\n")
    assert load_tasks(tmp_path, split="heldout")[0].record_version == RECORD_VERSION  # no warning: fresh
    (tmp_path / "heldout.jsonl").write_text(json.dumps(row(None)) + "\n")
    with pytest.warns(UserWarning, match="1 tasks .* rebuild the corpus"):
        assert load_tasks(tmp_path, split="heldout")[0].record_version == 0
