"""The provenance rule (graph_planner/provenance.py): text a model wrote is judged only through the call jail.

A patch of origin "model" (the default of every judge call) on a task without the jail is not screened and
not run, whatever a cache holds for it; "menu" and "gold" patches, and any patch on a jailed task, go on.
PlannerEnv derives a patch's origin from what it holds (candidates.menu_edit); free decoding's task pool keeps
only jailed tasks and the free-form evaluation asks nothing of a task without the jail. No services.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from graph_planner.candidates import candidate_edits, menu_edit
from graph_planner.provenance import GOLD, MENU, MODEL, UNJUDGED, unjudged
from graph_planner.result_cache import ResultCache
from graph_planner.tasks import RepairTask

JAIL = {"module": "pkg.m", "path": "pkg/m.py", "qualname": "f"}
MODULE = (
    "LIMIT = 3\n\n\ndef g(x):\n    y = x * 2\n    return y\n\n\n"
    "def f(values, lo=0):\n    total = 0\n    for v in values:\n        total = total - v\n    return total\n"
)


def _task(jail: dict | None = None) -> RepairTask:
    return RepairTask("t1", "", ["tests/test_m.py::test_x"], [], "abc", "pkg", jail=dict(jail or {}))


class _NoRuns:
    """A runtime that fails the test on any use: an unjudged patch must reach none."""

    def reset(self, task):
        raise AssertionError("a checkout was made for an unjudged patch")

    def run_tests(self, *a, **k):
        raise AssertionError("tests ran for an unjudged patch")


def test_the_rule_model_text_runs_only_on_a_jailed_task():
    assert unjudged(_task(), MODEL) and not unjudged(_task(JAIL), MODEL)
    assert not unjudged(_task(), MENU) and not unjudged(_task(), GOLD)
    with pytest.raises(ValueError, match="unknown patch origin"):
        unjudged(_task(), "trusted")  # a typo must not pick a path


def test_run_patch_refuses_model_text_on_an_unjailed_task_before_the_cache_and_runs_nothing(monkeypatch):
    from graph_planner.judge import passed, run_patch

    monkeypatch.setattr("graph_planner.judge.base_text", lambda task, path: MODULE)
    task, patch = _task(), {"pkg/m.py": MODULE.replace("total - v", "total + v")}
    cache = ResultCache(None)
    # a static verdict of the same text cached earlier (or by a menu edit): never handed to model text
    cache.put(ResultCache.key(task.instance_id, patch, task.fail_to_pass, True), {"status": "ok", "failed": []})
    for mode in ("fail_to_pass", "submit"):
        result = run_patch(_NoRuns(), cache, task, patch, task.fail_to_pass, mode, 30.0)  # origin: "model"
        assert result["status"] == UNJUDGED and result["unjudged"] and not passed(result), result
        assert result["passed"] == 0 and result["n_failed"] == 1 and "jail_qualify" in result["tail"]
        assert "cached" not in result and "confirmed" not in result
    assert len(cache.entries) == 1  # nothing was cached for it


def test_submit_texts_refuses_model_text_unscreened_and_lets_the_gold_fix_through(monkeypatch):
    from graph_planner import judge

    monkeypatch.setattr("graph_planner.judge.base_text", lambda task, path: MODULE)
    monkeypatch.setattr("graph_planner.judge.screen", lambda *a: pytest.fail("an unjudged patch was screened"))
    task, texts = _task(), {"pkg/m.py": MODULE.replace("total - v", "total + v")}
    assert judge.submit_texts(_NoRuns(), ResultCache(None), task, texts) == UNJUDGED
    seen = []
    monkeypatch.setattr("graph_planner.judge.screen", lambda *a: [])
    monkeypatch.setattr("graph_planner.judge.run_patch", lambda *a, **k: seen.append(k["origin"]) or {"status": "ok"})
    assert judge.submit_texts(_NoRuns(), ResultCache(None), task, texts, origin=GOLD) == "" and seen == [GOLD]


def test_the_team_sandbox_counts_model_text_on_an_unjailed_task_as_unjudged(tmp_path):
    from graph_planner.team.sandbox import Sandbox

    box = Sandbox(workers=1, cache_path=None, test_cpu_s=10, telemetry_dir=tmp_path)
    edit = {"file": "pkg/m.py", "old": "total - v", "new": "total + v"}
    try:
        (v,) = box.judge_many([(_task(), edit)], "train")  # origin: "model"
    finally:
        box.close()
    assert v["unjudged"] and not v["resolved"] and not v["refused"] and v["runs"] == 0 and v["error"] == UNJUDGED
    assert box.stats["unjudged"] == 1 and box.stats["test_runs"] == box.stats["refused"] == 0
    (line,) = (tmp_path / "slot-0.jsonl").read_text().splitlines()
    assert '"origin": "model"' in line and '"unjudged": true' in line


def test_menu_edits_are_exactly_the_candidates_planact_enumerates_from_the_module():
    first = MODULE.count("\n", 0, MODULE.index("def f")) + 1
    old = MODULE[MODULE.index("def f") :]
    cands = candidate_edits("pkg/m.py", first, old, structural=True, module=MODULE)
    assert cands and all(menu_edit(MODULE, c.edit) for c in cands)
    fixed = {"file": "pkg/m.py", "old": old, "new": old.replace("total - v", "total + v")}
    assert menu_edit(MODULE, fixed)  # the binop family's inverse: on the menu
    put_back = next(c.edit for c in cands if c.description.startswith("insert `LIMIT = 3`"))
    assert menu_edit(MODULE, put_back)  # a statement of the module put back: on the menu too
    assert not menu_edit(MODULE, {"file": "pkg/m.py", "old": old, "new": old})  # no change is no candidate
    written = {"file": "pkg/m.py", "old": old, "new": old.replace("total - v", "sum(values) + 0 * v")}
    assert not menu_edit(MODULE, written)  # a body a model wrote
    # the same new function text, but `old` not exactly one whole function: never a menu edit
    assert not menu_edit(MODULE, {"file": "pkg/m.py", "old": MODULE, "new": MODULE.replace("total - v", "total + v")})
    assert not menu_edit(MODULE, {"file": "pkg/m.py", "old": "total - v", "new": "total + v"})
    assert not menu_edit(MODULE, {"file": "pkg/m.py", "old": "", "new": "x"})


def test_free_decodings_pool_keeps_only_jailed_tasks_and_fails_without_one(capsys):
    from graph_planner.team.env import RepairTeamEnv

    tasks = {"a": _task(JAIL), "b": _task(), "c": _task(), "d": _task(JAIL)}
    env = SimpleNamespace(split={"train": ["a", "b"], "unseen_packages": ["c", "d"], "real": []}, tasks=tasks)
    env.corpus = "runs/x"
    assert RepairTeamEnv._jailed_only(env) == {"train": 1, "unseen_packages": 1}
    assert env.split == {"train": ["a"], "unseen_packages": ["d"], "real": []}
    out = capsys.readouterr().out
    assert "split train keeps 1 of 2 tasks; 1 have no call jail" in out and "unseen_packages keeps 1 of 2" in out
    env.split = {"train": ["b"], "unseen_packages": ["d"]}
    with pytest.raises(ValueError, match=r"decoding 'free'.*no training task.*`jail: true`.*jail_qualify"):
        RepairTeamEnv._jailed_only(env)


def test_the_free_form_evaluation_asks_nothing_of_an_unjailed_task_and_counts_it_apart():
    from graph_planner.evaluate import summarize
    from graph_planner.free_eval import evaluate_free

    def replier(tasks, prompts):
        raise AssertionError("a task without the jail was prompted")

    results = evaluate_free([_task(), _task()], replier)
    assert all(r["unjudged"] == 1 and not r["judged"] and r["error"] == UNJUDGED for r in results)
    summary = summarize(results + [{**results[0], "judged": True, "unjudged": 0, "resolved": True}])
    assert (summary["tasks"], summary["judged"], summary["unjudged"], summary["solve_rate"]) == (3, 1, 2, 1.0)
