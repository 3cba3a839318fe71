"""Offline AFlow search with the local Plan/Act executor: real models, real scores, AFlow's files, resume.

The executor is a real warm-started planner+actor pair (session fixture `aflow_executor`); no service.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

from aflow_rl import space, tree
from aflow_rl.config import AFlowConfig
from aflow_rl.evaluator import evaluate_local, summarise
from aflow_rl.search import Search, run_local
from aflow_rl.workspace import Workspace

from .conftest import REPO, cli_env


def _cfg(tmp_path, executor: str, **kw) -> AFlowConfig:
    base = {
        "run_name": "offline",
        "root": str(tmp_path),
        "limit": 30,
        "executor": {"checkpoint": executor},
        "search": {"max_rounds": 3, "validation_repeats": 2},
    }
    for k, v in kw.items():
        base[k] = {**base.get(k, {}), **v} if isinstance(v, dict) else v
    return AFlowConfig(**base)


def test_workflows_get_real_different_scores(tmp_path, aflow_executor):
    s = Search(_cfg(tmp_path, aflow_executor))
    direct = space.initial_spec("planact")
    planned = space.apply(direct, space.Edit("add", "plan"))
    scores = {}
    for name, spec in (("direct", direct), ("planned", planned)):
        reps = evaluate_local(*space.render(spec), s.validation, "planact", s.llm, repeats=3)
        scores[name] = summarise(reps)
    # The actor cannot guess the transformation without a plan; with one it often can.
    assert (
        scores["planned"]["score"] > scores["direct"]["score"] + scores["planned"]["std"] + scores["direct"]["std"]
    ), scores


def test_search_writes_aflow_files_and_resumes_an_interrupted_round(tmp_path, aflow_executor):
    cfg = _cfg(tmp_path, aflow_executor)
    history = run_local(cfg)
    assert [h["round"] for h in history] == [1, 2, 3]
    # Same seed, other batching (3 problems at a time instead of all 30): the same search, sample for sample.
    again = run_local(_cfg(tmp_path / "again", aflow_executor, concurrency=3))
    keys = ("round", "score", "std", "parent", "modification", "best")
    assert [{k: h.get(k) for k in keys} for h in again] == [{k: h.get(k) for k in keys} for h in history]
    ws = Workspace(cfg.workspace_dir())
    # AFlow's layout and shapes, read back by a fresh reader.
    rows = json.loads((ws.root / "results.json").read_text())
    assert sorted({r["round"] for r in rows}) == [1, 2, 3] and len(rows) == 6
    assert set(rows[0]) == {"round", "score", "avg_cost", "total_cost", "time"}
    for r in (2, 3):
        exp = json.loads((ws.root / f"round_{r}" / "experience.json").read_text())
        assert set(exp) == {"father node", "modification", "before", "after", "succeed"}
        assert (
            len(list((ws.root / f"round_{r}").glob("*.csv"))) == 2 and (ws.root / f"round_{r}" / "log.json").is_file()
        )
    processed = json.loads((ws.root / "processed_experience.json").read_text())
    assert Workspace(ws.root).rebuild_processed_experience() == processed
    assert sum(len(tree.tree(ws)[p]) for p in tree.tree(ws)) == 2  # two expansions in the tree
    assert (tmp_path / "offline" / "policy.pt").is_file()

    # Interrupt round 3 mid-evaluation: its graph is written, its results and experience are not.
    graph3 = (ws.root / "round_3" / "graph.py").read_text()
    stamps = {p: p.stat().st_mtime_ns for r in (1, 2) for p in (ws.root / f"round_{r}").glob("*.csv")}
    (ws.root / "results.json").write_text(json.dumps([r for r in rows if r["round"] != 3]))
    (ws.root / "round_3" / "experience.json").unlink()
    again = run_local(cfg.model_copy(update={"search": cfg.search.model_copy(update={"max_rounds": 4})}))
    assert [h["round"] for h in again] == [3, 4]  # rounds 1-2 not re-evaluated, round 3 finished, then 4
    assert (ws.root / "round_3" / "graph.py").read_text() == graph3  # evaluated as written, not regenerated
    assert {p: p.stat().st_mtime_ns for p in stamps} == stamps
    assert len(list((ws.root / "round_3").glob("*.csv"))) == 2  # the half-done evaluation's files were replaced
    assert sorted({r["round"] for r in json.loads((ws.root / "results.json").read_text())}) == [1, 2, 3, 4]


def test_aflow_rl_vs_mcts_benchmark_tiny_mode(tmp_path, aflow_executor):
    """benchmarks/aflow_rl_vs_mcts.py in its tiny mode on the session's executor, so the benchmark cannot rot."""
    out = subprocess.run(
        [
            sys.executable,
            "benchmarks/aflow_rl_vs_mcts.py",
            "--tiny",
            "--executor",
            aflow_executor,
            "--limit",  # half the tiny mode's 20 problems: the same arms and figures at half the evaluations
            "10",
            "--root",
            str(tmp_path),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        env=cli_env(),
    )
    assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]
    assert "2 seeds x 2 rounds per arm" in out.stdout
    for arm in ("policy", "policy+pool"):
        assert re.search(rf"^paired {re.escape(arm)} - mcts: mean [+-][0-9.]+ \(sd", out.stdout, re.M), out.stdout


def test_aflow_optimizer_rl_benchmark_tiny_mode(tmp_path, aflow_executor):
    """benchmarks/aflow_optimizer_rl.py in its tiny mode on two benchmarks (HumanEval executed offline by the
    candidate coder, its tests in the sandbox): one optimizer trains on both, then all four arms per benchmark."""
    out = subprocess.run(
        [
            sys.executable,
            "benchmarks/aflow_optimizer_rl.py",
            "--tiny",
            "--executor",
            aflow_executor,
            "--benchmarks",
            "planact",
            "humaneval",
            "--limit",  # half the tiny mode's 20 problems: every arm and figure still, at half the evaluations
            "10",
            "--root",
            str(tmp_path),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        env=cli_env(),
    )
    assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]
    assert "2 held-out seeds x 3 rounds per arm" in out.stdout
    assert re.search(
        r"^iteration 1: planact mean best [0-9.]+, outcome [+-][0-9.]+; humaneval mean best [0-9.]+", out.stdout, re.M
    ), out.stdout
    for arm in ("trained", "untrained", "policy", "mcts"):
        rows = re.findall(rf"^{arm}\s+([0-9.]+)\s+[0-9.]+ ", out.stdout, re.M)
        assert len(rows) == 2, out.stdout  # one per benchmark
    humaneval = out.stdout.split("\nhumaneval\n", 1)[1]
    assert 0.2 < float(re.search(r"^mcts\s+([0-9.]+)", humaneval, re.M).group(1)) < 1.0  # real test verdicts
    for b in ("planact", "humaneval"):
        for base in ("untrained", "mcts"):
            assert re.search(rf"^{b}: paired trained - {base}: mean [+-][0-9.]+ ", out.stdout, re.M), out.stdout
