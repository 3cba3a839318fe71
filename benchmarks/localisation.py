"""Localisation: is the buggy function among the functions offered to the patch model, graph vs SBFL?

Per task, two rule-agent episodes at the same test budget: one localising with the code graph only
(traceback frames, the failing tests' callees), one with the coverage spectrum's SBFL ranking first
(Explore coverage: one run of the failing tests' modules on the base commit, its own budget). Prints per
split: tasks, the share whose buggy function is in the top `--nodes` of the ranking (what the team's
planner is offered) and in the rule agent's memory (`--rule-nodes`), the rule agent's solve rate, the
coverage run's seconds per task, and the change graph -> SBFL (whether the gold fix is among the
candidate edits is benchmarks/reachable.py's). Test outcomes are shared through the corpus's result
cache, so a rerun costs only the runs it has not seen.

    python benchmarks/localisation.py                              # runs/rl-corpus, every held-out split
    python benchmarks/localisation.py --corpus DIR --limit 20 --formula dstar
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from graph_planner.agents.rule import RuleAgent, run_episode  # noqa: E402
from graph_planner.env import EnvLimits, PlannerEnv  # noqa: E402
from graph_planner.env_config import EpisodeConfig, RepairEnvConfig  # noqa: E402
from graph_planner.evaluate import shard  # noqa: E402
from graph_planner.result_cache import ResultCache  # noqa: E402
from graph_planner.runtime import LocalRuntime  # noqa: E402
from graph_planner.tasks import load_tasks  # noqa: E402
from graph_planner.team.context import split_of  # noqa: E402

ARMS = ("graph", "sbfl")


def episode(env: PlannerEnv, task, arm: str, rule_nodes: int) -> dict:
    """One rule-agent episode; where its ranking put the bug and whether it solved the task."""
    agent = RuleAgent(memory_nodes=rule_nodes, coverage=arm == "sbfl")
    stats = run_episode(env, task, agent)
    bug = f"{task.meta.get('file')}::{task.meta.get('function')}"
    return {
        "rank": agent.ranked.index(bug) if bug in agent.ranked else -1,
        "resolved": bool(stats["resolved"]),
        "coverage_s": stats["coverage_s"],
        "test_runs": stats["test_runs"],
    }


def run_chunk(args) -> list[dict]:
    """Both arms on a chunk of (split, task), in one sandbox slot."""
    jobs, cache, test_runs, rule_nodes = args
    env = PlannerEnv(LocalRuntime(), EnvLimits(test_runs=test_runs), cache=ResultCache(cache))
    try:
        return [
            {
                "task": task.instance_id,
                "split": split,
                "kind": task.meta.get("mutation", ""),
                "arm": arm,
                **episode(env, task, arm, rule_nodes),
            }
            for split, task in jobs
            for arm in ARMS
        ]
    finally:
        env.runtime.close()


def measure(
    corpus: Path,
    splits: tuple[str, ...],
    limit: int | None,
    test_runs: int,
    rule_nodes: int,
    workers: int,
    frac: float = RepairEnvConfig().unseen_function_frac,
) -> list[dict]:
    """Rows of run_chunk over the corpus's tasks of `splits` (the first `limit` of each)."""
    jobs, count = [], dict.fromkeys(splits, 0)
    for task in load_tasks(corpus):
        split = split_of(task, frac)
        if split in count and (limit is None or count[split] < limit):
            count[split] += 1
            jobs.append((split, task))
    cache = str(corpus / "results-cache.jsonl")
    # Small chunks: a slow package's tasks are spread over the workers instead of keeping one busy at the end.
    chunks = [(c, cache, test_runs, rule_nodes) for c in shard(jobs, max(1, len(jobs) // 4)) if c]
    with ProcessPoolExecutor(max_workers=max(1, min(workers, len(chunks)))) as pool:
        return [row for rows in pool.map(run_chunk, chunks) for row in rows]


def table(rows: list[dict], nodes: int, rule_nodes: int) -> list[str]:
    """The printed table: one line per split and arm, then the change."""
    lines = [
        f"{'split':<18} {'arm':<6} {'tasks':>5} {'in top ' + str(nodes):>9} {'in memory':>10} {'rule solve':>10} "
        f"{'coverage s/task':>15}"
    ]
    for split in sorted({r["split"] for r in rows}):
        shares = {}
        for arm in ARMS:
            rs = [r for r in rows if r["split"] == split and r["arm"] == arm]
            top = sum(0 <= r["rank"] < nodes for r in rs) / len(rs)
            mem = sum(0 <= r["rank"] < rule_nodes for r in rs) / len(rs)
            solve = sum(r["resolved"] for r in rs) / len(rs)
            cov = statistics.fmean(r["coverage_s"] for r in rs)
            shares[arm] = (top, mem, solve)
            lines.append(f"{split:<18} {arm:<6} {len(rs):>5} {top:>9.2f} {mem:>10.2f} {solve:>10.2f} {cov:>15.2f}")
        d = [100 * (b - a) for a, b in zip(shares["graph"], shares["sbfl"])]
        lines.append(f"{split:<18} {'change':<6} {'':>5} {d[0]:>+8.1f}p {d[1]:>+9.1f}p {d[2]:>+9.1f}p")
    return lines


def main(argv: list[str] | None = None) -> list[str]:
    """Parse arguments, measure, print the table; returns its lines."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--corpus", default="runs/rl-corpus", help="A corpus folder (train.jsonl, heldout.jsonl).")
    p.add_argument("--splits", nargs="+", default=["unseen_functions", "unseen_packages", "unseen_2025"])
    p.add_argument("--limit", type=int, default=None, help="Tasks per split (default: all).")
    p.add_argument("--nodes", type=int, default=RepairEnvConfig().planner_nodes, help="The team's offered functions.")
    p.add_argument("--rule-nodes", type=int, default=6, help="Functions the rule agent remembers and reads.")
    p.add_argument("--test-runs", type=int, default=EpisodeConfig().test_runs, help="Test budget of both arms.")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--rows", default=None, help="Also write every episode's row (task, arm, rank, solved) as JSONL.")
    a = p.parse_args(argv)
    t0 = time.time()
    rows = measure(Path(a.corpus), tuple(a.splits), a.limit, a.test_runs, a.rule_nodes, a.workers)
    if a.rows:
        Path(a.rows).write_text("".join(json.dumps(r) + "\n" for r in rows))
    lines = table(rows, a.nodes, a.rule_nodes)
    lines.append(f"{len(rows) // 2} tasks x 2 arms in {time.time() - t0:.0f} s (test budget {a.test_runs})")
    print("\n".join(lines))
    return lines


if __name__ == "__main__":
    main()
