"""Evaluating an agent on repair tasks: episodes in parallel slots, then solve rate and tables.

No Prefect and no Ray here: `run_slot` runs a list of tasks in one sandbox slot (what one Ray task or
one thread does); `summarize` turns episode results into the numbers the CLI prints and the flow logs.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from graph_planner.agents.rule import RuleAgent, run_episode
from graph_planner.env import EnvLimits, PlannerEnv
from graph_planner.result_cache import ResultCache
from graph_planner.runtime import make_runtime
from graph_planner.tasks import RepairTask
from planact.progress import Phase, ProgressFn


def make_agent(kind: str, engine=None, patch_engine=None, proposals: int = 0):
    """An agent by name: 'rule' (trying `proposals` repository proposals a function after its inverses), or
    'model' (needs an engine)."""
    if kind == "rule":
        return RuleAgent(proposals=proposals)
    if kind == "model":
        if engine is None:
            raise ValueError("agent 'model' needs an engine (e.g. --engine openai --base-url ... --model ...)")
        from graph_planner.agents.model import ModelAgent

        return ModelAgent(engine, patch_engine=patch_engine)
    raise ValueError(f"unknown agent {kind!r}: 'rule' or 'model'")


def run_slot(
    tasks: list[RepairTask],
    agent_kind: str = "rule",
    limits: EnvLimits | None = None,
    telemetry: str | Path | None = None,
    runtime: str = "local",
    engine=None,
    patch_engine=None,
    on_episode: Callable[[dict], None] | None = None,
    proposals: int = 0,
) -> list[dict]:
    """Episodes of one agent over `tasks`, one after another in one sandbox slot (`on_episode` hears each
    episode's result as it ends)."""
    env = PlannerEnv(make_runtime(runtime), limits, telemetry, ResultCache())
    agent = make_agent(agent_kind, engine, patch_engine, proposals)
    out = []
    try:
        for task in tasks:
            stats = run_episode(env, task, agent)
            out.append(
                {
                    **stats,
                    "package": task.repo,
                    "mutation": task.meta.get("mutation", ""),
                    "difficulty": task.meta.get("difficulty", ""),
                    "fallbacks": getattr(agent, "fallbacks", 0),
                }
            )
            if hasattr(agent, "fallbacks"):
                agent.fallbacks = 0
            if on_episode is not None:
                on_episode(out[-1])
    finally:
        env.runtime.close()
    return out


def shard(tasks: list, k: int) -> list[list]:
    """k interleaved shards (each gets a mix of packages)."""
    return [tasks[i::k] for i in range(k) if tasks[i::k]]


def evaluate_local(
    tasks: list[RepairTask],
    agent_kind: str = "rule",
    workers: int = 1,
    limits: EnvLimits | None = None,
    telemetry_dir: str | Path | None = None,
    engine=None,
    patch_engine=None,
    progress: ProgressFn | None = None,
    proposals: int = 0,
) -> list[dict]:
    """All episodes in `workers` threads (each its own slot); results in task order. `progress` hears each
    episode ended, k of n with an ETA (a held-out split takes tens of minutes on 2 cores)."""
    shards = shard(tasks, max(1, workers))
    tele = [Path(telemetry_dir) / f"slot-{i}.jsonl" if telemetry_dir else None for i in range(len(shards))]
    phase = Phase(f"episodes ({agent_kind} agent)", len(tasks), progress)

    def ended(result: dict) -> None:
        phase.advance(note=f"{result['package']}: {'solved' if result['resolved'] else 'not solved'}")

    with ThreadPoolExecutor(len(shards) or 1) as pool:
        parts = list(
            pool.map(
                lambda i: run_slot(
                    shards[i],
                    agent_kind,
                    limits,
                    tele[i],
                    engine=engine,
                    patch_engine=patch_engine,
                    on_episode=ended,
                    proposals=proposals,
                ),
                range(len(shards)),
            )
        )
    by_id = {r["instance_id"]: r for part in parts for r in part}
    return [by_id[t.instance_id] for t in tasks]


def _table(results: list[dict], key: str) -> list[dict]:
    groups: dict[str, list[dict]] = defaultdict(list)
    for r in results:
        groups[r[key]].append(r)
    return [
        {
            key: k,
            "tasks": len(v),
            "solved": sum(r["resolved"] for r in v),
            "solve_rate": round(sum(r["resolved"] for r in v) / len(v), 3),
        }
        for k, v in sorted(groups.items())
    ]


def summarize(results: list[dict], wall_s: float | None = None) -> dict:
    """Solve rate, mean steps / test runs / seconds, fallbacks, and per-package / per-mutation tables, over the
    judged tasks ('judged': False, a free-form evaluation's task without the call jail, is counted apart)."""
    every = results
    results = [r for r in every if r.get("judged", True)]
    n = len(results) or 1
    out = {
        "tasks": len(every),
        "judged": len(results),
        "solved": sum(r["resolved"] for r in results),
        "solve_rate": round(sum(r["resolved"] for r in results) / n, 4),
        "mean_steps": round(statistics.fmean(r["steps"] for r in results), 2) if results else 0.0,
        "mean_test_runs": round(statistics.fmean(r["test_runs"] for r in results), 2) if results else 0.0,
        "mean_seconds": round(statistics.fmean(r["seconds"] for r in results), 2) if results else 0.0,
        "malformed": sum(r["malformed"] for r in results),
        "fallbacks": sum(r.get("fallbacks", 0) for r in results),
        "patch_errors": sum(r["patch_errors"] for r in results),
        "refused": sum(r["refused"] for r in results),
        "tampering": sum(r.get("tampering", 0) for r in results),
        # tasks not judged (free-form, no call jail) plus runs refused unrun (model text, no call jail)
        "unjudged": sum(r.get("unjudged", 0) for r in every),
        "by_package": _table(results, "package"),
        "by_mutation": _table(results, "mutation"),
    }
    if wall_s is not None:
        out["wall_s"] = round(wall_s, 1)
        out["tasks_per_s"] = round(len(every) / wall_s, 4) if wall_s else 0.0
    return out


def markdown(summary: dict, title: str = "Code repair") -> str:
    """The summary as a markdown report (Prefect artifact, docs/code-repair.md)."""
    lines = [
        f"# {title}",
        "",
        f"solve rate **{summary['solve_rate']:.3f}** ({summary['solved']}/{summary.get('judged', summary['tasks'])}), "
        f"mean test runs {summary['mean_test_runs']}, mean steps {summary['mean_steps']}, "
        f"mean seconds {summary['mean_seconds']}, fallbacks {summary['fallbacks']}, "
        f"refused patches {summary.get('refused', 0)}, voided verdicts (tampering) {summary.get('tampering', 0)}, "
        f"unjudged (model text, no call jail) {summary.get('unjudged', 0)}",
        "",
    ]
    for key in ("package", "mutation"):
        lines += [f"| {key} | tasks | solved | solve rate |", "|---|---|---|---|"]
        lines += [
            f"| {row[key]} | {row['tasks']} | {row['solved']} | {row['solve_rate']:.3f} |"
            for row in summary[f"by_{key}"]
        ]
        lines.append("")
    return "\n".join(lines)
