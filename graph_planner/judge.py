"""Judging a patch: test runs on a clean checkout of the base commit, their cache, and the gold patch's check.

Every verdict an agent gets comes through `run_patch`: the base commit checked out afresh, the patch's
files written, the tests run in the sandbox under a CPU-time limit. Outcomes are cached by (task, patch,
tests) and the verdict rules' version; a void run (a forged report) is never cached. `gold_submit` sends
a task's own reference fix down the same path, which is how the corpus builder proves a task solvable.
"""

from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path

from graph_planner.corpus.fetch import git
from graph_planner.corpus.validate import load_proof
from graph_planner.patching import PatchError, apply_diff, screen
from graph_planner.tasks import RepairTask
from planact.env_config import EpisodeConfig

DEFAULT_TIMEOUT_S = EpisodeConfig().test_timeout_s
VERDICT_RULES = 2  # 2: outcomes over the host's channel, canaries and cross-checks, the allow-list patch check


class ResultCache:
    """Test outcomes by (task, patch hash, tests): repeated candidates in a group cost one run.

    With a `path` the outcomes also persist as JSONL lines, so every run and seed over the same corpus
    shares them (one line per write: concurrent appenders do not interleave).
    """

    def __init__(self, path: str | Path | None = None):
        self.entries: dict[str, dict] = {}
        self.hits = 0
        self.path = Path(path) if path else None
        self._read_to = 0  # bytes of the file already read
        self._reading = threading.Lock()
        self._refresh()

    def _refresh(self) -> None:
        """Read the lines other processes appended since the last read (only whole lines: a writer may be
        mid-line)."""
        if self.path is None or not self.path.is_file():
            return
        with self._reading, open(self.path, "rb") as fh:
            fh.seek(self._read_to)
            data = fh.read()
            end = data.rfind(b"\n") + 1
            self._read_to += end
        for line in data[:end].decode(errors="replace").splitlines():
            try:
                row = json.loads(line)
            except ValueError:  # a torn line of a killed writer
                continue
            self.entries[row["key"]] = row["result"]

    def put(self, key: str, result: dict) -> None:
        """Remember a run's result (and append it to the file)."""
        self.entries[key] = result
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a") as fh:
                fh.write(json.dumps({"key": key, "result": result}) + "\n")

    def get(self, key: str) -> dict | None:
        """A cached result, counting the hit; on a miss, first reads what concurrent runs over the same file
        have appended since (seeds run side by side share their test outcomes)."""
        if key not in self.entries:
            self._refresh()
        hit = self.entries.get(key)
        self.hits += hit is not None
        return hit

    @staticmethod
    def key(task_id: str, files: dict[str, str], tests: list[str]) -> str:
        """The cache key of a run (with the verdict rules' version: a result judged under older rules, e.g.
        a forged report believed before the host's channel and canaries, is never reused)."""
        blob = json.dumps([task_id, sorted(files.items()), sorted(tests), VERDICT_RULES])
        return hashlib.sha256(blob.encode()).hexdigest()


def run_patch(
    runtime, cache: ResultCache, task: RepairTask, patch: dict[str, str], tests: list[str], mode: str, timeout_s: float
) -> dict:
    """`tests` on a clean checkout of the task's base commit plus `patch` (path -> text), cached by
    (task, patch, tests): a cached outcome carries 'cached': True."""
    key = ResultCache.key(task.instance_id, patch, tests)
    cached = cache.get(key)
    # A timeout cached before runs were judged by CPU time (no "cpu_s") may only have been a loaded
    # machine: judge it again rather than keep a reward of 0 that the patch may not deserve.
    if cached is not None and not (cached.get("status") == "timeout" and "cpu_s" not in cached):
        return {**cached, "cached": True}
    work = runtime.reset(task)  # a clean checkout: nothing a previous run wrote survives
    for path, text in patch.items():
        (work / path).write_text(text)
    limit = min(task.suite.timeout_s, timeout_s)
    run = runtime.run_tests(tests, load_proof(task.suite, limit))
    wanted = set(tests)
    failed = sorted(t for t in wanted if run.outcomes.get(t) != "passed")
    result = {
        "mode": mode,
        "status": run.status,
        "rc": run.rc,
        "seconds": round(run.seconds, 2),
        "passed": len(wanted) - len(failed),
        "failed": failed[:20],
        "n_failed": len(failed),
        "tail": run.tail[-1500:],
        "cpu_s": limit,
    }
    if run.tampered:
        # a void verdict scores 0, is counted, and never enters the cache every later run and seed reads
        return {**result, "tampered": run.tampered}
    cache.put(key, result)
    return result


def passed(result: dict) -> bool:
    """Every wanted test of a run passed."""
    return result.get("status") == "ok" and not result.get("failed")


def gold_submit(runtime, task: RepairTask, timeout_s: float = DEFAULT_TIMEOUT_S) -> str:
    """Why the task's own gold patch fails the path an agent's patch takes ("" when it resolves the task):
    applied to the base commit, through the patch check, then Submit's run of FAIL_TO_PASS + PASS_TO_PASS
    in the task's order, on a clean checkout in the sandbox."""
    files = set(git(task.repo_dir, "ls-tree", "-r", "--name-only", task.base_commit).splitlines())
    try:
        texts = apply_diff(task.gold_patch, lambda p: base_text(task, p), {f for f in files if f.endswith(".py")})
    except PatchError as e:
        return f"gold patch does not apply: {e}"
    why = submit_texts(runtime, ResultCache(), task, texts, timeout_s)
    return why and f"gold patch {why}"


def base_text(task: RepairTask, path: str) -> str:
    """A file of the task's base commit (the buggy code)."""
    return git(task.repo_dir, "show", f"{task.base_commit}:{path}", strip=False)


def submit_texts(
    runtime, cache: ResultCache, task: RepairTask, texts: dict[str, str], timeout_s: float = DEFAULT_TIMEOUT_S
) -> str:
    """Why new file texts (path -> text) fail Submit ("" when they resolve the task): the patch check against
    the base commit, then FAIL_TO_PASS + PASS_TO_PASS in the task's order on a clean checkout."""
    refused = {p: r for p, t in texts.items() if (r := screen(base_text(task, p), t))}
    if refused:
        return f"refused by the patch check: {refused}"
    result = run_patch(runtime, cache, task, texts, task.submit_tests(), "submit", timeout_s)
    if passed(result):
        return ""
    what = (
        result.get("tampered") or f"{result['n_failed']} of its tests fail"
        if result["status"] in ("ok", "tampered")
        else result["status"]
    )
    return f"fails Submit ({what})"
