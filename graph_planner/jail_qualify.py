"""Which tasks use the call jail (graph_planner/jail.py): decided per task, never per patch.

A task qualifies when its gold fix changes exactly one function (top level or a class's, in a file that is
no test module), the gold fix passes Submit's tests with that function run only in the jail, and the buggy
base commit fails FAIL_TO_PASS the same way: the reference answer goes down the very path an agent's answer
will take. The result is stored with each task at corpus build (`planact_env["jail"]`) or, for a corpus
built before, in a sidecar beside its task files (tasks.JAIL_SIDECAR), which `load_tasks` reads.

    python -m graph_planner.jail_qualify CORPUS [--split heldout] [--out FILE] [--log FILE] [--workers N]
"""

from __future__ import annotations

import argparse
import json
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

from graph_planner.judge import DEFAULT_TEST_CPU_S, fix_sites, gold_texts, passed, run_patch
from graph_planner.patching import PatchError
from graph_planner.provenance import GOLD
from graph_planner.result_cache import ResultCache
from graph_planner.tasks import JAIL_SIDECAR, RepairTask, load_tasks


def _testish(path: str) -> bool:
    name = os.path.basename(path)
    return name.startswith("test_") or name.endswith("_test.py") or name == "conftest.py"


def candidate(task: RepairTask) -> tuple[dict | None, str]:
    """The jail's target for `task` ({"module", "path", "qualname"}) and "" or None and why it has none."""
    sites = fix_sites(task)
    if len(sites) != 1:
        return None, f"the gold fix changes {len(sites)} functions"
    path, qualname = next(iter(sites)).split("::", 1)
    root = task.suite.source_root.strip("/")
    if _testish(path) or not path.endswith(".py") or (root not in ("", ".") and not path.startswith(root + "/")):
        return None, f"{path} is a test module or outside the source root"
    module = path[len(root) + 1 :] if root not in ("", ".") else path
    module = module[:-3].replace("/", ".")
    module = module[: -len(".__init__")] if module.endswith(".__init__") else module
    return {"module": module, "path": path, "qualname": qualname}, ""


def qualify(runtime, task: RepairTask, cpu_s: float = DEFAULT_TEST_CPU_S) -> dict:
    """{"jail": target or None, "why": "" or why not, "gold_s", "bug_s", "gold_cpu_s"...} for one task."""
    spec, why = candidate(task)
    out: dict = {"instance_id": task.instance_id, "jail": None, "why": why}
    if spec is None:
        return out
    jailed = replace(task, jail=spec)
    try:
        gold = gold_texts(task)
    except PatchError as e:
        return {**out, "why": f"gold patch does not apply: {e}"}
    start = time.perf_counter()
    result = run_patch(runtime, ResultCache(), jailed, gold, task.submit_tests(), "submit", cpu_s, origin=GOLD)
    out.update(gold_s=round(time.perf_counter() - start, 3), gold_cpu_s=result.get("used_cpu_s"))
    if not passed(result):
        return {
            **out,
            "why": f"gold fix under the jail: {result['status']}, {result['n_failed']} failed",
            "tail": result.get("tail", "")[-600:],
        }
    start = time.perf_counter()
    bug = run_patch(runtime, ResultCache(), jailed, {}, task.fail_to_pass, "fail_to_pass", cpu_s)
    out.update(bug_s=round(time.perf_counter() - start, 3))
    if passed(bug):
        return {**out, "why": "the bug passes FAIL_TO_PASS under the jail"}
    return {**out, "jail": spec}


def main(argv: list[str] | None = None) -> None:
    """Qualify every task of a corpus and write the sidecar (instance id -> target or null)."""
    from graph_planner.runtime import LocalRuntime

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("corpus")
    ap.add_argument("--split", default=None)
    ap.add_argument("--out", default=None, help="sidecar file (default: CORPUS/jail.json)")
    ap.add_argument("--log", default=None, help="a JSON line per task")
    ap.add_argument("--only", nargs="*", default=None, help="instance ids")
    ap.add_argument("--workers", type=int, default=1, help="tasks qualified at once (a sandbox runtime each)")
    args = ap.parse_args(argv)
    tasks = [t for t in load_tasks(args.corpus, args.split) if not args.only or t.instance_id in args.only]
    out = Path(args.out or Path(args.corpus) / JAIL_SIDECAR)
    table = json.loads(out.read_text()) if out.is_file() else {}
    local, runtimes, lock = threading.local(), [], threading.Lock()

    def one(task: RepairTask) -> tuple[RepairTask, dict]:
        runtime = getattr(local, "runtime", None)
        if runtime is None:  # one per thread: a runtime's working copy serves one run at a time
            runtime = local.runtime = LocalRuntime()
            with lock:
                runtimes.append(runtime)
        return task, qualify(runtime, replace(task, jail={}))

    log = open(args.log, "a") if args.log else None  # noqa: SIM115 - appended to as tasks finish
    try:
        with ThreadPoolExecutor(max(1, args.workers)) as pool:
            for task, row in pool.map(one, tasks):
                row["split"] = task.meta.get("split", args.split)
                table[task.instance_id] = row["jail"]
                out.write_text(json.dumps(table, indent=1, sort_keys=True))
                if log:
                    log.write(json.dumps(row) + "\n")
                    log.flush()
                print(task.instance_id, "jail" if row["jail"] else f"no: {row['why'][:120]}", flush=True)
    finally:
        for runtime in runtimes:
            runtime.close()


if __name__ == "__main__":
    main()
