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
  * Explore(coverage) runs the repository's own tests on the unpatched base commit (never an agent's
    patch), on its own budget, so a model can neither steer the spectrum nor spend test runs on it;
  * malformed or invalid actions, patches that do not apply, budgets spent: observations, never raised.
  * a run whose own report is void (graph_planner.corpus.validate: canaries, exit status, counts) scores
    0, is counted in `EpisodeStats.tampering` and is never cached;
  * text a model wrote runs only on a task with the call jail (graph_planner.provenance): each Repair's
    origin is derived here from what it holds, never read from the action (a model writes the action): an
    edit script of one edit that planact enumerates itself for the function (candidates.menu_edit) is
    "menu", files equal to the task's gold fix are "gold", anything else (a diff, other edits) is "model",
    which on a task without the jail scores 0 unrun and is counted in `EpisodeStats.unjudged`.
Test results are cached by (task, patch hash, tests); one telemetry JSONL line is written per step.
"""

from __future__ import annotations

import json
import time
from collections import OrderedDict
from dataclasses import asdict, dataclass
from pathlib import Path

from pydantic import Field

from graph_planner import localise
from graph_planner.actions import ActionError, Explore, Memory, Repair, Submit, parse_action
from graph_planner.candidates import function_menu, menu_edit
from graph_planner.corpus.fetch import git
from graph_planner.corpus.mutate import unified_diff
from graph_planner.env_config import EpisodeConfig
from graph_planner.graph import Budget, GraphSearch, RepoGraph, WorkingMemory
from graph_planner.judge import gold_texts, passed, run_patch
from graph_planner.patching import PatchError, apply_diff, apply_edits, screen
from graph_planner.provenance import GOLD, MENU, MODEL, ORIGINS, unjudged
from graph_planner.result_cache import ResultCache
from graph_planner.runtime import LocalRuntime
from graph_planner.tasks import RepairTask

GRAPHS_KEPT = 4  # code graphs a PlannerEnv keeps (per base commit)


class EnvLimits(EpisodeConfig):
    """Budgets of one episode: graph_planner.env_config.EpisodeConfig's settings (each declared, with its default,
    there once) plus the working-memory budget."""

    memory: Budget = Field(default_factory=Budget, description="What the working memory holds at once.")

    @classmethod
    def from_episode(cls, episode: EpisodeConfig, **extra) -> EnvLimits:
        """The limits an episode config sets (plus `memory=` when given)."""
        return cls(**episode.model_dump(), **extra)


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
    unjudged: int = 0
    """Runs refused unrun: model-written text on a task without the call jail (graph_planner.provenance)."""
    coverage_runs: int = 0
    """Explore(coverage) runs started (a cached spectrum costs none); apart from test_runs."""
    coverage_s: float = 0.0
    """Wall seconds those coverage runs took."""
    resolved: bool = False
    seconds: float = 0.0
    done_reason: str = ""


class PlannerEnv:
    """The code-repair environment over one runtime slot."""

    def __init__(
        self,
        runtime=None,
        limits: EnvLimits | None = None,
        telemetry: str | Path | None = None,
        cache: ResultCache | None = None,
        origin: str | None = None,
    ):
        """`origin`: None (the only value outside tests of the static path's layers) derives each patch's origin
        from what it holds; a fixed one judges every patch as that origin, whoever wrote it."""
        if origin is not None and origin not in ORIGINS:
            raise ValueError(f"unknown patch origin {origin!r}: one of {ORIGINS}")
        self.fixed_origin = origin
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
        self.origin = MENU  # of self.patch (provenance): no change is the task's own code
        self._gold: dict[str, str] | None = None  # the gold fix's files, read once per episode (_origin)
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
        if act.op == "coverage":
            return self._coverage(act.formula)
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
        if act.op == "candidates":
            menus = {nid: self._menu(nid, act.proposals) for nid in known}
            return {"op": "candidates", "menus": menus, "unknown_nodes": missing}
        hits = self.search.expand(known, act.hop, limit=15)
        return {"op": "expand", "results": [self._node_info(n, s) for n, s in hits], "unknown_nodes": missing}

    def _coverage(self, formula: str) -> dict:
        key = localise.cache_key(self.task)
        result = self.cache.get(key)
        if result is not None:
            self.stats.cache_hits += 1
        elif self.stats.coverage_runs >= self.limits.coverage_runs:
            return {"op": "coverage", "error": "coverage budget spent"}
        else:
            result = localise.measure(self.runtime, self.task, self.graph, self.limits.test_cpu_s)
            self.stats.coverage_runs += 1
            self.stats.coverage_s += result["seconds"]
            if result["status"] == "ok":
                self.cache.put(key, result)
        if result["status"] != "ok":
            return {"op": "coverage", "error": f"coverage run: {result['status']}"}
        best = localise.ranked(result, self.search, self.task.fail_to_pass, formula)
        return {
            "op": "coverage",
            "formula": formula,
            "coverage_run": {"failed": result["failed"], "passed": result["passed"], "seconds": result["seconds"]},
            "results": [self._node_info(n, s) for n, s in best],
        }

    def _menu(self, nid: str, proposals: int) -> list[dict]:
        """The enumerated edits of a function node at the base commit ([] for any other node)."""
        n = self.graph.node(nid)
        if n["kind"] != "function":
            return []
        module = self._read_base(n["path"])
        source = "".join(module.splitlines(True)[n["lineno"] - 1 : n["end_lineno"]])
        cands = function_menu(n["path"], n["lineno"], source, module, proposals)
        return [asdict(c) for c in cands]

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
        origin = self._origin(act, texts)
        if self.limits.screen_patches and not unjudged(self.task, origin):  # an unjudged patch is never run
            bodies = not self.task.jail  # a jailed function's body cannot reach the test process: structure alone
            reasons = {p: r for p, t in texts.items() if (r := screen(self._read_base(p), t, bodies))}
            if reasons:
                self.stats.refused += 1
                return {"applied": False, "error": f"patch refused: {reasons}"}
        self.patch, self.origin = texts, origin
        obs = {"applied": True, "diff": self.diff()[:3000]}
        if not act.apply:
            return obs
        if self.stats.test_runs >= self.limits.test_runs:
            obs["tests"] = {"status": "test budget spent"}
            return obs
        obs["tests"] = self._run(self.task.fail_to_pass, "fail_to_pass")
        return obs

    def _origin(self, act: Repair, texts: dict[str, str]) -> str:
        """Where the applied patch's code came from (graph_planner.provenance), from what it holds alone."""
        if self.fixed_origin is not None:
            return self.fixed_origin
        if not act.patch and len(act.edits) == 1:
            edit = act.edits[0].model_dump()
            if menu_edit(self._read_base(str(edit.get("file", ""))), edit):
                return MENU
        if self._gold is None:
            try:
                self._gold = gold_texts(self.task)
            except (PatchError, RuntimeError):  # no gold fix to compare with (or its repository is unreadable)
                self._gold = {}
        # the reference fix is the task's own (the corpus proved it), whoever typed it in
        return GOLD if self._gold and texts == self._gold else MODEL

    def _submit(self) -> dict:
        result = self._run(self.task.submit_tests(), "submit")
        self.stats.resolved = passed(result)
        return {"resolved": self.stats.resolved, "tests": result}

    def diff(self) -> str:
        """The current patch as a unified diff against the base commit."""
        return "".join(unified_diff(p, self._read_base(p), t) for p, t in sorted(self.patch.items()))

    def _run(self, tests: list[str], mode: str) -> dict:
        result = run_patch(
            self.runtime,
            self.cache,
            self.task,
            self.patch,
            tests,
            mode,
            self.limits.test_cpu_s,
            guarded=self.limits.guard_patches,
            targeted=self.limits.target_patches,
            digest=mode == "submit" and self.limits.digest_state,
            origin=self.origin,
        )
        self.stats.tampering += int(bool(result.get("tampered")))
        if result.get("unjudged"):  # nothing ran: no test run spent
            self.stats.unjudged += 1
            return result
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
