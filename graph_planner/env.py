"""PlannerEnv: code repair as an episode of Explore / Memory / Repair / Submit steps (no Prefect).

reset(task) puts a sandboxed working copy at the task's base commit and returns the first observation
(problem statement, failing tests, repository summary). step(action) returns (observation, reward, done,
info). Rules that keep the reward honest:
  * every test run starts from a clean checkout of the base commit plus the current patch: nothing an
    earlier run wrote (edited tests, planted files) survives into the next;
  * a patch may only change existing non-test Python files, and by default it is screened (no new
    imports, no process / import-system / introspection names: what forging a verdict needs);
  * a Repair replaces the previous one (patches are always against the base commit);
  * reward is 1 only when Submit's run of FAIL_TO_PASS + PASS_TO_PASS passes every one of them;
  * malformed or invalid actions, patches that do not apply, budgets spent: observations, never raised.
  * a run whose own report is void (graph_planner.corpus.validate: canaries, exit status, counts) scores
    0, is counted in `EpisodeStats.tampering` and is never cached.
Test results are cached by (task, patch hash, tests); one telemetry JSONL line is written per step.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections import OrderedDict
from dataclasses import asdict, dataclass, field
from pathlib import Path

from graph_planner.actions import ActionError, Explore, Memory, Repair, Submit, parse_action
from graph_planner.corpus.fetch import git
from graph_planner.corpus.mutate import unified_diff
from graph_planner.corpus.validate import load_proof
from graph_planner.graph import Budget, GraphSearch, RepoGraph, WorkingMemory
from graph_planner.patching import PatchError, apply_diff, apply_edits, screen
from graph_planner.runtime import LocalRuntime
from graph_planner.tasks import RepairTask
from planact.env_config import EpisodeConfig

_EPISODE = EpisodeConfig()  # the defaults, defined once

GRAPHS_KEPT = 4  # code graphs a PlannerEnv keeps (per base commit)
VERDICT_RULES = 2  # 2: outcomes over the host's channel, canaries and cross-checks, the allow-list patch check


@dataclass
class EnvLimits:
    """Budgets of one episode: planact.env_config.EpisodeConfig's fields (defaults and meaning defined there
    once) plus the working-memory budget."""

    steps: int = _EPISODE.steps
    test_runs: int = _EPISODE.test_runs
    episode_s: float = _EPISODE.episode_s
    memory: Budget = field(default_factory=Budget)
    test_timeout_s: float = _EPISODE.test_timeout_s
    read_chars: int = _EPISODE.read_chars
    screen_patches: bool = _EPISODE.screen_patches

    @classmethod
    def from_episode(cls, episode: EpisodeConfig, **extra) -> EnvLimits:
        """The limits an episode config sets (plus `memory=` when given)."""
        return cls(**episode.model_dump(), **extra)


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


@dataclass
class EpisodeStats:
    """What one episode did."""

    instance_id: str = ""
    steps: int = 0
    test_runs: int = 0
    cache_hits: int = 0
    malformed: int = 0
    patch_errors: int = 0
    refused: int = 0
    tampering: int = 0
    """Test runs whose own report was voided (canaries, exit status or counts disagreed): each scored 0."""
    resolved: bool = False
    seconds: float = 0.0
    done_reason: str = ""


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


def gold_submit(runtime, task: RepairTask, timeout_s: float = EnvLimits.test_timeout_s) -> str:
    """Why the task's own gold patch fails the path an agent's patch takes ("" when it resolves the task):
    applied to the base commit, through the patch check, then Submit's run of FAIL_TO_PASS + PASS_TO_PASS
    in the task's order, on a clean checkout in the sandbox."""
    files = set(git(task.repo_dir, "ls-tree", "-r", "--name-only", task.base_commit).splitlines())

    def base(path: str) -> str:
        return git(task.repo_dir, "show", f"{task.base_commit}:{path}", strip=False)

    try:
        texts = apply_diff(task.gold_patch, base, {f for f in files if f.endswith(".py")})
    except PatchError as e:
        return f"gold patch does not apply: {e}"
    refused = {p: r for p, t in texts.items() if (r := screen(base(p), t))}
    if refused:
        return f"gold patch refused by the patch check: {refused}"
    result = run_patch(runtime, ResultCache(), task, texts, task.submit_tests(), "submit", timeout_s)
    if passed(result):
        return ""
    what = (
        result.get("tampered") or f"{result['n_failed']} of its tests fail"
        if result["status"] in ("ok", "tampered")
        else result["status"]
    )
    return f"gold patch fails Submit ({what})"


