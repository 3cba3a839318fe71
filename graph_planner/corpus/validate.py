"""Running a repository's own tests in the sandbox, and keeping a mutant only when its tests say so.

A test run copies the repository into a private working directory, runs `python -m pytest` there in
planact's sandbox (no network, the host read-only, a wall-clock limit for the whole run) and reads
the per-test outcomes from a JUnit XML report the run writes into that directory. A mutant is kept
when at least one test that passed on the clean source fails with the bug (FAIL_TO_PASS) and every
other baseline test still passes (PASS_TO_PASS); otherwise the reason it was dropped is returned.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

from graph_planner.corpus.mutate import Mutant
from planact import sandbox

_IGNORE = shutil.ignore_patterns(".git", "__pycache__", "*.pyc", ".pytest_cache")


@dataclass
class TestRun:
    """Outcome of one test run: per test id passed / failed / skipped, and how the process ended."""

    outcomes: dict[str, str] = field(default_factory=dict)
    status: str = "ok"
    seconds: float = 0.0
    tail: str = ""

    def passed(self) -> set[str]:
        """Ids of the tests that passed."""
        return {t for t, o in self.outcomes.items() if o == "passed"}


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


def read_junit(path: Path) -> dict[str, str]:
    """Per-test outcomes from a pytest JUnit XML report."""
    out = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        children = {c.tag for c in case}
        outcome = "failed" if children & {"failure", "error"} else "skipped" if "skipped" in children else "passed"
        out[_test_id(case)] = outcome
    return out


def run_tests(repo: str | Path, tests: list[str] | None = None, timeout_s: float = 120.0,
              overrides: dict[str, str] | None = None) -> TestRun:
    """Run the repository's pytest suite (or `tests`) in the sandbox on a private copy, with files replaced
    by `overrides` (relative path -> text)."""
    work = Path(tempfile.mkdtemp(prefix="planact-tests-"))
    try:
        copy = work / "repo"
        shutil.copytree(repo, copy, ignore=_IGNORE)
        for rel, text in (overrides or {}).items():
            (copy / rel).write_text(text)
        argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "junit_family=xunit1",
                "--junitxml=.planact-junit.xml", *(tests or [])]
        limits = sandbox.Limits(timeout_s=timeout_s, memory_mb=2048, processes=64, open_files=256,
                                output_bytes=16 * 1024)
        done = sandbox.run(argv, workdir=copy, limits=limits, env={"PYTHONPATH": str(copy)})
        report = copy / ".planact-junit.xml"
        outcomes = read_junit(report) if report.is_file() else {}
        status = done.status if done.status in ("timeout", "memory") or not outcomes else "ok"
        return TestRun(outcomes, status, done.seconds, (done.stdout + done.stderr)[-2000:])
    finally:
        shutil.rmtree(work, ignore_errors=True)


def baseline(repo: str | Path, runs: int = 2, timeout_s: float = 120.0) -> set[str]:
    """Tests that pass in every one of `runs` runs on the clean source (flaky ones are dropped)."""
    passing: set[str] | None = None
    for _ in range(runs):
        result = run_tests(repo, timeout_s=timeout_s)
        passing = result.passed() if passing is None else passing & result.passed()
    return passing or set()


@dataclass
class Verdict:
    """A mutant's fate: kept with its FAIL_TO_PASS / PASS_TO_PASS, or dropped with the reason."""

    kept: bool
    reason: str = ""
    fail_to_pass: list[str] = field(default_factory=list)
    pass_to_pass: list[str] = field(default_factory=list)
    seconds: float = 0.0


def validate_mutant(repo: str | Path, mutant: Mutant, passing: set[str], timeout_s: float = 120.0) -> Verdict:
    """Run the suite with the bug in place and decide whether it makes a task."""
    run = run_tests(repo, timeout_s=timeout_s, overrides={mutant.file: mutant.source})
    if run.status != "ok":
        return Verdict(False, f"test run {run.status}", seconds=run.seconds)
    now = run.passed()
    f2p = sorted(passing - now)
    if not f2p:
        return Verdict(False, "no baseline test fails", seconds=run.seconds)
    return Verdict(True, "", f2p, sorted(passing & now), run.seconds)
