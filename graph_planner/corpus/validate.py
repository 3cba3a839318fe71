"""Running a repository's own tests, and keeping a mutant only when its tests say so.

How one run happens and when its report is believed is `graph_planner.corpus.testrun`'s business.
A mutant is kept when at least one test that passed on the clean source fails with the bug
(FAIL_TO_PASS) and every other baseline test still passes (PASS_TO_PASS); otherwise the reason it was
dropped is returned.

With a coverage map (which tests call which function, recorded by `plugin/planact_coverage.py` on the
clean source) only the tests that call the mutated function are run: a test that never calls it runs
the same code with or without the bug, so its outcome cannot change. Functions that run at import time
are the exception and are validated against the whole suite.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from graph_planner.corpus.events import package_watch
from graph_planner.corpus.mutate import Mutant
from graph_planner.corpus.testrun import Guard, Suite, TestRun, load_proof, run_in_place

_IGNORE = shutil.ignore_patterns(".git", "__pycache__", "*.pyc", ".pytest_cache")
IMPORT_TIME = "<import>"


def run_tests(
    repo: str | Path,
    tests: list[str] | None = None,
    suite: Suite = Suite(),
    overrides: dict[str, str] | None = None,
    coverage: bool = False,
    guard: Guard = Guard(),
) -> TestRun:
    """Run the repository's suite (or `tests`) on a private copy, with files replaced by `overrides`
    (relative path -> text), under `guard`."""
    work = Path(tempfile.mkdtemp(prefix="planact-tests-"))
    try:
        copy = work / "repo"
        shutil.copytree(repo, copy, ignore=_IGNORE, symlinks=True)
        for rel, text in (overrides or {}).items():
            (copy / rel).write_text(text)
        return run_in_place(copy, tests, suite, coverage, guard)
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
    order: list[str] = field(default_factory=list)
    """Test ids in the order the clean suite ran them."""
    output: str = ""
    """The tail of the first clean run's output (why nothing passed, when nothing did)."""
    events: dict[str, list[str]] = field(default_factory=dict)
    """"path::function" -> the audit events it (with what it calls) set off in the clean suite (the
    runtime guard's baseline; functions that set off none are left out)."""

    def covering(self, file: str, function: str) -> list[str] | None:
        """Passing tests that call `function` in `file`, in the clean run's order; None when it runs at
        import time (all tests)."""
        key = (file, function)
        if key in self.coverage.get(IMPORT_TIME, []):
            return None
        return self.in_order(t for t, calls in self.coverage.items() if t in self.passing and key in calls)

    def in_order(self, tests) -> list[str]:
        """`tests` in the order the clean suite ran them (order-dependent suites give the same outcomes)."""
        rank = {t: i for i, t in enumerate(self.order)}
        return sorted(set(tests), key=lambda t: (rank.get(t, len(rank)), t))

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
    order: list[str] = []
    output = ""
    for i in range(runs):
        result = run_tests(repo, suite=suite, coverage=(i == 0))
        output = output or result.output
        cov = cov or result.coverage
        order = order or result.order
        seen |= result.passed()
        if i > 0 or runs == 1:  # the recorder's run is slower than an episode's would be
            slow |= {t for t, s in result.durations.items() if s > slow_test_s}
        seconds = max(seconds, result.seconds)
        cpu_seconds = max(cpu_seconds, result.cpu_s or 0.0)
        passing = result.passed() if passing is None else passing & result.passed()
    passing = (passing or set()) - slow
    # One more run, apart from the timed ones, records what each function sets off for the runtime guard.
    events = run_tests(repo, suite=suite, guard=Guard(package_watch(repo), record=True)).record
    return Baseline(passing, cov, seen - passing - slow, seconds, slow, cpu_seconds, order, output, events)


_COLLECT_ERROR = re.compile(r"^_+ ERROR collecting (\S+) _+$", re.M)
_MISSING = re.compile(r"^E\s+(\w*Error: .+)$", re.M)


def uncollectable(output: str) -> dict[str, str]:
    """Test modules pytest could not import on the clean source (module -> the error line): a module that
    imports a package this machine does not have (numpy, pydantic) would otherwise stop the whole run."""
    found: dict[str, str] = {}
    marks = list(_COLLECT_ERROR.finditer(output))
    for m, nxt in zip(marks, [*marks[1:], None]):
        body = output[m.end() : nxt.start() if nxt else None]
        err = _MISSING.search(body)
        found[m.group(1)] = err.group(1).strip() if err else "collection error"
    return found


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
    if suite.cpu_s is not None and suite.cpu_per_test_s:
        # What a completing mutant may cost grows with the tests it can fail; a hang exceeds any such
        # bound. Scaled by the count of tests run (known before the run, the same in every build), the
        # limit stays far above the dearest completing mutant, so no build keeps a mutant another drops.
        suite = load_proof(suite, suite.cpu_s + suite.cpu_per_test_s * len(tests if tests is not None else passing))
    run = run_tests(repo, tests=tests, suite=suite, overrides={mutant.file: mutant.source})
    if run.status != "ok":
        return Verdict(False, f"test run {run.status}", seconds=run.seconds, output=run.tail)
    # a covering test missing from the report (collection broke) counts as failed
    now = run.passed() | (passing - set(tests) if tests is not None else set())
    order = base.in_order if isinstance(base, Baseline) else sorted
    f2p = order(passing - now)
    if not f2p:
        return Verdict(False, "no baseline test fails", seconds=run.seconds)
    return Verdict(True, "", f2p, order(passing & now), run.seconds, run.output)


_FAILURES = re.compile(r"^=+ FAILURES =+$", re.M)
_SUMMARY = re.compile(r"^=+ short test summary info =+$", re.M)


def problem_statement(package: str, fail_to_pass: list[str], output: str, limit: int = 1800) -> str:
    """An issue text written from the failing tests and their assertion output (never from the fix)."""
    names = fail_to_pass[:8] + ([f"... and {len(fail_to_pass) - 8} more"] if len(fail_to_pass) > 8 else [])
    body = ""
    m = _FAILURES.search(output)
    if m:
        end = _SUMMARY.search(output, m.end())
        body = output[m.end() : end.start() if end else None].strip()
    text = f"In {package}, these tests fail:\n" + "\n".join(f"  {n}" for n in names)
    if body:
        text += "\n\nTest output:\n" + body[:limit] + ("\n[...]" if len(body) > limit else "")
    return text
