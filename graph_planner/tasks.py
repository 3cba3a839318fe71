"""Loading repair tasks: planact corpus JSONL (runs locally) or SWE-bench / R2E-Gym instance files."""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from graph_planner.corpus.spec import TASK_SPLITS
from graph_planner.corpus.testrun import RECORD_VERSION, Suite

JAIL_SIDECAR = "jail.json"  # instance id -> the call jail's target (or null), beside a corpus's task files


@dataclass
class RepairTask:
    """One repair task: where its repository is, the base commit with the bug, the tests that judge it."""

    instance_id: str
    problem_statement: str
    fail_to_pass: list[str]
    pass_to_pass: list[str]
    base_commit: str
    repo: str
    repo_dir: Path | None = None
    """Bare git repository holding base_commit (planact corpora); None for SWE-bench instances."""
    suite: Suite = field(default_factory=Suite)
    gold_patch: str = ""
    """The reference fix: used by re-validation, never shown to an agent."""
    meta: dict = field(default_factory=dict)
    """mutation, file, function, difficulty, version, split (planact fields), or the instance's extras."""

    submit_order: list[int] = field(default_factory=list)
    """Positions of the FAIL_TO_PASS tests in Submit's run (planact corpora); empty: FAIL_TO_PASS first."""
    clean_events: dict[str, list[str]] = field(default_factory=dict)
    """"path::function" -> audit events it set off in the clean package's suite (the runtime guard's
    baseline); empty for corpora built before it was recorded (the buggy base commit's run stands in)."""
    record_version: int = 0
    """The guards' record version the clean events were taken under (corpus.testrun.RECORD_VERSION)."""
    jail: dict = field(default_factory=dict)
    """The call jail's target when the task qualifies for it ({"module", "path", "qualname"}: its gold fix
    passes and its bug fails with that function run only in the jail, graph_planner/jail_qualify.py); empty:
    the task's verdicts take the static check and the runtime guard."""

    def submit_tests(self) -> list[str]:
        """The tests Submit runs, in the order the task was validated in (FAIL_TO_PASS + PASS_TO_PASS)."""
        n = len(self.fail_to_pass) + len(self.pass_to_pass)
        at = set(self.submit_order)
        if len(at) != len(self.fail_to_pass) or not all(0 <= i < n for i in at):
            return self.fail_to_pass + self.pass_to_pass
        f2p, p2p = iter(self.fail_to_pass), iter(self.pass_to_pass)
        return [next(f2p) if i in at else next(p2p) for i in range(n)]

    @property
    def local(self) -> bool:
        """Runs on the local backend (a planact corpus task) rather than needing a Docker image."""
        return self.repo_dir is not None


def _tests(value) -> list[str]:
    # SWE-bench files store the test lists as JSON strings
    return json.loads(value) if isinstance(value, str) else list(value or [])


def from_record(row: dict, root: Path) -> RepairTask:
    """A RepairTask from one JSONL row; `root` is the corpus folder its relative paths start from."""
    env = row.get("planact_env")
    meta = {
        k: row[k]
        # history: a release-history fix's versions and the `file::function` of every function it changes
        for k in (
            "mutation",
            "mutation_description",
            "file",
            "function",
            "line",
            "difficulty",
            "version",
            "split",
            "history",
        )
        if k in row
    }
    suite, repo_dir = Suite(), None
    if env:
        repo_dir = (root / env["repo_dir"]).resolve()
        suite = Suite(
            env.get("source_root", "."),
            tuple(str((root / p).resolve()) for p in env.get("pythonpath", [])),
            tuple(env.get("pytest_args", ("-o", "addopts="))),
            float(env.get("timeout_s", 120.0)),
        )
    return RepairTask(
        row["instance_id"],
        row.get("problem_statement", ""),
        _tests(row.get("FAIL_TO_PASS")),
        _tests(row.get("PASS_TO_PASS")),
        row.get("base_commit", ""),
        row.get("repo", ""),
        repo_dir,
        suite,
        row.get("patch", ""),
        meta,
        list((env or {}).get("fail_to_pass_at", [])),
        dict((env or {}).get("clean_events", {})),
        int((env or {}).get("record_version", 0)),
        dict((env or {}).get("jail") or {}),
    )


def load_tasks(source: str | Path, split: str | None = None, limit: int | None = None) -> list[RepairTask]:
    """Tasks from a JSONL file, or from a corpus folder (`split`.jsonl there, or every split's file)."""
    source = Path(source)
    if source.is_dir():
        # without a split: every split file the folder has (a corpus built before the unseen_2025 split has
        # no file for it; a release-history corpus has only real.jsonl), and train's name when it has none
        names = (
            [f"{split}.jsonl"] if split else [f"{s}.jsonl" for s in TASK_SPLITS if (source / f"{s}.jsonl").is_file()]
        )
        files, root = [source / n for n in names or ["train.jsonl"]], source
    else:
        files, root = [source], source.parent
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        raise FileNotFoundError(f"no task file {missing}: build a corpus first (planact-repair corpus)")
    rows = [json.loads(line) for f in files for line in f.read_text().splitlines() if line.strip()]
    tasks = [from_record(r, root) for r in rows]
    sidecar = root / JAIL_SIDECAR  # the qualification of a corpus built before it was stored with each task
    if sidecar.is_file():
        qualified = json.loads(sidecar.read_text())
        for t in tasks:
            t.jail = t.jail or dict(qualified.get(t.instance_id) or {})
    stale = sum(1 for t in tasks if t.clean_events and t.record_version != RECORD_VERSION)
    if stale:
        # the judge takes such a record again from the buggy base commit, which does not reach everything the
        # fixed code does: six's gold fixes still stopped on names only the fixed code's tests use
        warnings.warn(
            f"{stale} tasks in {source} carry a clean record from another guard version (record_version "
            f"{RECORD_VERSION} now): gold and agent fixes may be voided; rebuild the corpus (planact-repair corpus)",
            stacklevel=2,
        )
    if split and not source.is_dir():
        tasks = [t for t in tasks if t.meta.get("split") == split]
    return tasks[:limit] if limit else tasks