class PlannerEnv:
    """The code-repair environment over one runtime slot."""

    def __init__(
        self,
        runtime=None,
        limits: EnvLimits | None = None,
        telemetry: str | Path | None = None,
        cache: ResultCache | None = None,
    ):
        self.runtime = runtime or LocalRuntime()
        self.limits = limits or EnvLimits()
        self.telemetry = Path(telemetry) if telemetry else None
        self.cache = cache or ResultCache()
        # Graphs and base texts of the most recent commits only: every corpus task is its own commit, and a
        # slot that judges hundreds of tasks kept gigabytes of graphs when this was unbounded.
        self._graphs: OrderedDict[str, RepoGraph] = OrderedDict()
        self._base_text: OrderedDict[tuple[str, str], str] = OrderedDict()
        self.task: RepairTask | None = None
        self.episode = 0

    # --- episode ---

    def reset(self, task: RepairTask) -> dict:
        """Start an episode on `task`: clean working copy, fresh memory and budgets; the first observation."""
        self.task = task
        work = self.runtime.reset(task)
        if task.base_commit not in self._graphs:
            self._graphs[task.base_commit] = RepoGraph(work)
        self._graphs.move_to_end(task.base_commit)
        while len(self._graphs) > GRAPHS_KEPT:
            self._graphs.popitem(last=False)
        self.graph = self._graphs[task.base_commit]
        self.search = GraphSearch(self.graph)
        self.memory = WorkingMemory(self.graph, self.limits.memory)
        self.patch: dict[str, str] = {}  # file -> patched text (against the base commit)
        self.plan = {"plan": "", "target": ""}
        self.stats = EpisodeStats(task.instance_id)
        self.episode += 1
        self._t0 = time.monotonic()
        self.done = False
        files = sorted(n for n, d in self.graph.graph.nodes(data=True) if d["kind"] == "file")
        return {
            "problem_statement": task.problem_statement,
            "failing_tests": task.fail_to_pass,
            "repository": {**self.graph.summary(), "files": files[:40]},
            "budget": {"steps": self.limits.steps, "test_runs": self.limits.test_runs},
        }

    def step(self, action) -> tuple[dict, float, bool, dict]:
        """Apply one action (an Action, a dict, or model text) and return (observation, reward, done, info)."""
        if self.task is None or self.done:
            raise RuntimeError("call reset(task) before step() (the episode is over)")
        self.stats.steps += 1
        reward, obs = 0.0, {}
        try:
            act = parse_action(action)
        except ActionError as e:
            self.stats.malformed += 1
            act, obs = None, {"error": str(e)}
        if act is not None:
            obs = self._dispatch(act)
        if isinstance(act, Submit):
            self.done, self.stats.done_reason = True, "submitted"
            reward = float(self.stats.resolved)
        elif self.stats.steps >= self.limits.steps:
            self.done, self.stats.done_reason = True, "step budget spent"
        elif time.monotonic() - self._t0 > self.limits.episode_s:
            self.done, self.stats.done_reason = True, "episode time limit"
        if self.done and not obs.get("done_reason"):
            obs["done_reason"] = self.stats.done_reason
        self.stats.seconds = time.monotonic() - self._t0
        self._log(act, action, obs, reward)
        return obs, reward, self.done, {"stats": asdict(self.stats)}

    def _dispatch(self, act) -> dict:
        if isinstance(act, Explore):
            return self._explore(act)
        if isinstance(act, Memory):
            results = self.memory.apply_ops([o.model_dump() for o in act.ops])
            return {
                "memory": [asdict(r) for r in results],
                "used": self.memory.used(),
                "nodes": list(self.memory.nodes),
                "memory_text": self.memory.linearize(),
            }
        if isinstance(act, Repair):
            return self._repair(act)
        return self._submit()

    # --- actions ---

    def _node_info(self, nid: str, score: float) -> dict:
        n = self.graph.node(nid)
        return {"node": nid, "kind": n["kind"], "line": n["lineno"], "score": round(score, 3)}

    def _explore(self, act: Explore) -> dict:
        if act.op == "find":
            found: dict[str, float] = {}
            for anchor in act.anchors:
                hits = (
                    self.search.by_traceback(anchor)
                    + self.search.by_identifier(anchor)[:5]
                    + self.search.by_text(anchor, k=5)
                )
                for nid, s in hits:
                    found[nid] = max(found.get(nid, 0.0), s)
            best = sorted(found.items(), key=lambda x: (-x[1], x[0]))[:10]
            return {"op": "find", "results": [self._node_info(n, s) for n, s in best]}
        missing = [n for n in act.nodes if n not in self.graph.graph]
        known = [n for n in act.nodes if n in self.graph.graph]
        if act.op == "read":
            out = {}
            for nid in known:
                text = "\n".join(f"{i:5d} | {line}" for i, line in self.graph.source(nid))
                out[nid] = text[: self.limits.read_chars] + (
                    "\n[... truncated]" if len(text) > self.limits.read_chars else ""
                )
            return {"op": "read", "source": out, "unknown_nodes": missing}
        hits = self.search.expand(known, act.hop, limit=15)
        return {"op": "expand", "results": [self._node_info(n, s) for n, s in hits], "unknown_nodes": missing}

    def _read_base(self, path: str) -> str:
        """A file's text at the base commit (from git: the working copy may hold anything by now)."""
        key = (self.task.base_commit, path)
        if key not in self._base_text:
            self._base_text[key] = git(self.task.repo_dir, "show", f"{self.task.base_commit}:{path}", strip=False)
            while len(self._base_text) > 64 * GRAPHS_KEPT:
                self._base_text.popitem(last=False)
        return self._base_text[key]

    def _repair(self, act: Repair) -> dict:
        self.plan = {"plan": act.plan, "target": act.target}
        if not act.patch and not act.edits:
            return {"plan_recorded": True, "applied": False}
        files = {n for n, d in self.graph.graph.nodes(data=True) if d["kind"] == "file"}
        try:
            texts = (
                apply_diff(act.patch, self._read_base, files)
                if act.patch
                else apply_edits([e.model_dump() for e in act.edits], self._read_base, files)
            )
        except PatchError as e:
            self.stats.patch_errors += 1
            return {"applied": False, "error": str(e)}
        if self.limits.screen_patches:
            reasons = {p: r for p, t in texts.items() if (r := screen(self._read_base(p), t))}
            if reasons:
                self.stats.refused += 1
                return {"applied": False, "error": f"patch refused: {reasons}"}
        self.patch = texts
        obs = {"applied": True, "diff": self.diff()[:3000]}
        if not act.apply:
            return obs
        if self.stats.test_runs >= self.limits.test_runs:
            obs["tests"] = {"status": "test budget spent"}
            return obs
        obs["tests"] = self._run(self.task.fail_to_pass, "fail_to_pass")
        return obs

    def _submit(self) -> dict:
        result = self._run(self.task.submit_tests(), "submit")
        self.stats.resolved = passed(result)
        return {"resolved": self.stats.resolved, "tests": result}

    def diff(self) -> str:
        """The current patch as a unified diff against the base commit."""
        return "".join(unified_diff(p, self._read_base(p), t) for p, t in sorted(self.patch.items()))

    def _run(self, tests: list[str], mode: str) -> dict:
        result = run_patch(self.runtime, self.cache, self.task, self.patch, tests, mode, self.limits.test_timeout_s)
        self.stats.tampering += int(bool(result.get("tampered")))
        if result.get("cached"):
            self.stats.cache_hits += 1
        else:
            self.stats.test_runs += 1
        return result

    # --- telemetry ---

    def _log(self, act, raw, obs: dict, reward: float) -> None:
        if self.telemetry is None:
            return
        summary = {
            k: (v if len(json.dumps(v, default=str)) < 400 else f"<{len(json.dumps(v, default=str))} chars>")
            for k, v in obs.items()
        }
        line = {
            "episode": self.episode,
            "instance_id": self.task.instance_id,
            "step": self.stats.steps,
            "action": act.model_dump() if act is not None else {"malformed": str(raw)[:300]},
            "observation": summary,
            "test": obs.get("tests"),
            "reward": reward,
            "done": self.done,
            "t": round(time.monotonic() - self._t0, 3),
        }
        self.telemetry.parent.mkdir(parents=True, exist_ok=True)
        with open(self.telemetry, "a") as fh:
            fh.write(json.dumps(line, default=str) + "\n")
