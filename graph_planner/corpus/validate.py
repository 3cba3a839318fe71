"""Running a repository's own tests in the sandbox, and keeping a mutant only when its tests say so.

A test run happens in a private copy of the repository (or in place, in an episode's working copy)
with `python -m pytest` in planact's sandbox (no network, the host read-only, a wall-clock limit for
the whole run); per-test outcomes come from a JUnit XML report the run writes into that directory.
A mutant is kept when at least one test that passed on the clean source fails with the bug
(FAIL_TO_PASS) and every other baseline test still passes (PASS_TO_PASS); otherwise the reason it was
dropped is returned.

With a coverage map (which tests call which function, recorded by `plugin/planact_coverage.py` on the
clean source) only the tests that call the mutated function are run: a test that never calls it runs
the same code with or without the bug, so its outcome cannot change. Functions that run at import time
are the exception and are validated against the whole suite.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field, replace
from pathlib import Path

from graph_planner.corpus.mutate import Mutant
from planact import sandbox

_IGNORE = shutil.ignore_patterns(".git", "__pycache__", "*.pyc", ".pytest_cache")
_PLUGIN_DIR = str(Path(__file__).parent / "plugin")
REPORT, COVERAGE = ".planact-junit.xml", ".planact-coverage.json"
IMPORT_TIME = "<import>"


@dataclass(frozen=True)
class Suite:
    """How one repository's tests run: import paths, pytest arguments, limits."""

    source_root: str = "."
    """Folder (relative to the repository) that goes first on PYTHONPATH: "." or "src"."""
    pythonpath: tuple[str, ...] = ()
    """Further absolute folders on PYTHONPATH (unpacked pure-Python dependencies); mounted read-only."""
    pytest_args: tuple[str, ...] = ("-o", "addopts=")
    """Extra pytest arguments; the default drops the project's addopts (coverage plugins, doctest flags
    that need packages the sandbox does not have)."""
    timeout_s: float = 120.0
    """Wall-clock limit of one whole test run (SWE-smith uses 120 s)."""
    cpu_s: float | None = None
    """CPU-seconds limit of the test process; None = the wall-clock limit alone decides (see load_proof)."""
    memory_mb: int = 2048
    """Address-space limit per process."""


# Wall-clock backstop of a CPU-limited run, in multiples of its CPU limit: wide enough that a run slowed
# down by everything else on a loaded 2-core machine (three benchmark processes, two test slots each)
# still finishes, while a run that computes forever is stopped by its CPU limit alone.
WALL_BACKSTOP = 4.0


def load_proof(suite: Suite, seconds: float) -> Suite:
    """`suite` judged by `seconds` of CPU time instead of wall-clock time, so that a verdict (kept or
    dropped mutant, reward 1 or 0) does not depend on how busy the machine was; a run that blocks without
    computing is still stopped, at WALL_BACKSTOP x `seconds`."""
    return replace(suite, timeout_s=WALL_BACKSTOP * seconds, cpu_s=seconds)


@dataclass
class TestRun:
    """Outcome of one test run: per test id passed / failed / skipped, how the process ended, its output."""

    outcomes: dict[str, str] = field(default_factory=dict)
    status: str = "ok"
    seconds: float = 0.0
    output: str = ""
    rc: int | None = None
    coverage: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    durations: dict[str, float] = field(default_factory=dict)
    cpu_s: float | None = None

    def passed(self) -> set[str]:
        """Ids of the tests that passed."""
        return {t for t, o in self.outcomes.items() if o == "passed"}

    @property
    def tail(self) -> str:
        """The last 2000 characters of the run's output."""
        return self.output[-2000:]


def _test_id(case: ET.Element) -> str:
    """pytest's node id from a JUnit testcase: file::Class::name (classname is dotted module[.Class])."""
    classname, name = case.get("classname", ""), case.get("name", "")
    file = case.get("file")
    parts = classname.split(".")
    if file:
        module_parts = Path(file).with_suffix("").parts
        rest = parts[len(module_parts):]
        return "::".join([file, *rest, name])
    return "::".join([classname, name])


