"""Building a task corpus: for each pinned package, fetch, commit, baseline, mutate, validate, write tasks.

Output folder:
  repos/<name>-<version>.git   bare repository: the clean source (branch main) and one tagged commit per
                               task with the bug applied (the task's base_commit)
  deps/<name>-<version>/       unpacked pure-Python dependencies (put on PYTHONPATH by the test runs)
  src/<name>-<version>/        the clean source the builder runs tests on
  tasks/<name>-<version>.jsonl the package's tasks (SWE-bench fields + planact fields)
  reports/<name>-<version>.json tried / kept / drop reasons / build time
  train.jsonl, heldout.jsonl, unseen_2025.jsonl   the split by package; report.json the whole build
A package whose report carries the same settings hash is not rebuilt (the build is cached).
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

from graph_planner.corpus.fetch import (
    DEFAULT_CACHE,
    FetchError,
    commit_change,
    fetch_sdist,
    init_repo,
)
from graph_planner.corpus.mutate import TOKEN_LEVEL, Mutant, mutants
from graph_planner.corpus.source import candidates, prepare, suite_for
from graph_planner.corpus.spec import CORPUS_SPLITS, CorpusConfig, PackageSpec
from graph_planner.corpus.testrun import RECORD_VERSION, Suite, load_proof
from graph_planner.corpus.validate import (
    Baseline,
    Verdict,
    baseline,
    problem_statement,
    uncollectable,
    validate_mutant,
)
from graph_planner.judge import gold_submit
from graph_planner.pyparse import parse
from graph_planner.runtime import LocalRuntime
from graph_planner.tasks import from_record
from planact.progress import Phase, ProgressFn

# What a task's validity means; a package built under an older meaning is rebuilt. 2: test ids as pytest
# runs them, the clean suite's order, outcomes over the host's channel, the gold patch through Submit.
# 3: mutants only inside function bodies (never annotations, decorators or computed defaults, whose fix
# no patch may make): the candidate lists of packages with such sites changed, so every package rebuilds.
# 4: a mutant's CPU limit is at least 20 s (was 10): two builds of the large corpus disagreed on 2 of 1,283
# mutants, each a fast suite's mutant whose dozens of failing tests' tracebacks cost ~10 s of CPU.
# 5: max_kept applies after the gold-patch check, so the kept set no longer depends on the core count.
# 6: a mutant's CPU limit grows by MUTANT_CPU_PER_TEST_S per test it runs: two builds disagreed on an
# rfc3986 mutant failing 1,966 tests, whose tracebacks cost ~40 s of CPU against a limit of 36-40 s.
# 7: the clean suite's record carries the name guard's keys (which gadget each function called with which
# risky name), so that a patch's run is judged against the clean code's, not the buggy base commit's.
# 8: the name guard also keys a getattr that reads anything but a plain scalar from a module, or yields a
# gadget, and package modules named like tests (loaded by pytest's rewriter) get the wrapped builtins too.
# 9: patch check rule 8 (a capability stays in its old statements) may refuse a gold fix it took; a
# judged run that swapped what a test runs is void.
VALIDITY = 9
# The floor sits in the gap between work and hangs: a mutant that completes costs a few times the clean
# suite (tracebacks of many failing tests), a hang grows without bound; at 10 s, CPU time's own spread
# (~10-20% run to run on 2 shared cores) kept such a mutant in one build and dropped it in the next.
MUTANT_CPU_FLOOR_S = 20.0
# A failing test's --tb=short traceback costs ~15 ms of CPU (rfc3986: 1,966 failing tests, ~30 s above its
# clean run; less since a run's reports parse each file once); 50 ms per test run keeps a 3x margin over that,
# and a hang still ends at a finite limit.
MUTANT_CPU_PER_TEST_S = 0.05


def _mutator_version() -> str:
    """A hash of the mutation operators' code (comments and formatting aside): a package built by other
    operators is rebuilt even when nobody remembered to bump VALIDITY."""
    return hashlib.sha256(ast.dump(parse(Path(mutants.__code__.co_filename).read_text())).encode()).hexdigest()[:12]


MUTATOR = _mutator_version()


def settings_hash(spec: PackageSpec, cfg: CorpusConfig) -> str:
    """What decides a package's tasks: its pin, the mutation budget, the validity rules and the operators."""
    budget = cfg.model_dump(include={"seed", "kinds", "per_function", "max_tried", "max_kept", "timeout_s"})
    if cfg.jail:  # the jail decides which gold fixes pass (gold_verdict); a build without it keeps its cache
        budget["jail"] = True
    # a field added to PackageSpec later counts only when set, so corpora built before keep their cache
    unset = {k for k in ("max_tried",) if getattr(spec, k) is None}
    blob = json.dumps([spec.model_dump(exclude=unset), budget, VALIDITY, MUTATOR], sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def difficulty(mutant: Mutant, output: str) -> str:
    """easy: token-level and the traceback names the function; hard: neither; medium: one of the two."""
    named = f"in {mutant.function.split('.')[-1]}" in output
    score = int(named) + int(mutant.kind in TOKEN_LEVEL)
    return ("hard", "medium", "easy")[score]


def task_record(
    spec: PackageSpec,
    mutant: Mutant,
    verdict: Verdict,
    original: str,
    out: Path,
    repo: Path,
    clean: str,
    suite: Suite,
    base: Baseline,
) -> dict:
    """A SWE-bench-format instance for one kept mutant (its buggy commit is created in `repo`)."""
    digest = hashlib.sha256(f"{mutant.file}\0{mutant.source}".encode()).hexdigest()[:10]
    instance_id = f"{spec.key}__{digest}"
    commit = commit_change(
        repo, clean, mutant.file, mutant.source, f"{mutant.kind} in {mutant.function}", f"task/{instance_id}"
    )
    return {
        "instance_id": instance_id,
        "repo": spec.name,
        "version": spec.version,
        "base_commit": commit,
        "patch": mutant.patch(original),
        "test_patch": "",
        "FAIL_TO_PASS": verdict.fail_to_pass,
        "PASS_TO_PASS": verdict.pass_to_pass,
        "problem_statement": problem_statement(spec.name, verdict.fail_to_pass, verdict.output),
        "mutation": mutant.kind,
        "mutation_description": mutant.description,
        "file": mutant.file,
        "function": mutant.function,
        "line": mutant.line,
        "difficulty": difficulty(mutant, verdict.output),
        "split": spec.split,
        "planact_env": {
            "repo_dir": f"repos/{spec.key}.git",
            "source_root": suite.source_root,
            "pythonpath": [os.path.relpath(p, out) for p in suite.pythonpath],
            "pytest_args": list(suite.pytest_args),
            "timeout_s": suite.timeout_s,
            # Submit runs FAIL_TO_PASS + PASS_TO_PASS in the clean suite's order (an order-dependent
            # test behaves as it did there): where in that order each FAIL_TO_PASS test sits
            "fail_to_pass_at": submit_positions(base, verdict),
            # what each function set off in the clean suite: the runtime guard's baseline for a patch
            "clean_events": base.events,
            "record_version": RECORD_VERSION,
        },
    }


def submit_positions(base: Baseline, verdict: Verdict) -> list[int]:
    """Positions of the FAIL_TO_PASS tests in Submit's run (both lists merged in the clean suite's order)."""
    f2p = set(verdict.fail_to_pass)
    merged = base.in_order([*verdict.fail_to_pass, *verdict.pass_to_pass])
    return [i for i, t in enumerate(merged) if t in f2p]


def build_package(
    spec: PackageSpec, cfg: CorpusConfig, out: Path, cache: Path = DEFAULT_CACHE, log: Callable[[str], None] = print
) -> tuple[list[dict], dict]:
    """Tasks and the build report of one package (reused when already built with the same settings)."""
    out = out.resolve()
    report_path, tasks_path = out / "reports" / f"{spec.key}.json", out / "tasks" / f"{spec.key}.jsonl"
    if spec.max_tried:
        cfg = cfg.model_copy(update={"max_tried": spec.max_tried})
    key = settings_hash(spec, cfg)
    if report_path.is_file() and tasks_path.is_file() and json.loads(report_path.read_text()).get("settings") == key:
        log(f"{spec.key}: cached")
        return read_jsonl(tasks_path), json.loads(report_path.read_text())
    t0 = time.monotonic()
    src = prepare(spec, out, cache)
    suite = suite_for(spec, out, cfg.timeout_s)
    base = baseline(src, runs=2, suite=suite)
    # Test modules that cannot even be imported here (a package this machine lacks) would stop every run:
    # they are left out (`--ignore`, recorded in each task, so Submit runs the same suite) and reported.
    ignored = uncollectable(base.output)
    if ignored:
        suite = replace(suite, pytest_args=(*suite.pytest_args, *(f"--ignore={m}" for m in sorted(ignored))))
        base = baseline(src, runs=2, suite=suite)
    pin = out / "src" / f"{spec.key}.sha256"
    report = {
        "package": spec.key,
        "split": spec.split,
        "settings": key,
        "sha256": pin.read_text() if pin.is_file() else "",
        "tests_passing": len(base.passing),
        "tests_flaky": len(base.flaky),
        "tests_slow": len(base.slow),
        "suite_s": round(base.seconds, 2),
        "suite_cpu_s": round(base.cpu_seconds, 2),
        "modules_ignored": ignored,
    }
    refusal = refuse(base, cfg)
    if refusal:
        # one unusable package must not cost the others their build: it is reported and yields nothing
        report.update(unusable=refusal, tried=0, kept=0, dropped={}, kinds={}, build_s=round(time.monotonic() - t0, 1))
        log(f"{spec.key}: UNUSABLE: {refusal}")
        return _save([], report, tasks_path, report_path)
    log(
        f"{spec.key}: {len(base.passing)} tests pass reliably ({len(base.flaky)} flaky, {len(base.slow)} slow "
        "dropped), "
        f"suite {base.seconds:.1f} s ({base.cpu_seconds:.1f} s CPU)"
    )
    # a mutant runs only the tests that call its function: 4x the CPU seconds of the clean suite (at least
    # MUTANT_CPU_FLOOR_S) tells a hang (a mutated loop condition) from work long before the suite-wide limit
    # would, and, being CPU time on both sides, keeps the same mutants however loaded the machine is; plus
    # MUTANT_CPU_PER_TEST_S per test run (validate_mutant), for the tracebacks of the tests a mutant fails
    check = load_proof(suite, min(cfg.timeout_s, max(MUTANT_CPU_FLOOR_S, 4 * base.cpu_seconds)))
    check = replace(check, cpu_per_test_s=MUTANT_CPU_PER_TEST_S)
    report["mutant_cpu_limit_s"] = round(check.cpu_s, 2)
    report["mutant_cpu_per_test_s"] = MUTANT_CPU_PER_TEST_S
    cands = candidates(src, base, cfg)
    workers = cfg.workers or os.cpu_count() or 1
    repo = out / "repos" / f"{spec.key}.git"
    clean = init_repo(src, repo)
    tasks, seen, dropped, gold_failures = [], set(), Counter(), []
    originals: dict[str, str] = {}
    tried = 0
    slots = _Slots()
    with slots, ThreadPoolExecutor(workers) as pool:
        # Kept tasks are the first max_kept valid mutants in candidate order, so validating in order, a
        # few at a time, and stopping once max_kept are kept builds the same tasks without the test runs
        # of mutants that could only be dropped ("max_kept reached": a quarter of the tries of a big package).
        for start in range(0, len(cands), 2 * workers):
            if len(tasks) >= cfg.max_kept:
                break
            chunk = cands[start : start + 2 * workers]
            fresh = []
            for m, v in zip(chunk, pool.map(lambda m: validate_mutant(src, m, base, check), chunk)):
                tried += 1
                reason = v.reason
                if v.kept and (m.function, tuple(v.fail_to_pass)) in seen:
                    reason = "same failing tests as a kept mutant of the function"
                if reason:
                    dropped[reason] += 1
                    continue
                seen.add((m.function, tuple(v.fail_to_pass)))
                original = originals.setdefault(m.file, (src / m.file).read_text())
                fresh.append(task_record(spec, m, v, original, out, repo, clean, suite, base))
            # A task counts only if its own gold patch resolves it through the very path an agent's takes.
            # max_kept is applied after the gold check, in candidate order: decided before it, a gold failure
            # in a chunk let the next chunk refill the slot, so the kept set followed the chunk size (the
            # machine's core count)
            for row, why in zip(fresh, pool.map(lambda r: slots.gold_verdict(r, out, cfg.jail), fresh)):
                if why:
                    dropped[why.split(" (")[0].split(":")[0]] += 1
                    gold_failures.append({"instance_id": row["instance_id"], "reason": why[:500]})
                elif len(tasks) >= cfg.max_kept:
                    dropped["max_kept reached"] += 1
                else:
                    tasks.append(row)
    report.update(
        functions_covered=sum(len(v) for v in base.covered_functions().values()),
        tried=tried,
        kept=len(tasks),
        dropped=dict(dropped),
        kinds=dict(Counter(t["mutation"] for t in tasks)),
        gold_failures=gold_failures[:50],
        build_s=round(time.monotonic() - t0, 1),
    )
    if not tasks and gold_failures:
        # every kept mutant's own fix fails an agent's Submit: the package yields nothing, and says why
        report["unusable"] = (
            f"all {len(gold_failures)} validated tasks fail Submit with their own gold patch, "
            f"e.g. {gold_failures[0]['reason']}"
        )
        log(f"{spec.key}: UNUSABLE: {report['unusable']}")
    log(f"{spec.key}: tried {tried}, kept {len(tasks)}, dropped {dict(dropped)} in {report['build_s']} s")
    return _save(tasks, report, tasks_path, report_path)


def refuse(base: Baseline, cfg: CorpusConfig) -> str:
    """Why a package's clean suite cannot make tasks ("" when it can)."""
    if not base.passing:
        tail = "\n".join(base.output.strip().splitlines()[-3:])
        return f"no test passes on the clean source (is pytest collecting it?); the run ended: {tail}"
    if base.seconds > cfg.max_suite_s:
        return f"the clean suite takes {base.seconds:.0f} s > max_suite_s {cfg.max_suite_s}"
    if not base.covered_functions():
        return (
            "the tests ran no function of the repository (they imported an installed copy?); set source_root "
            "('.' or 'src') in its corpus entry"
        )
    return ""


def _save(tasks: list[dict], report: dict, tasks_path: Path, report_path: Path) -> tuple[list[dict], dict]:
    write_jsonl(tasks_path, tasks)
    report_path.parent.mkdir(parents=True, exist_ok=True)
    report_path.write_text(json.dumps(report, indent=1))
    return tasks, report


class _Slots:
    """One sandbox working copy per build thread, for the gold patches' Submit runs; removed at exit."""

    def __init__(self):
        self._local, self._all, self._lock = threading.local(), [], threading.Lock()

    def _runtime(self) -> LocalRuntime:
        rt = getattr(self._local, "runtime", None)
        if rt is None:
            rt = self._local.runtime = LocalRuntime()
            with self._lock:
                self._all.append(rt)
        return rt

    def gold_verdict(self, row: dict, out: Path, jail: bool) -> str:
        """Why the task of `row` fails an agent's Submit with its own gold patch ("" when it resolves it).
        With `jail`, the task's qualification for the call jail (graph_planner/jail_qualify.py) is decided
        first and stored in the row: a jailed task's gold then goes down the jailed path an agent's answer
        takes, where the patch check judges structure only (a body that runs only in the jail cannot reach
        the test process), so the static body rules no longer drop a jailed task whose fix they refuse."""
        from graph_planner.jail_qualify import qualify

        if jail:
            row["planact_env"]["jail"] = qualify(self._runtime(), from_record(row, out))["jail"]
        return gold_submit(self._runtime(), from_record(row, out))

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        for rt in self._all:
            rt.close()


def prefetch(cfg: CorpusConfig, cache: Path = DEFAULT_CACHE) -> None:
    """Every sdist the build needs, into `cache`, before any work: one error names every package that failed."""
    failed = []
    for ref in [d for spec in cfg.packages if not spec.source for d in (spec, *spec.deps)]:
        try:
            fetch_sdist(ref.name, ref.version, ref.sha256, cache)
        except FetchError as e:
            failed.append(f"{ref.name}=={ref.version}: " + str(e).strip().replace("\n", "\n    "))
    if failed:
        raise FetchError("cannot fetch (fix or drop these packages; nothing was built):\n  " + "\n  ".join(failed))


def build_corpus(
    cfg: CorpusConfig,
    out: str | Path,
    cache: Path = DEFAULT_CACHE,
    log: Callable[[str], None] = print,
    progress: ProgressFn | None = None,
) -> dict:
    """Build every package of `cfg` into `out`; writes train.jsonl / heldout.jsonl / report.json.

    `progress` hears each package built, k of n (a package takes seconds cached, minutes fresh)."""
    prefetch(cfg, cache)
    out = Path(out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    splits: dict[str, list[dict]] = {name: [] for name in CORPUS_SPLITS}
    reports = []
    phase = Phase("corpus build", len(cfg.packages), progress)
    for spec in cfg.packages:
        tasks, report = build_package(spec, cfg, out, cache, log)
        splits[spec.split] += tasks
        reports.append(report)
        phase.advance(note=f"{spec.key}: {report.get('kept', 0)} tasks")
    for name, tasks in splits.items():
        write_jsonl(out / f"{name}.jsonl", tasks)
    summary = {
        "packages": reports,
        "tasks": sum(r["kept"] for r in reports),
        **{name: len(rows) for name, rows in splits.items()},
        "unusable": {r["package"]: r["unusable"] for r in reports if r.get("unusable")},
    }
    (out / "report.json").write_text(json.dumps(summary, indent=1))
    return summary


def write_jsonl(path: Path, rows: list[dict]) -> None:
    """One JSON object per line."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def read_jsonl(path: Path) -> list[dict]:
    """Rows of a JSONL file."""
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
