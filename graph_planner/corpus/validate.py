"""Running a repository's own tests in the sandbox, and keeping a mutant only when its tests say so.

A test run happens in a private copy of the repository (or in place, in an episode's working copy)
with `python -m pytest` in planact's sandbox (no network, a view holding only the interpreter, pytest,
the package's dependencies and the copy; a CPU and a wall-clock limit). Per-test outcomes come over a
channel only the host reads (`plugin/planact_verdict.py`), never from a file the code under test can
rewrite. A run of named tests also carries two canary tests the host writes with values only it knows
(one must fail, one must pass); when a test is reported passed, the canaries, pytest's exit status and
its failure count must all agree, or the run is void ("tampered", every test failed).
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
import secrets
import shutil
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path

import sandbox
from graph_planner.corpus.mutate import Mutant
from sandbox.view import SITE, pytest_view

_IGNORE = shutil.ignore_patterns(".git", "__pycache__", "*.pyc", ".pytest_cache")
_PLUGIN_DIR = str(Path(__file__).parent / "plugin")
COVERAGE = ".planact-coverage.json"
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
    cpu_per_test_s: float = 0.0
    """With `cpu_s`, CPU seconds a mutant's run gets on top of it per test it runs: a failing test's
    traceback costs CPU (~15 ms each, ~30 s for a mutant that fails 2,000 tests), and that cost must stay
    far below the limit for the verdict not to follow CPU time's run-to-run noise (see validate_mutant)."""


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
    order: list[str] = field(default_factory=list)
    """Test ids in the order the run executed them."""
    tampered: str = ""
    """Why the run's own report was not believed ("" when it was): its outcomes are then all failures."""

    def passed(self) -> set[str]:
        """Ids of the tests that passed."""
        return {t for t, o in self.outcomes.items() if o == "passed"}

    @property
    def tail(self) -> str:
        """The last 2000 characters of the run's output."""
        return self.output[-2000:]


CHANNEL_BYTES = 32 << 20  # outcome lines of the largest suites (~100 bytes per test phase)


def read_channel(text: str) -> tuple[dict[str, str], dict[str, float], list[str], dict | None, str, int]:
    """(outcomes, seconds, order, end line, why the report is malformed, failed phases) from the verdict
    plugin's lines. A test passed when its call phase passed and no phase failed; skipped when a phase was
    skipped. pytest counts a failure per failed phase (a test may fail its call and its teardown), and
    the cross-check compares like with like."""
    phases: dict[str, dict[str, str]] = {}
    seconds: dict[str, float] = {}
    end, problem, sub_failures = None, "", 0
    for line in text.splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            problem = problem or "an unreadable report line"
            continue
        if not isinstance(row, dict):
            problem = problem or "an unreadable report line"
        elif end is not None:
            problem = problem or "report lines after the end of the session"
        elif "end" in row:
            end = row
        elif "id" in row and row.get("sub"):
            # a subTest: several per test under its id; a failed one fails the test (and counts, as pytest does)
            seen = phases.setdefault(str(row["id"]), {})
            if row.get("outcome") == "failed":
                seen["sub"] = "failed"
                sub_failures += 1
        elif "id" in row:
            seen = phases.setdefault(str(row["id"]), {})
            if row.get("when") in seen:
                problem = problem or f"{row['id']} reported twice"
            seen[str(row.get("when"))] = str(row.get("outcome"))
            seconds[str(row["id"])] = seconds.get(str(row["id"]), 0.0) + float(row.get("s") or 0.0)
    failed_phases = sub_failures + sum(
        sum(o == "failed" for w, o in seen.items() if w != "sub") for seen in phases.values()
    )
    outcomes = {}
    for test, seen in phases.items():
        if "failed" in seen.values():
            outcomes[test] = "failed"
        elif "skipped" in seen.values():
            outcomes[test] = "skipped"
        else:
            outcomes[test] = "passed" if seen.get("call") == "passed" else "failed"
    return outcomes, seconds, list(phases), end, problem, failed_phases


def _canaries(folder: Path) -> tuple[str, str, str]:
    """Write two tests only the host can predict (one must fail, one must pass) into `folder`, outside the
    working copy and bound read-only; (path, fail id suffix, pass id suffix)."""
    tag = secrets.token_hex(8)
    a, b, c = (secrets.token_hex(12) for _ in range(3))
    path = folder / f"test_planact_{tag}.py"
    path.write_text(
        f"def test_fails_{tag}():\n    assert {a!r} == {b!r}\n\n\ndef test_passes_{tag}():\n    assert {c!r} == {c!r}\n"
    )
    return str(path), f"::test_fails_{tag}", f"::test_passes_{tag}"