def read_junit(path: Path) -> tuple[dict[str, str], dict[str, float]]:
    """Per-test outcomes and seconds from a pytest JUnit XML report."""
    out, seconds = {}, {}
    for case in ET.parse(path).getroot().iter("testcase"):
        children = {c.tag for c in case}
        outcome = "failed" if children & {"failure", "error"} else "skipped" if "skipped" in children else "passed"
        out[_test_id(case)] = outcome
        seconds[_test_id(case)] = float(case.get("time") or 0.0)
    return out, seconds


def run_in_place(workdir: str | Path, tests: list[str] | None = None, suite: Suite = Suite(),
                 coverage: bool = False) -> TestRun:
    """Run pytest (all tests or `tests`) in the sandbox with `workdir` as the only writable place."""
    workdir = Path(workdir)
    for name in (REPORT, COVERAGE):
        (workdir / name).unlink(missing_ok=True)
    argv = [sys.executable, "-m", "pytest", "-q", "-rf", "--tb=short", "-p", "no:cacheprovider",
            "-o", "junit_family=xunit1", f"--junitxml={REPORT}", *suite.pytest_args]
    pythonpath = [str(workdir / suite.source_root), *suite.pythonpath]
    if coverage:
        argv += ["-p", "planact_coverage"]
        pythonpath.append(_PLUGIN_DIR)
    argv += list(tests or [])
    limits = sandbox.Limits(timeout_s=suite.timeout_s, cpu_s=suite.cpu_s, memory_mb=suite.memory_mb, processes=64,
                            open_files=256, output_bytes=32 * 1024, file_mb=64)
    # Only the plugins named here: the entry-point plugins installed beside planact (xdist, anyio,
    # hypothesis, timeout, ...) cost ~0.8 s of every ~1.1 s run's startup and no corpus suite uses them.
    env = {"PYTHONPATH": ":".join(pythonpath), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    done = sandbox.run(argv, workdir=workdir, limits=limits, env=env,
                       read_only=[p for p in pythonpath[1:] if Path(p).exists()])
    report = workdir / REPORT
    try:
        outcomes, durations = read_junit(report) if report.is_file() else ({}, {})
    except ET.ParseError:
        outcomes, durations = {}, {}
    cov = {}
    if coverage and (workdir / COVERAGE).is_file():
        cov = {k: [tuple(x) for x in v] for k, v in json.loads((workdir / COVERAGE).read_text()).items()}
    status = done.status if done.status in ("timeout", "memory") or not outcomes else "ok"
    return TestRun(outcomes, status, done.seconds, done.stdout + done.stderr, done.returncode, cov, durations,
                   done.cpu_s)


def run_tests(repo: str | Path, tests: list[str] | None = None, suite: Suite = Suite(),
              overrides: dict[str, str] | None = None, coverage: bool = False) -> TestRun:
    """Run the repository's suite (or `tests`) on a private copy, with files replaced by `overrides`
    (relative path -> text)."""
    work = Path(tempfile.mkdtemp(prefix="planact-tests-"))
    try:
        copy = work / "repo"
        shutil.copytree(repo, copy, ignore=_IGNORE, symlinks=True)
        for rel, text in (overrides or {}).items():
            (copy / rel).write_text(text)
        return run_in_place(copy, tests, suite, coverage)
    finally:
        shutil.rmtree(work, ignore_errors=True)


@dataclass
class Baseline:
    """Tests that pass reliably on the clean source, and which functions each of them calls."""

    passing: set[str]
    coverage: dict[str, list[tuple[str, str]]]
    flaky: set[str]
    seconds: float
    slow: set[str] = field(default_factory=set)
    cpu_seconds: float = 0.0
    """CPU seconds of the slowest clean run: what a mutant's time limit is derived from, because unlike
    `seconds` it does not grow with the machine's load."""

    def covering(self, file: str, function: str) -> list[str] | None:
        """Passing tests that call `function` in `file`; None when it runs at import time (all tests)."""
        key = (file, function)
        if key in self.coverage.get(IMPORT_TIME, []):
            return None
        return sorted(t for t, calls in self.coverage.items() if t in self.passing and key in calls)

    def covered_functions(self) -> dict[str, set[str]]:
        """file -> functions some passing test (or the import of the package) calls."""
        out: dict[str, set[str]] = {}
        for test, calls in self.coverage.items():
            if test in self.passing or test == IMPORT_TIME:
                for file, fn in calls:
                    out.setdefault(file, set()).add(fn)
        return out


def baseline(repo: str | Path, runs: int = 2, suite: Suite = Suite(), slow_test_s: float = 5.0) -> Baseline:
    """Run the clean suite `runs` times (the first with the coverage recorder) and keep the tests that
    always pass and take under `slow_test_s` (flaky and slow ones are dropped)."""
    passing: set[str] | None = None
    seen: set[str] = set()
    slow: set[str] = set()
    cov: dict = {}
    seconds = cpu_seconds = 0.0
    for i in range(runs):
        result = run_tests(repo, suite=suite, coverage=(i == 0))
        cov = cov or result.coverage
        seen |= result.passed()
        if i > 0 or runs == 1:  # the recorder's run is slower than an episode's would be
            slow |= {t for t, s in result.durations.items() if s > slow_test_s}
        seconds = max(seconds, result.seconds)
        cpu_seconds = max(cpu_seconds, result.cpu_s or 0.0)
        passing = result.passed() if passing is None else passing & result.passed()
    passing = (passing or set()) - slow
    return Baseline(passing, cov, seen - passing - slow, seconds, slow, cpu_seconds)


@dataclass
class Verdict:
    """A mutant's fate: kept with its FAIL_TO_PASS / PASS_TO_PASS, or dropped with the reason."""

    kept: bool
    reason: str = ""
    fail_to_pass: list[str] = field(default_factory=list)
    pass_to_pass: list[str] = field(default_factory=list)
    seconds: float = 0.0
    output: str = ""


def validate_mutant(repo: str | Path, mutant: Mutant, base: Baseline | set[str], suite: Suite = Suite()) -> Verdict:
    """Run the tests that can see the bug (all, without a coverage map) and decide whether it makes a task."""
    passing = base.passing if isinstance(base, Baseline) else set(base)
    tests = base.covering(mutant.file, mutant.function) if isinstance(base, Baseline) else None
    if tests == []:
        return Verdict(False, "no passing test calls the function")
    run = run_tests(repo, tests=tests, suite=suite, overrides={mutant.file: mutant.source})
    if run.status != "ok":
        return Verdict(False, f"test run {run.status}", seconds=run.seconds, output=run.tail)
    # a covering test missing from the report (collection broke) counts as failed
    now = run.passed() | (passing - set(tests) if tests is not None else set())
    f2p = sorted(passing - now)
    if not f2p:
        return Verdict(False, "no baseline test fails", seconds=run.seconds)
    return Verdict(True, "", f2p, sorted(passing & now), run.seconds, run.output)


_FAILURES = re.compile(r"^=+ FAILURES =+$", re.M)
_SUMMARY = re.compile(r"^=+ short test summary info =+$", re.M)


def problem_statement(package: str, fail_to_pass: list[str], output: str, limit: int = 1800) -> str:
    """An issue text written from the failing tests and their assertion output (never from the fix)."""
    names = fail_to_pass[:8] + ([f"... and {len(fail_to_pass) - 8} more"] if len(fail_to_pass) > 8 else [])
    body = ""
    m = _FAILURES.search(output)
    if m:
        end = _SUMMARY.search(output, m.end())
        body = output[m.end():end.start() if end else None].strip()
    text = f"In {package}, these tests fail:\n" + "\n".join(f"  {n}" for n in names)
    if body:
        text += "\n\nTest output:\n" + body[:limit] + ("\n[...]" if len(body) > limit else "")
    return text
