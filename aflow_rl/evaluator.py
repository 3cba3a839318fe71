"""Evaluate a workflow over problems: bounded concurrency, retries on errors, per-problem rows, AFlow's files.

`evaluate_rows` scores one shard of one repeat (what a Ray task runs); `summarise` and
`write_round_evaluation` turn the rows of all shards and repeats into AFlow's per-round CSV files,
log.json of mismatches and results.json rows. Sharding and repeats are fanned out by the caller
(the aflow flow's tasks on Ray, or `evaluate_local` in one process).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import csv
import dataclasses
import json
import statistics
import time
from datetime import datetime
from pathlib import Path

from aflow_rl import benchmarks, operators
from aflow_rl.llm import LLMHandle, sample_scope
from aflow_rl.workflow_box import SandboxedWorkflow

ERROR_RETRIES = 5  # AFlow retries a problem up to 5 times when the workflow raises


def run_sync(coro):
    """Run a coroutine to completion from sync code, even when an event loop is already running here."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


async def _solve(workflow, benchmark: str, problem: dict, code_limits: dict) -> dict:
    last_err = ""
    for _ in range(ERROR_RETRIES):
        try:
            if benchmark in benchmarks.CODE_BENCHMARKS:
                out = await workflow(problem["question"], problem["entry_point"])
            else:
                out = await workflow(problem["question"])
            prediction = out[0] if isinstance(out, tuple) else out
            break
        except Exception as err:  # a workflow bug scores 0 for this problem; the evaluation goes on
            last_err = f"{type(err).__name__}: {err}"[:500]
    else:
        return {"id": problem["id"], "prediction": "", "extracted": "", "score": 0.0, "error": last_err}
    value, extracted = await asyncio.to_thread(benchmarks.score, benchmark, problem, prediction, code_limits)
    return {
        "id": problem["id"],
        "prediction": str(prediction)[:4000],
        "extracted": extracted,
        "score": value,
        "error": "",
    }


async def _evaluate(
    graph_src: str,
    prompt_src: str,
    problems: list[dict],
    benchmark: str,
    llm: LLMHandle,
    concurrency: int,
    code_limits: dict,
    sample_key: str | None,
) -> tuple[list[dict], dict]:
    # graph.py runs in a sandbox of its own; its operator calls come back here (aflow_rl.workflow_box)
    workflow = SandboxedWorkflow(graph_src, prompt_src, llm, name=benchmark, dataset=benchmark.upper())
    sem = asyncio.Semaphore(concurrency)

    async def one(p: dict) -> dict:
        if sample_key is not None:  # this task's context only: each problem draws from its own seeds
            sample_scope.set(f"{sample_key}:{p['id']}")
        async with sem:
            return await _solve(workflow, benchmark, p, code_limits)

    try:
        rows = await asyncio.gather(*(one(p) for p in problems))
    finally:
        workflow.close()
    return list(rows), workflow.usage()


def evaluate_rows(
    graph_src: str,
    prompt_src: str,
    problems: list[dict],
    benchmark: str,
    llm: LLMHandle,
    concurrency: int = 50,
    code_limits: dict | None = None,
    sample_key: str | None = None,
) -> dict:
    """Score a workflow on these problems; {'rows', 'usage', 'parse_failures', 'seconds'}.

    sample_key names this evaluation (run, round, repeat): with it every problem's model calls are
    seeded from the key, the problem and the prompt, so the rows do not depend on batching or sharding.
    """
    limits = code_limits or {}
    operators.CODE_LIMITS = dataclasses.replace(
        operators.CODE_LIMITS, **{k: v for k, v in limits.items() if k != "memo"}
    )
    before = dict(operators.PARSE_FAILURES)
    t0 = time.perf_counter()
    rows, usage = run_sync(_evaluate(graph_src, prompt_src, problems, benchmark, llm, concurrency, limits, sample_key))
    fails = {k: v - before.get(k, 0) for k, v in operators.PARSE_FAILURES.items() if v - before.get(k, 0)}
    return {"rows": rows, "usage": usage, "parse_failures": fails, "seconds": time.perf_counter() - t0}


def summarise(repeats: list[list[dict]]) -> dict:
    """Per-repeat shard results -> mean score, std over repeats, cost, per-repeat scores."""
    scores, costs, n_rows = [], [], 0
    for shards in repeats:
        rows = [r for s in shards for r in s["rows"]]
        n_rows = len(rows)
        scores.append(statistics.fmean(r["score"] for r in rows) if rows else 0.0)
        costs.append(sum(s["usage"].get("total_cost", 0.0) for s in shards))
    parse_failures = sum(n for shards in repeats for s in shards for n in s.get("parse_failures", {}).values())
    return {
        "score": statistics.fmean(scores),
        "std": statistics.pstdev(scores) if len(scores) > 1 else 0.0,
        "parse_failures": parse_failures,
        "scores": scores,
        "total_cost": sum(costs),
        "avg_cost": sum(costs) / max(1, n_rows * len(repeats)),
        "errors": sum(1 for shards in repeats for s in shards for r in s["rows"] if r["error"]),
    }


def write_round_evaluation(
    round_dir: str | Path, round_idx: int, problems: list[dict], repeats: list[list[dict]], seconds: float
) -> list[dict]:
    """One `<score>_<timestamp>.csv` per repeat and log.json of mismatches; returns results.json rows."""
    round_dir = Path(round_dir)
    by_id = {p["id"]: p for p in problems}
    results, mismatches = [], []
    for shards in repeats:
        rows = [r for s in shards for r in s["rows"]]
        score = statistics.fmean(r["score"] for r in rows) if rows else 0.0
        cost = sum(s["usage"].get("total_cost", 0.0) for s in shards)
        stamp = datetime.now().strftime("%Y%m%d_%H%M%S_%f")
        with open(round_dir / f"{score:.5f}_{stamp}.csv", "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["question", "prediction", "expected_output", "score", "cost", "error"])
            for r in rows:
                w.writerow(
                    [
                        by_id[r["id"]]["question"],
                        r["prediction"],
                        by_id[r["id"]]["answer"],
                        r["score"],
                        cost / max(1, len(rows)),
                        r["error"],
                    ]
                )
        for r in rows:
            if r["score"] < 1.0 and len(mismatches) < 500:
                mismatches.append(
                    {
                        "question": by_id[r["id"]]["question"],
                        "right_answer": by_id[r["id"]]["answer"],
                        "model_output": r["prediction"] or r["error"],
                        "extracted_output": r["extracted"],
                        "extract_answer_code": "None",
                    }
                )
        results.append(
            {
                "round": round_idx,
                "score": score,
                "avg_cost": cost / max(1, len(rows)),
                "total_cost": cost,
                "time": seconds,
            }
        )
    (round_dir / "log.json").write_text(json.dumps(mismatches, indent=2))
    return results


def evaluate_local(
    graph_src: str,
    prompt_src: str,
    problems: list[dict],
    benchmark: str,
    llm: LLMHandle,
    repeats: int,
    concurrency: int = 50,
    code_limits: dict | None = None,
    sample_key: str | None = None,
) -> list[list[dict]]:
    """All repeats in this process, one shard each (benchmarks and tests without Ray)."""
    return [
        [
            evaluate_rows(
                graph_src,
                prompt_src,
                problems,
                benchmark,
                llm,
                concurrency,
                code_limits,
                None if sample_key is None else f"{sample_key}:rep{i}",
            )
        ]
        for i in range(repeats)
    ]
