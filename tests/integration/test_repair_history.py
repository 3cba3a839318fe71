"""Release-history tasks from two tiny local releases (no network): the real fixes are kept with the
right FAIL_TO_PASS / PASS_TO_PASS and a gold patch that passes Submit, the API-only addition is reported
and skipped, two builds are identical, and the bare repository holds nothing of the newer release's source."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from graph_planner.cli import main as repair_cli
from graph_planner.corpus.history import build_history
from graph_planner.corpus.history_spec import load_history_config
from graph_planner.judge import gold_submit
from graph_planner.runtime import LocalRuntime
from graph_planner.tasks import load_tasks
from tests.unit.tool_module import load_tool

from .history_fixture import history_config


def _blobs(repo: Path) -> list[bytes]:
    """Every blob object the bare repository holds (reachable or not)."""
    listing = subprocess.run(
        ["git", f"--git-dir={repo}", "cat-file", "--batch-all-objects", "--batch-check"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\n")
    ids = [line.split()[0] for line in listing if line.endswith(tuple("0123456789")) and " blob " in line]
    return [
        subprocess.run(["git", f"--git-dir={repo}", "cat-file", "blob", i], capture_output=True, check=True).stdout
        for i in ids
    ]


def test_release_history_tasks_from_two_local_releases(tmp_path, capsys):
    config = history_config(tmp_path)
    out = tmp_path / "corpus"
    # the one command: `planact repair corpus --history NAME OLD NEW` (pins from the config)
    assert repair_cli(["corpus", "--history", "minilib", "0.1", "0.2", "--config", str(config), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "minilib-0.1-0.2: 7 changes, tried 3, kept 2, skipped as API 1" in printed, printed

    report = json.loads((out / "reports" / "minilib-0.1-0.2.json").read_text())
    status = {e["function"].split("::", 1)[1].replace("minilib/core.py::", ""): e for e in report["changes"]}
    assert status["median"]["status"] == "skipped" and status["median"]["reason"].startswith("adds API")
    assert status["scale"]["reason"] == "no test the release fixes calls it on the older code"
    assert status["clamp"]["reason"] == "docstring only"
    assert status["window"]["reason"] == "no failing test passes with this change alone"
    assert status["mean"]["status"] == "kept" and status["_size+window"]["status"] == "kept"
    # the new API's test module cannot be imported on the older code: left out, with the reason
    assert "cannot import name 'median'" in report["test_modules_not_importable"]["tests/test_median.py"]
    assert report["module_changes"]["minilib/__init__.py"][1].startswith(
        "+ from minilib.core import clamp, mean, median"
    )

    tasks = {t.meta["function"]: t for t in load_tasks(out, split="real")}
    assert sorted(tasks) == ["_size+window", "mean"] and len(load_tasks(out)) == 2
    mean, window = tasks["mean"], tasks["_size+window"]
    assert mean.instance_id.startswith("minilib-0.1-0.2__") and mean.meta["split"] == "real"
    assert mean.fail_to_pass == ["tests/test_core.py::test_mean_empty"]
    assert window.fail_to_pass == ["tests/test_core.py::test_window_zero"]
    passing = ["tests/test_core.py::" + n for n in ("test_clamp", "test_mean", "test_window", "test_scale")]
    assert mean.pass_to_pass == window.pass_to_pass == passing
    assert "if not values:" in mean.gold_patch and "max(1, size)" in window.gold_patch
    # the issue: the release's changelog entry and the failing test's output, never the fix
    assert "`mean` of an empty list is 0.0" in mean.problem_statement
    assert "ZeroDivisionError" in mean.problem_statement and "if not values" not in mean.problem_statement
    rt = LocalRuntime()
    try:
        assert gold_submit(rt, mean) == ""
    finally:
        rt.close()

    # nothing of the newer release's source is in reach: the base commit is the older code under the newer tests
    repo = out / "repos" / "minilib-0.1-0.2.git"
    blobs = _blobs(repo)
    assert not any(b"def median" in b or b"max(1, size)" in b or b"if not values" in b for b in blobs)
    show = lambda path: (
        subprocess.run(  # noqa: E731
            ["git", f"--git-dir={repo}", "show", f"{mean.base_commit}:{path}"], capture_output=True, check=True
        ).stdout
    )
    assert show("minilib/core.py") == (tmp_path / "minilib-0.1" / "minilib" / "core.py").read_bytes()
    assert show("tests/test_core.py") == (tmp_path / "minilib-0.2" / "tests" / "test_core.py").read_bytes()

    # a second build elsewhere gives the same tasks (ids, base commits, gold patches, test lists)
    again = build_history(load_history_config(config), tmp_path / "again", log=lambda _: None)
    assert again["tasks"] == 2
    counts, diffs = load_tool("same_corpus").differences(out, tmp_path / "again")
    assert counts["real"] == 2 and diffs == []

    # and the split is evaluated like any other
    assert repair_cli(["evaluate", "--tasks", str(out), "--split", "real", "--budget-tests", "1", "--limit", "1"]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith("solve rate ")
