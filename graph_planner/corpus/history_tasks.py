"""The pieces of a release-history build: one pair's trees and runs, what a change is tried for, how a
kept change becomes a task (`graph_planner.corpus.history` puts them together)."""

from __future__ import annotations

import ast
import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from graph_planner import patch_check
from graph_planner.corpus.build import VALIDITY, submit_positions
from graph_planner.corpus.fetch import fetch_sdist, git, sha256, unpack
from graph_planner.corpus.history_diff import Change, ReleaseDiff, apply_changes, diff_releases
from graph_planner.corpus.history_spec import HISTORY_SPLIT, HistoryConfig, HistoryPair, Release
from graph_planner.corpus.history_tree import SuiteOutcomes, callers, compose, outcomes, release_tree, restore
from graph_planner.corpus.mutate import unified_diff
from graph_planner.corpus.source import source_root
from graph_planner.corpus.testrun import Suite, load_proof
from graph_planner.corpus.validate import Baseline, Verdict, problem_statement, run_tests, uncollectable
from graph_planner.pyparse import parse

# What a release-history task's validity means (beside the mutation corpus's VALIDITY): a pair built
# under an older meaning is rebuilt. 2: a gold fix's confirming run is judged against the base commit's
# name-guard record like its first run (under 1 it kept the bare guard and voided such fixes).
# 3: the name guard's record keys more getattr calls (VALIDITY 8 of the mutation corpus).
# 4: patch check rule 8 and the swapped-test check (VALIDITY 9).
HISTORY_VALIDITY = 4


def _check_version() -> str:
    """A hash of the patch check's code (comments and formatting aside): a real fix is far more often refused
    than a mutant's one-token gold patch, so a pair is rebuilt whenever the check changes."""
    files = sorted(Path(patch_check.__file__).parent.glob("patch_*.py"))
    return hashlib.sha256("".join(ast.dump(parse(p.read_text())) for p in files).encode()).hexdigest()[:12]