def tampering(
    outcomes: dict[str, str],
    end: dict | None,
    rc: int | None,
    problem: str,
    canary_fail: str,
    canary_pass: str,
    failed_phases: int,
) -> str:
    """Why a run's report of a passed test cannot be believed ("" when everything agrees)."""
    if problem:
        return problem
    if outcomes.get(canary_fail) != "failed":
        return "the host's must-fail test was reported " + outcomes.get(canary_fail, "missing")
    if outcomes.get(canary_pass) != "passed":
        return "the host's must-pass test was reported " + outcomes.get(canary_pass, "missing")
    if end is None:
        return "the session's end was never reported"
    if end.get("end") != rc or rc != 1:
        return f"pytest's exit status disagrees (reported {end.get('end')}, process {rc}, expected 1)"
    if end.get("failed") != failed_phases:
        return "pytest's failure count disagrees with the reported outcomes"
    return ""


def run_in_place(
    workdir: str | Path, tests: list[str] | None = None, suite: Suite = Suite(), coverage: bool = False
) -> TestRun:
    """Run pytest (all tests or `tests`, in that order) in the sandbox with `workdir` as the only writable
    place; named tests run with the host's canaries and are judged as the module docstring says."""
    workdir = Path(workdir).resolve()
    (workdir / COVERAGE).unlink(missing_ok=True)
    # --rootdir: test ids stay relative to the copy whatever else is collected (the canaries live outside)
    argv = [
        sandbox.python(),
        "-s",
        "-m",
        "pytest",
        "-q",
        "-rf",
        "--tb=short",
        "-p",
        "no:cacheprovider",
        f"--rootdir={workdir}",
        "-p",
        "planact_verdict",
        *suite.pytest_args,
    ]
    pythonpath = [str(workdir / suite.source_root), SITE, *suite.pythonpath, _PLUGIN_DIR]
    if coverage:
        argv += ["-p", "planact_coverage"]
    argv += list(tests or [])
    folder = Path(tempfile.mkdtemp(prefix="planact-canary-")) if tests else None
    canary = None
    if folder is not None:
        folder.chmod(0o755)
        canary = _canaries(folder)
        argv.append(canary[0])  # last: a forger active at any point of the run is still active when it runs
    limits = sandbox.Limits(
        timeout_s=suite.timeout_s,
        cpu_s=suite.cpu_s,
        memory_mb=suite.memory_mb,
        processes=64,
        open_files=256,
        output_bytes=32 * 1024,
        file_mb=64,
    )
    # Only the plugins named here: the entry-point plugins installed beside planact (xdist, anyio,
    # hypothesis, timeout, ...) cost ~0.8 s of every ~1.1 s run's startup and no corpus suite uses them.
    env = {"PYTHONPATH": ":".join(pythonpath), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    shown = [*suite.pythonpath, _PLUGIN_DIR, *([str(folder)] if folder else [])]
    view = pytest_view(tuple(p for p in shown if Path(p).exists()))
    try:
        done = sandbox.run(
            argv, workdir=workdir, limits=limits, env=env, view=view, channel=True, channel_bytes=CHANNEL_BYTES
        )
    finally:
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)
    outcomes, durations, order, end, problem, failed_phases = read_channel(done.channel)
    tampered = ""
    if canary is not None:
        ids = {suffix: next((t for t in outcomes if t.endswith(suffix)), suffix) for suffix in canary[1:]}
        # Only a run that ended on its own has a report to judge: one the host stopped (CPU or wall limit,
        # memory) is that failure, whatever it had reported so far.
        ended_itself = done.status in ("ok", "error")
        if ended_itself and any(o == "passed" for t, o in outcomes.items() if t not in ids.values()):
            tampered = tampering(outcomes, end, done.returncode, problem, ids[canary[1]], ids[canary[2]], failed_phases)
        outcomes = {t: o for t, o in outcomes.items() if t not in ids.values()}
        order = [t for t in order if t not in ids.values()]
    cov = {}
    if coverage and (workdir / COVERAGE).is_file():
        cov = {k: [tuple(x) for x in v] for k, v in json.loads((workdir / COVERAGE).read_text()).items()}
    # A session that ended normally is a verdict even with no outcome (a module that no longer imports
    # stops pytest at collection): its named tests are missing, so they failed.
    finished = bool(outcomes) or end is not None
    status = done.status if done.status in ("timeout", "memory") or not finished else "ok"
    if tampered:
        outcomes, status = {t: "failed" for t in outcomes}, "tampered"
    return TestRun(
        outcomes,
        status,
        done.seconds,
        done.stdout + done.stderr,
        done.returncode,
        cov,
        durations,
        done.cpu_s,
        order,
        tampered,
    )


def run_tests(
    repo: str | Path,
    tests: list[str] | None = None,
    suite: Suite = Suite(),
    overrides: dict[str, str] | None = None,
    coverage: bool = False,
) -> TestRun:
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
    order: list[str] = field(default_factory=list)
    """Test ids in the order the clean suite ran them."""
    output: str = ""
    """The tail of the first clean run's output (why nothing passed, when nothing did)."""

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
    return Baseline(passing, cov, seen - passing - slow, seconds, slow, cpu_seconds, order, output)


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
