"""Repair tasks from a package's release history: the older release's code, one change of the newer
release as the fix, the newer release's tests as the judge (split `real`).

Per pair of releases (`history_spec.HistoryPair`): both sdists are fetched (sha256-pinned, once, then
cached), the source changes between them are listed function by function (`history_diff`), and the
base tree is the older release under the newer release's tests (`history_tree`). Its suite runs twice on
the older code (tests that fail both times may be fixable) and once on the newer release (tests that
pass there are the ones the release fixes). Each body change is applied alone to the older code and the
tests that call it run: the fixed tests that now pass are its FAIL_TO_PASS; every test that passed
before must still pass (PASS_TO_PASS), or the change is dropped with the reason. For fixed tests no
single function fixes, the changed functions such a test calls are tried together (up to `max_group`)
and pruned to those needed. Changes that only add, remove or re-declare API are reported and skipped. A
kept change's gold patch must pass the patch check and Submit on a clean checkout of the base commit,
as a mutation task's must. The bare repository holds one commit, the base tree: nothing of the newer
release but its tests.

Output, beside a mutation corpus's: repos/<key>.git, src/<key>/ (the base tree), tasks/<key>.jsonl,
reports/<key>.json, real.jsonl (every release-history task of the folder) and history_report.json;
<key> = name-old-new.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

from graph_planner.corpus.build import MUTANT_CPU_FLOOR_S, MUTANT_CPU_PER_TEST_S, _Slots, read_jsonl, write_jsonl
from graph_planner.corpus.changelog import release_notes
from graph_planner.corpus.fetch import DEFAULT_CACHE, FetchError, fetch_sdist, init_repo
from graph_planner.corpus.history_diff import Change
from graph_planner.corpus.history_spec import HISTORY_SPLIT, HistoryConfig, HistoryPair
from graph_planner.corpus.history_tasks import PairBuild, Trial, classify, groups, prune, settings_hash, task_record
from graph_planner.corpus.testrun import Suite, load_proof
from graph_planner.corpus.validate import Baseline, run_tests


def _entry(trial: Trial, status: str, reason: str = "") -> dict:
    c = trial.changes[0]
    row = {"function": trial.name, "kind": c.kind if len(trial.changes) == 1 else "group", "status": status}
    if reason:
        row["reason"] = reason
    if trial.fail_to_pass:
        row["fail_to_pass"] = len(trial.fail_to_pass)
    if trial.broken:
        row["broken"] = list(trial.broken[:5])
    if trial.seconds:
        row["seconds"] = round(trial.seconds, 2)
    return row


def _refusal(res, fixable: set[str], cfg: HistoryConfig) -> str:
    base = res.base
    if res.status != "ok" and not base.passing:
        return f"the suite on the older release ended with {res.status}"
    if not base.passing:
        tail = "\n".join(base.output.strip().splitlines()[-3:])
        return f"no test passes on the older release; the run ended: {tail}"
    if base.seconds > cfg.max_suite_s:
        return f"the suite takes {base.seconds:.0f} s > max_suite_s {cfg.max_suite_s}"
    if not fixable:
        return "no test of the newer release fails on the older code and passes on the newer release"
    return ""


def build_pair(
    pair: HistoryPair, cfg: HistoryConfig, out: Path, cache: Path = DEFAULT_CACHE, log: Callable[[str], None] = print
) -> tuple[list[dict], dict]:
    """Tasks and the build report of one release pair (reused when already built with the same settings)."""
    out = Path(out).resolve()
    report_path, tasks_path = out / "reports" / f"{pair.key}.json", out / "tasks" / f"{pair.key}.jsonl"
    key = settings_hash(pair, cfg)
    if report_path.is_file() and tasks_path.is_file() and json.loads(report_path.read_text()).get("settings") == key:
        log(f"{pair.key}: cached")
        return read_jsonl(tasks_path), json.loads(report_path.read_text())
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="planact-history-") as tmp:
        state = PairBuild(pair, cfg, out, Path(tmp), cache, log)
        notes = release_notes(state.new, pair.new.version)
        suite, res, passed_new, facts = state.baseline()
        base = res.base
        fixable = res.failing & passed_new
        diff = state.diff
        report = {
            "pair": pair.key,
            "split": HISTORY_SPLIT,
            "settings": key,
            "sha256": state.pins,
            "changelog": notes[0],
            **facts,
            "tests_passing_old": len(base.passing),
            "tests_failing_old": len(res.failing),
            "tests_flaky_old": len(base.flaky),
            "tests_fixed_by_release": len(fixable),
            "suite_s": round(base.seconds, 2),
            "suite_cpu_s": round(base.cpu_seconds, 2),
            "module_changes": diff.module_changes,
            "files_added": diff.added_files,
            "files_removed": diff.removed_files,
            "files_moved": diff.moved_files,
        }
        entries, candidates = [], []
        for c in diff.changes:
            why = classify(c)
            if why:
                entries.append(_entry(Trial((c,)), "skipped" if c.api_only else "dropped", why))
            else:
                candidates.append(c)
        refusal = _refusal(res, fixable, cfg)
        tasks: list[dict] = []
        gold_failures: list[dict] = []
        if refusal:
            entries += [_entry(Trial((c,)), "dropped", refusal) for c in candidates]
            report["unusable"] = refusal
            log(f"{pair.key}: UNUSABLE: {refusal}")
        else:
            check = load_proof(suite, min(cfg.timeout_s, max(MUTANT_CPU_FLOOR_S, 4 * base.cpu_seconds)))
            check = replace(check, cpu_per_test_s=MUTANT_CPU_PER_TEST_S)
            tasks, gold_failures = _try_all(state, candidates, fixable, base, check, suite, notes, entries, cfg)
    dropped = Counter(e["reason"].split(":")[0] for e in entries if e["status"] == "dropped")
    report.update(
        changes=entries,
        tried=sum(1 for e in entries if "seconds" in e),
        kept=len(tasks),
        skipped_api=sum(1 for e in entries if e["status"] == "skipped"),
        dropped=dict(sorted(dropped.items())),
        gold_failures=gold_failures,
        build_s=round(time.monotonic() - t0, 1),
    )
    report["s_per_task"] = round(report["build_s"] / len(tasks), 1) if tasks else None
    log(f"{pair.key}: {len(entries)} changes, tried {report['tried']}, kept {len(tasks)}, in {report['build_s']} s")
    write_jsonl(tasks_path, tasks)
    report_path.parent.mkdir(parents=True, exist_ok=True)
    report_path.write_text(json.dumps(report, indent=1))
    return tasks, report


def _try_all(
    state: PairBuild,
    candidates: list[Change],
    fixable: set[str],
    base: Baseline,
    check: Suite,
    suite: Suite,
    notes: tuple[str, str],
    entries: list[dict],
    cfg: HistoryConfig,
) -> tuple[list[dict], list[dict]]:
    """Try every candidate alone, then groups for what no single change fixes; turn the kept ones into tasks
    whose gold patch passes Submit. Appends one report entry per trial to `entries`."""
    workers = cfg.workers or os.cpu_count() or 1
    with _Slots() as slots, ThreadPoolExecutor(workers) as pool:
        trials = list(pool.map(lambda c: state.try_changes((c,), fixable, base, check), candidates))
        solved = {t for tr in trials if not tr.reason for t in tr.fail_to_pass}
        unresolved = fixable - solved
        if cfg.max_group >= 2 and unresolved:
            # a function the older code never reaches may be half of a fix (the newer caller reaches it)
            seen = set()
            for group in groups(trials, unresolved, base, state.new_coverage, state.diff.moved_files, cfg.max_group):
                trial = state.try_changes(group, fixable, base, check)
                if trial.reason or not set(trial.fail_to_pass) & unresolved:
                    trial = replace(trial, reason=trial.reason or "fixes no test a single change leaves failing")
                else:
                    trial = prune(state, trial, fixable, base, check)
                if trial.name not in seen:
                    seen.add(trial.name)
                    trials.append(trial)
        kept = [t for t in trials if not t.reason]
        for t in trials:
            if t.reason:
                entries.append(_entry(t, "dropped", t.reason))
        if not kept:
            return [], []
        repo = state.out / "repos" / f"{state.pair.key}.git"
        commit = init_repo(state.base_dir, repo)
        # the failing tests' own output on the base commit is the problem statement's evidence
        outputs = list(pool.map(lambda t: run_tests(state.base_dir, list(t.fail_to_pass), check).output, kept))
        rows = [task_record(state, t, base, suite, commit, notes, o) for t, o in zip(kept, outputs)]
        verdicts = list(pool.map(lambda r: slots.gold_verdict(r, state.out, cfg.jail), rows))
    tasks, failures = [], []
    for trial, row, why in zip(kept, rows, verdicts):
        if why:
            entries.append(_entry(trial, "dropped", why.split(" (")[0].split(":")[0]))
            failures.append({"instance_id": row["instance_id"], "reason": why[:500]})
        else:
            entries.append({**_entry(trial, "kept"), "instance_id": row["instance_id"]})
            tasks.append(row)
    return tasks, failures


def prefetch(cfg: HistoryConfig, cache: Path = DEFAULT_CACHE) -> None:
    """Every sdist the build needs, into `cache`, before any work: one error names every one that failed."""
    failed = []
    for pair in cfg.pairs:
        refs = [(pair.name, r.version, r.sha256) for r in (pair.old, pair.new) if not r.source]
        refs += [(d.name, d.version, d.sha256) for d in pair.deps]
        for name, version, digest in refs:
            try:
                fetch_sdist(name, version, digest, cache)
            except FetchError as e:
                failed.append(f"{name}=={version}: " + str(e).strip().replace("\n", "\n    "))
    if failed:
        raise FetchError("cannot fetch (fix or drop these pairs; nothing was built):\n  " + "\n  ".join(failed))


def write_real(out: Path) -> list[dict]:
    """real.jsonl: every release-history task of the corpus folder, pair by pair in name order."""
    rows = [
        r for p in sorted((out / "tasks").glob("*.jsonl")) for r in read_jsonl(p) if r.get("split") == HISTORY_SPLIT
    ]
    write_jsonl(out / f"{HISTORY_SPLIT}.jsonl", rows)
    return rows


def build_history(
    cfg: HistoryConfig, out: str | Path, cache: Path = DEFAULT_CACHE, log: Callable[[str], None] = print
) -> dict:
    """Build every pair of `cfg` into `out`; writes real.jsonl and history_report.json."""
    prefetch(cfg, cache)
    out = Path(out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    reports = [build_pair(pair, cfg, out, cache, log)[1] for pair in cfg.pairs]
    rows = write_real(out)
    summary = {
        "pairs": reports,
        "tasks": sum(r["kept"] for r in reports),
        HISTORY_SPLIT: len(rows),
        "unusable": {r["pair"]: r["unusable"] for r in reports if r.get("unusable")},
    }
    (out / "history_report.json").write_text(json.dumps(summary, indent=1))
    return summary