def settings_hash(pair: HistoryPair, cfg: HistoryConfig) -> str:
    """What decides a pair's tasks: its pins, the limits, the validity rules and the patch check."""
    limits = cfg.model_dump(include={"timeout_s", "max_suite_s", "max_group"})
    if cfg.jail:  # the jail decides which gold fixes pass; a build without it keeps its cache
        limits["jail"] = True
    blob = json.dumps([pair.model_dump(), limits, VALIDITY, HISTORY_VALIDITY, _check_version()], sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _release(name: str, rel: Release, dest: Path, cache: Path) -> str:
    """Unpack (or copy) one release into `dest`; returns its sdist's sha256 ("" for a local folder)."""
    if rel.source:
        shutil.copytree(rel.source, dest, ignore=shutil.ignore_patterns(".git", "__pycache__", "*.pyc"))
        return ""
    archive = fetch_sdist(name, rel.version, rel.sha256, cache)
    unpack(archive, dest)
    return sha256(archive)


def _suite(tree: Path, pair: HistoryPair, out: Path, cfg: HistoryConfig, ignored=(), deselected=()) -> Suite:
    """How the tree's tests run: dependencies on the path, modules left out, tests deselected."""
    deps = []
    for d in pair.deps:
        folder = (out / "deps" / d.key).resolve()
        deps.append(os.path.normpath(folder / source_root(folder)))
    root = source_root(tree) if pair.source_root == "auto" else pair.source_root
    args = (
        "-o",
        "addopts=",
        *pair.pytest_args,
        *(f"--ignore={m}" for m in sorted(ignored)),
        *(f"--deselect={t}" for t in deselected),
    )
    return Suite(root, tuple(deps), args, cfg.timeout_s)


@dataclass
class Trial:
    """One change (or group) applied to the older code: what its tests said."""

    changes: tuple[Change, ...]
    reason: str = ""
    fail_to_pass: tuple[str, ...] = ()
    broken: tuple[str, ...] = ()
    seconds: float = 0.0

    @property
    def name(self) -> str:
        """The functions, joined by '+'."""
        return "+".join(c.key for c in self.changes)


class PairBuild:
    """The state of one pair's build: trees, outcomes, and the runs that try changes."""

    def __init__(self, pair: HistoryPair, cfg: HistoryConfig, out: Path, work: Path, cache: Path, log):
        self.pair, self.cfg, self.out, self.log = pair, cfg, out, log
        self.old, self.new = work / "old", work / "new"
        self.pins = {
            "old": _release(pair.name, pair.old, self.old, cache),
            "new": _release(pair.name, pair.new, self.new, cache),
        }
        for dep in pair.deps:
            unpack(fetch_sdist(dep.name, dep.version, dep.sha256, cache), out / "deps" / dep.key)
        self.diff: ReleaseDiff = diff_releases(self.old, self.new)
        self.base_dir = out / "src" / pair.key
        self.work = work

    def baseline(self) -> tuple[Suite, SuiteOutcomes, set[str], dict]:
        """The base tree's suite on the older code: (suite, outcomes, tests the newer release passes, facts)."""
        tree = compose(self.old, self.new, self.base_dir)
        ignored: list[str] = []
        suite = _suite(self.base_dir, self.pair, self.out, self.cfg)
        res = outcomes(self.base_dir, suite)
        if not res.base.order and "conftest" in res.base.output:
            # the newer conftest files cannot start on the older code: the older release's tooling runs
            tree = compose(self.old, self.new, self.base_dir, tooling="old")
            res = outcomes(self.base_dir, suite)
        hung: list[str] = []
        for _ in range(8):
            broken = uncollectable(res.base.output)
            if broken:
                ignored += restore(self.old, self.base_dir, tree, broken)
            elif res.hung and res.hung not in hung:
                # a newer test that never ends on the older code would stop every run of the suite: it is
                # left out of the tasks (deselected in their pytest arguments too) and reported
                hung.append(res.hung)
            else:
                break
            suite = _suite(self.base_dir, self.pair, self.out, self.cfg, ignored, hung)
            res = outcomes(self.base_dir, suite)
        newer = release_tree(self.new, self.old, self.work / "new-run", tree.tooling)
        new_suite = _suite(newer, self.pair, self.out, self.cfg)
        run = run_tests(newer, suite=new_suite, coverage=True)
        missing = uncollectable(run.output)
        if missing:
            run = run_tests(newer, suite=_suite(newer, self.pair, self.out, self.cfg, missing), coverage=True)
        self.new_coverage = run.coverage
        facts = {
            "tooling": tree.tooling,
            "test_files_from_new": tree.from_new,
            "test_files_deleted": tree.deleted,
            "test_modules_not_importable": {k: v[:300] for k, v in tree.restored.items()},
            "modules_ignored": sorted(ignored),
            "tests_hanging_old": hung,
            "new_release_run": {"status": run.status, "passed": len(run.passed()), "tests": len(run.outcomes)},
        }
        return suite, res, run.passed(), facts

    def try_changes(self, changes: tuple[Change, ...], fixable: set[str], base: Baseline, check: Suite) -> Trial:
        """Apply `changes` to the older code and run the fixable tests they reach and the passing tests that
        call them."""
        reach, keep = set(), set()
        for c in changes:
            reach |= callers(base, fixable, c.file, c.qualname)
            covering = base.covering(c.file, c.qualname)
            keep |= base.passing if covering is None else set(covering)
        if not reach:
            return Trial(changes, "no test the release fixes calls it on the older code")
        tests = base.in_order(reach | keep)
        suite = load_proof(check, check.cpu_s + check.cpu_per_test_s * len(tests))
        run = run_tests(self.base_dir, tests=tests, suite=suite, overrides=self.texts(changes))
        if run.status != "ok":
            return Trial(changes, f"test run {run.status}", seconds=run.seconds)
        now = run.passed()
        f2p = tuple(t for t in tests if t in reach and t in now)
        broken = tuple(t for t in tests if t in keep and t not in now)
        if broken:
            return Trial(changes, "breaks tests that pass on the older code", f2p, broken, run.seconds)
        if not f2p:
            return Trial(changes, "no failing test passes with this change alone", seconds=run.seconds)
        return Trial(changes, "", f2p, (), run.seconds)

    def texts(self, changes: tuple[Change, ...]) -> dict[str, str]:
        """The older files the changes touch, with the changes applied."""
        files = sorted({c.file for c in changes})
        return {f: apply_changes((self.base_dir / f).read_text(), [c for c in changes if c.file == f]) for f in files}


def classify(change: Change) -> str:
    """Why a change is not tried ("" when it is a candidate fix)."""
    if change.kind == "added":
        return f"adds API: {change.qualname} is not in the older release"
    if change.kind == "removed":
        return f"removes API: {change.qualname} is not in the newer release"
    if change.kind == "signature":
        return f"changes API: {change.detail}"
    if change.kind == "docstring":
        return "docstring only"
    if change.needs:
        return f"needs names only the newer release defines: {', '.join(change.needs)}"
    return ""


def groups(tried: list[Trial], unresolved: set[str], base: Baseline, new_coverage: dict, moved: dict, most: int):
    """Sets of changed functions that a fixed test no single change fixes calls (on the older code or the
    newer one), 2 to `most` functions each, in a fixed order."""
    back = {n: o for o, n in moved.items()}
    found = set()
    for test in sorted(unresolved):
        calls = set(base.coverage.get(test, ())) | {(back.get(f, f), q) for f, q in new_coverage.get(test, ())}
        members = tuple(
            sorted(
                (t.changes[0] for t in tried if (t.changes[0].file, t.changes[0].qualname) in calls),
                key=lambda c: c.key,
            )
        )
        if 2 <= len(members) <= most:
            found.add(members)
    return sorted(found, key=lambda g: [c.key for c in g])


def prune(state: PairBuild, trial: Trial, fixable: set[str], base: Baseline, check: Suite) -> Trial:
    """Drop every function of a group whose removal keeps the group's FAIL_TO_PASS (and breaks nothing)."""
    current = trial
    for c in trial.changes:
        if len(current.changes) <= 2:
            break
        rest = tuple(x for x in current.changes if x != c)
        smaller = state.try_changes(rest, fixable, base, check)
        if not smaller.reason and set(smaller.fail_to_pass) >= set(current.fail_to_pass):
            current = smaller
    return current


def _difficulty(trial: Trial, output: str, patch: str) -> str:
    """easy: one function, a few changed lines, named in the traceback; hard: neither; medium: between."""
    lines = sum(1 for ln in patch.splitlines() if ln[:1] in "+-" and not ln.startswith(("+++", "---")))
    named = any(f"in {c.qualname.split('.')[-1]}" in output for c in trial.changes)
    score = int(named) + int(len(trial.changes) == 1 and lines <= 6)
    return ("hard", "medium", "easy")[score]


def task_record(
    state: PairBuild, trial: Trial, base: Baseline, suite: Suite, commit: str, notes: tuple[str, str], output: str
) -> dict:
    """A SWE-bench-format instance for one kept change (every task of a pair shares the base commit)."""
    pair = state.pair
    blob = "\0".join(f"{c.file}::{c.qualname}\0{c.new.text}" for c in trial.changes)
    instance_id = f"{pair.key}__{hashlib.sha256(blob.encode()).hexdigest()[:10]}"
    texts = state.texts(trial.changes)
    patch = "".join(unified_diff(f, (state.base_dir / f).read_text(), t) for f, t in texts.items())
    f2p = list(trial.fail_to_pass)
    p2p = base.in_order(base.passing - set(f2p))
    statement = problem_statement(pair.name, f2p, output)
    if notes[1]:
        statement = (
            f"The changelog of {pair.name} {pair.new.version} ({notes[0]}) says, among other changes:\n\n{notes[1]}\n\n"
            + statement
        )
    git(state.out / "repos" / f"{pair.key}.git", "update-ref", f"refs/tags/task/{instance_id}", commit)
    first = trial.changes[0]
    return {
        "instance_id": instance_id,
        "repo": pair.name,
        "version": pair.old.version,
        "base_commit": commit,
        "patch": patch,
        "test_patch": "",
        "FAIL_TO_PASS": f2p,
        "PASS_TO_PASS": p2p,
        "problem_statement": statement,
        "mutation": HISTORY_SPLIT,
        "mutation_description": f"the fix of {trial.name} in {pair.name} {pair.new.version}",
        "file": first.file,
        "function": "+".join(c.qualname for c in trial.changes),
        "line": first.old.first,
        "difficulty": _difficulty(trial, output, patch),
        "split": HISTORY_SPLIT,
        "history": {
            "old": pair.old.version,
            "new": pair.new.version,
            "functions": [c.key for c in trial.changes],
            "changelog": notes[0],
        },
        "planact_env": {
            "repo_dir": f"repos/{pair.key}.git",
            "source_root": suite.source_root,
            "pythonpath": [os.path.relpath(p, state.out) for p in suite.pythonpath],
            "pytest_args": list(suite.pytest_args),
            "timeout_s": suite.timeout_s,
            "fail_to_pass_at": submit_positions(base, Verdict(True, "", f2p, p2p)),
        },
    }
