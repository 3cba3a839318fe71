"""Gold fixes through Submit with the module state digest on: how many it would refuse, and what it costs.

For each task (every `--every`th), the gold fix's module state reference is taken (two runs: the first and
the confirming one), then the gold fix goes through Submit's judged path (two more runs) and is compared with
it (graph_planner/state_digest.py): a refusal here is nondeterministic state the reference's two runs did not
show. Prints per package: tasks, passed, voided by the digest, other failures, tasks without a reference, the
digest's seconds per run (measured in the test process) beside the run's wall seconds, and the globals
digested and left out as unstable. With `--plain`, the same Submit without the digest too, for wall time.

    python benchmarks/state_digest_gold.py --corpus runs/corpus --every 1
    python benchmarks/state_digest_gold.py --corpus runs/corpus --every 10 --plain --json out.json
    python benchmarks/state_digest_gold.py --tiny    # a built-in package's few tasks (what the test runs)
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from repair_throughput import tiny_corpus  # noqa: E402  (this script's folder is on sys.path)

from graph_planner.corpus.testrun import load_proof  # noqa: E402
from graph_planner.judge import (  # noqa: E402
    DEFAULT_TEST_CPU_S,
    gold_texts,
    passed,
    run_patch,
    state_reference,
)
from graph_planner.result_cache import ResultCache  # noqa: E402
from graph_planner.runtime import LocalRuntime  # noqa: E402
from graph_planner.tasks import load_tasks  # noqa: E402


def judge_gold(runtime, task, cpu_s: float, plain: bool) -> dict:
    """One task's gold fix: its reference, its Submit verdict with the digest, and (with `plain`) without."""
    cache, texts, tests = ResultCache(), gold_texts(task), task.submit_tests()
    t0 = time.perf_counter()
    ref = state_reference(runtime, cache, task, tests, load_proof(task.suite, min(task.suite.timeout_s, cpu_s)))
    ref_s = time.perf_counter() - t0
    result = run_patch(runtime, cache, task, texts, tests, "submit", cpu_s, digest=True, origin="gold")
    row = {
        "task": task.instance_id,
        "package": task.instance_id.split("__")[0],
        "passed": passed(result),
        "voided": "module state" in result.get("tampered", ""),
        "why": result.get("tampered", "") or ("" if passed(result) else result.get("status")),
        "reference": ref.get("none", "ok"),
        "keys": len(ref["digests"][0][1]) if ref.get("digests") else 0,
        "unstable": len(ref.get("unstable", [])),
        "tests": len(tests),
        "digest_s": result.get("digest_s", 0.0),  # the first run's (the confirming run takes none)
        "run_s": result["seconds"] / 2,
        "reference_s": round(ref_s, 2),
    }
    if plain:
        row["plain_s"] = (
            run_patch(runtime, ResultCache(), task, texts, tests, "submit", cpu_s, digest=False, origin="gold")[
                "seconds"
            ]
            / 2
        )
    return row


def summary(rows: list[dict]) -> dict[str, dict]:
    """Per package and overall: counts, and mean seconds per run."""
    groups = defaultdict(list)
    for row in rows:
        groups[row["package"]].append(row)
        groups["all"].append(row)
    out = {}
    for name, part in groups.items():
        n = len(part)
        out[name] = {
            "tasks": n,
            "passed": sum(r["passed"] for r in part),
            "voided_by_digest": sum(r["voided"] for r in part),
            "other_failures": sum(not r["passed"] and not r["voided"] for r in part),
            "no_reference": sum(r["reference"] != "ok" for r in part),
            "digest_s_per_run": round(sum(r["digest_s"] for r in part) / n, 4),
            "run_s": round(sum(r["run_s"] for r in part) / n, 3),
            "digest_ms_per_test": round(1000 * sum(r["digest_s"] / max(1, r["tests"]) for r in part) / n, 3),
            "keys": round(sum(r["keys"] for r in part) / n, 1),
            "unstable": sum(r["unstable"] for r in part),
        }
        if all("plain_s" in r for r in part):
            out[name]["plain_run_s"] = round(sum(r["plain_s"] for r in part) / n, 3)
    return out


def main() -> None:
    """Run the gold fixes of a corpus through Submit with the digest on and print the summary."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", default="runs/corpus")
    ap.add_argument("--every", type=int, default=1, help="every Nth task of each split file")
    ap.add_argument("--plain", action="store_true", help="also Submit without the digest (wall time)")
    ap.add_argument("--cpu-s", type=float, default=DEFAULT_TEST_CPU_S)
    ap.add_argument("--json", help="write every task's row here")
    ap.add_argument("--tiny", action="store_true", help="a built-in package's few tasks, built here (smoke mode)")
    a = ap.parse_args()
    corpus = tiny_corpus(Path(tempfile.mkdtemp(prefix="digest-bench-"))) if a.tiny else Path(a.corpus)
    tasks = list(load_tasks(corpus))[:: a.every]
    runtime, rows = LocalRuntime(), []
    try:
        for i, task in enumerate(tasks, 1):
            row = judge_gold(runtime, task, a.cpu_s, a.plain)
            rows.append(row)
            print(f"[{i}/{len(tasks)}] {json.dumps(row)}", flush=True)
    finally:
        runtime.close()
    print(json.dumps(summary(rows), indent=1))
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
