"""tools/same_corpus.py: two builds hold the same tasks only when ids, commits, patches and test lists agree."""

from __future__ import annotations

import json
from pathlib import Path

from tests.unit.tool_module import load_tool


def _tool():
    return load_tool("same_corpus")


def _write(folder: Path, rows: list[dict]) -> Path:
    folder.mkdir()
    (folder / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


def _task(i: str, **kw) -> dict:
    row = {"instance_id": i, "base_commit": "c" + i, "patch": "p", "FAIL_TO_PASS": ["t1"], "PASS_TO_PASS": []}
    return {**row, "problem_statement": "1 failed in 0.12s", **kw}


def test_builds_that_differ_only_in_pytest_timings_are_identical(tmp_path, capsys):
    tool = _tool()
    a = _write(tmp_path / "a", [_task("x"), _task("y")])
    b = _write(tmp_path / "b", [_task("y", problem_statement="1 failed in 0.31s"), _task("x")])
    assert tool.main([str(a), str(b)]) == 0
    assert "identical: 2 train, 0 heldout, 0 unseen_2025" in capsys.readouterr().out


def test_a_missing_task_or_another_failing_test_is_a_difference(tmp_path):
    tool = _tool()
    a = _write(tmp_path / "a", [_task("x"), _task("y")])
    b = _write(tmp_path / "b", [_task("x", FAIL_TO_PASS=["t2"])])
    counts, diffs = tool.differences(a, b)
    assert counts["train"] == 2
    assert diffs == [f"train: y only in {a}", "train: x differs in FAIL_TO_PASS"]
    assert tool.main([str(a), str(b)]) == 1
