"""Explore(coverage): spectrum-based fault localisation inside PlannerEnv.

One coverage run per task: the failing tests' modules (the failing tests and the passing tests beside
them) on the unpatched base commit, with the corpus's per-test call recorder. Only the repository's own
code and tests run, never an agent's patch, so nothing a model writes can steer the spectrum; the run is
counted against its own budget (`coverage_runs`), not the test budget, and its spectrum is cached with
the task's test outcomes. Functions are ranked by the SBFL formula, ties broken by the run's traceback
(innermost frame first) and then by graph nearness to the failing tests (graph_planner.sbfl).
"""

from __future__ import annotations

from graph_planner.corpus.testrun import load_proof
from graph_planner.corpus.validate import IMPORT_TIME
from graph_planner.graph import GraphSearch, RepoGraph
from graph_planner.graph.build import is_test_file, test_node
from graph_planner.result_cache import ResultCache
from graph_planner.sbfl import rank, spectrum, suspiciousness
from graph_planner.tasks import RepairTask

COVERAGE_MODE = "coverage"
RECORDER_SLOWDOWN = 3.0
"""The coverage run's CPU limit is this many times a test run's: the per-call recorder slows Python code
about 2-3x, and a whole test module under it timed out for 6 of 146 tasks at the plain limit."""


def coverage_tests(task: RepairTask) -> list[str]:
    """What the coverage run runs: the modules of the task's failing tests (so passing neighbours too)."""
    return sorted({t.split("::")[0] for t in task.fail_to_pass})


def cache_key(task: RepairTask) -> str:
    """The result-cache key of a task's spectrum (the empty patch: the base commit as the corpus built it)."""
    return ResultCache.key(task.instance_id, {}, [COVERAGE_MODE, *coverage_tests(task)])


def function_nodes(graph: RepoGraph) -> set[str]:
    """Node ids of the repository's non-test functions and methods: what localisation may name."""
    return {nid for nid, n in graph.graph.nodes(data=True) if n["kind"] == "function" and not is_test_file(n["path"])}


def measure(runtime, task: RepairTask, graph: RepoGraph, cpu_s: float) -> dict:
    """Run the coverage run and return its spectrum: {status, failed, passed, spectrum: {node: [ef, ep]},
    seconds, tail}; status other than "ok" means no spectrum (timeout, nothing recorded)."""
    runtime.reset(task)  # the next run's reset removes the recorder's file again
    limit = RECORDER_SLOWDOWN * min(task.suite.timeout_s, cpu_s)
    run = runtime.run_tests(coverage_tests(task), load_proof(task.suite, limit), coverage=True)
    out = {"status": run.status, "seconds": round(run.seconds, 2), "tail": run.tail[-1500:]}
    if run.status != "ok" or not run.coverage:
        return {**out, "status": run.status if run.status != "ok" else "no coverage recorded"}
    known = function_nodes(graph)

    def nodes(calls) -> list[str]:
        return [nid for file, qual in calls if (nid := f"{file}::{qual}") in known]

    failed = {t for t, o in run.outcomes.items() if o in ("failed", "error")}
    passed = {t for t, o in run.outcomes.items() if o == "passed"} - failed
    calls = {t: nodes(c) for t, c in run.coverage.items() if t != IMPORT_TIME}
    spec = spectrum(calls, failed, passed, always=nodes(run.coverage.get(IMPORT_TIME, [])))
    return {**out, "failed": len(failed), "passed": len(passed), "spectrum": {k: list(v) for k, v in spec.items()}}


def ranked(
    result: dict, search: GraphSearch, failing: list[str], formula: str, limit: int = 10
) -> list[tuple[str, float]]:
    """The spectrum's functions by `formula`, ties broken by the run's traceback, then graph nearness to
    the failing tests (both hops of the calls / tests edges)."""
    spec = {k: tuple(v) for k, v in result.get("spectrum", {}).items()}
    scores = suspiciousness(spec, result.get("failed", 0), formula)
    frames = search.by_traceback(result.get("tail", ""))  # innermost first
    if not any(scores.values()):
        # No failing test recorded: the bug broke the modules' collection (a module-level call into it), so
        # no test ran; the collection error's traceback is the evidence left.
        known = function_nodes(search.repo)
        return [(n, s) for n, s in frames if n in known][:limit]
    trace = dict(frames)
    near = dict(search.expand([test_node(t) for t in failing], hops=2, limit=200))
    return rank(scores, (trace, near), limit)
