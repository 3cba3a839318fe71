"""The trees a release-history build runs tests on: the older release's source under the newer release's
tests (every task's base commit), and the newer release itself (which tests the release fixes).

Tests are every file pytest's discovery counts as a test (`test_*.py`, `*_test.py`, anything under a
`tests` / `test` folder) and every `conftest.py`. The newer release's test tooling (its conftest files)
is used unless it cannot even start on the older code; then the older release's conftest files are. A
test module of the newer release that cannot be imported on the older code (it imports a name only the
newer release has) is replaced by the older release's version of that file, or left out when the older
release has none: its tests need other changes of the release.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

from graph_planner.corpus.validate import IMPORT_TIME, Baseline, run_tests
from graph_planner.graph.build import SKIP_DIRS, is_test_file

_IGNORE = shutil.ignore_patterns(".git", "__pycache__", "*.pyc", ".pytest_cache")


def test_paths(root: Path) -> set[str]:
    """Every test file of a release (any extension: data files under tests/ too) and every conftest.py."""
    out = set()
    for p in root.rglob("*"):
        rel = p.relative_to(root)
        skip = SKIP_DIRS & set(rel.parts) or any(x.endswith(".egg-info") for x in rel.parts)
        if not p.is_file() or skip or p.suffix in (".pyc", ".pyo"):  # an sdist may ship compiled files
            continue
        if is_test_file(rel.as_posix()) or rel.name == "conftest.py":
            out.add(rel.as_posix())
    return out


def _conftest(rel: str) -> bool:
    return Path(rel).name == "conftest.py"


@dataclass
class TestTree:
    """Which test files of the base tree came from where."""

    tooling: str = "new"
    """Whose conftest files the base tree holds: "new" (the newer release's) or "old"."""
    from_new: list[str] = field(default_factory=list)
    """Test files the newer release added or changed, as the base tree holds them."""
    deleted: list[str] = field(default_factory=list)
    """Test files of the older release the newer one no longer has (left out)."""
    restored: dict[str, str] = field(default_factory=dict)
    """Newer test modules that cannot be imported on the older code -> the import error; the older
    release's version stands in (or none, when it had none)."""


def compose(old: Path, new: Path, dest: Path, tooling: str = "new") -> TestTree:
    """Write the base tree at `dest`: the older release with the newer release's tests (and conftest files
    of `tooling`)."""
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(old, dest, ignore=_IGNORE, symlinks=True)
    old_t, new_t = test_paths(old), test_paths(new)
    tree = TestTree(tooling)
    for rel in sorted(old_t - new_t):
        if tooling == "old" and _conftest(rel):
            continue
        (dest / rel).unlink()
        tree.deleted.append(rel)
    for rel in sorted(new_t):
        if tooling == "old" and _conftest(rel):
            continue
        target = dest / rel
        if target.is_file() and target.read_bytes() == (new / rel).read_bytes():
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(new / rel, target)
        tree.from_new.append(rel)
    return tree


def restore(old: Path, dest: Path, tree: TestTree, modules: dict[str, str]) -> list[str]:
    """Put the older release's version of each newer test module that cannot be imported (or remove it
    when the older release had none); returns the modules that were not the newer release's (to ignore)."""
    left = []
    for rel, error in sorted(modules.items()):
        if rel not in tree.from_new or rel in tree.restored:
            left.append(rel)  # the older code's own module fails too (a missing third-party package)
            continue
        tree.restored[rel] = error
        tree.from_new.remove(rel)
        if (old / rel).is_file():
            shutil.copyfile(old / rel, dest / rel)
        else:
            (dest / rel).unlink()
    return left


def release_tree(new: Path, old: Path, dest: Path, tooling: str) -> Path:
    """The newer release as released (with the older conftest files when `tooling` is "old")."""
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(new, dest, ignore=_IGNORE, symlinks=True)
    if tooling == "old":
        for rel in test_paths(new):
            if _conftest(rel):
                (dest / rel).unlink()
        for rel in test_paths(old):
            if _conftest(rel):
                (dest / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(old / rel, dest / rel)
    return dest


@dataclass
class SuiteOutcomes:
    """The whole suite's outcomes over repeated runs: the reliable passes (with coverage and order) and the
    tests that failed every time."""

    base: Baseline
    failing: set[str]
    status: str = "ok"
    hung: str = ""
    """The test a run was stopped in (set up, never finished: a loop the newer release fixed), or ""."""


def outcomes(tree: Path, suite, runs: int = 2, slow_test_s: float = 5.0) -> SuiteOutcomes:
    """Run the whole suite `runs` times (the first with the per-test call recorder): tests that pass every
    time and take under `slow_test_s` pass; tests that fail every time fail; the rest are flaky."""
    results = []
    for i in range(runs):
        results.append(run_tests(tree, suite=suite, coverage=(i == 0)))
        if results[-1].status == "timeout":
            break  # a hang: running it again costs the whole limit and says nothing new
    passing = set.intersection(*(r.passed() for r in results))
    failing = set.intersection(*({t for t, o in r.outcomes.items() if o == "failed"} for r in results))
    seen = set().union(*(r.outcomes for r in results))
    later = results[1:] or results  # the recorder's run is slower than an episode's
    slow = {t for r in later for t, s in r.durations.items() if s > slow_test_s}
    first = results[0]
    base = Baseline(
        passing - slow,
        first.coverage,
        seen - passing - failing - slow,
        max(r.seconds for r in results),
        slow,
        max(r.cpu_s or 0.0 for r in results),
        first.order,
        first.output,
    )
    status = next((r.status for r in results if r.status != "ok"), "ok")
    stopped = next((r for r in results if r.status == "timeout" and r.order), None)
    # the channel reports a test's setup when it ends: the last test reported, failed without a result,
    # is the one the run hung in
    hung = stopped.order[-1] if stopped and stopped.outcomes.get(stopped.order[-1]) == "failed" else ""
    return SuiteOutcomes(base, failing - slow, status, hung)


def callers(base: Baseline, tests: set[str], file: str, function: str) -> set[str]:
    """Those of `tests` that call `function` of `file` in the recorded run (all when it runs at import)."""
    key = (file, function)
    if key in base.coverage.get(IMPORT_TIME, []):
        return set(tests)
    return {t for t in tests if key in base.coverage.get(t, ())}
