"""What the planner/actor team sees of a repair task, gathered once by real PlannerEnv steps and cached.

For every task the graph planner's tool calls that do not depend on the model run once in PlannerEnv
(find on the traceback and the failing tests' names, expand from the failing tests, the coverage
spectrum's SBFL ranking, read the ranked functions: the rule agent's localisation). Their observations are a
pure function of the task, so they are cached beside the corpus; the model's turns then choose among
them (read which function, target which) and only the patch's test runs need the sandbox again.

Splits: the corpus's held-out packages are "unseen_packages", and those first released in 2025 or later
"unseen_2025"; a fixed fraction of the training packages' functions (chosen by a hash of file::function)
is "unseen_functions"; the rest is "train".
"""

from __future__ import annotations

import hashlib
import json
import re
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path

from graph_planner.agents.rule import RuleAgent
from graph_planner.candidates import Candidate, from_read, function_menu
from graph_planner.env import EnvLimits, PlannerEnv
from graph_planner.judge import base_text
from graph_planner.runtime import LocalRuntime
from graph_planner.tasks import RepairTask, load_tasks
from planact.progress import Phase, ProgressFn

CONTEXT_VERSION = 2  # 2: the SBFL ranking (Explore coverage) first
_ERROR = re.compile(r"^E\s+(.*)$", re.M)


@dataclass
class NodeView:
    """One function the planner may read or target, as `read` returned it."""

    node: str
    file: str
    first_line: int
    source: str
    trace_lines: list[int] = field(default_factory=list)
    """Lines of this function the failing tests' traceback passes through."""
    module: str | None = None
    """The file's text at the task's base commit, set by `attach_modules` when the menu holds repository
    proposals (never written to the context cache)."""
    proposals: int = 0
    """How many repository proposals the menu offers (env.repair.proposals; 0: none)."""

    def candidates(self) -> list[Candidate]:
        """The candidate edits of this function (graph_planner.candidates): its token-level edits, then the
        inverses of structural mutations (a negated condition, a literal default changed back), then up to
        `proposals` statements or defaults of its module put back; one menu for the team and its baselines."""
        return list(menu(self.file, self.first_line, self.source, self.module, self.proposals))


@lru_cache(maxsize=256)
def menu(file: str, first_line: int, source: str, module: str | None, proposals: int) -> tuple[Candidate, ...]:
    """`candidates.function_menu`, cached: the planner's observation asks for every offered function's menu at
    every turn, and proposing from a large module takes a good part of a second. (256 menus: a task's turns hit
    it; each menu holds every candidate's whole function text, so a larger cache costs role workers memory.)"""
    return tuple(function_menu(file, first_line, source, module, proposals))


def attach_modules(tasks: dict[str, RepairTask], contexts: dict[str, TaskContext], proposals: int) -> None:
    """Give every offered function its file's base text, so its menu holds `proposals` repository proposals
    (0: none, and the texts are let go; contexts are shared within a process, so this is set on every load)."""
    for tid, ctx in contexts.items():
        texts: dict[str, str] = {}
        for view in ctx.nodes:
            if proposals > 0 and view.file not in texts:
                texts[view.file] = base_text(tasks[tid], view.file)
            view.module, view.proposals = texts.get(view.file), proposals


@dataclass
class TaskContext:
    """The model-independent part of a repair episode."""

    instance_id: str
    split: str
    target: str
    """The buggy function's node id (scoring and analysis only: never shown to a model)."""
    failing: list[str]
    error: str
    nodes: list[NodeView]

    @property
    def target_rank(self) -> int:
        """Where the bug sits in the localisation ranking (-1: not among the offered functions)."""
        return next((i for i, n in enumerate(self.nodes) if n.node == self.target), -1)


def unseen_function(package: str, file: str, function: str, frac: float) -> bool:
    """A training-package function held out of training (stable: a hash of its package, file and name)."""
    key = f"{package}:{file}::{function}"
    return int(hashlib.sha256(key.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF < frac


def split_of(task: RepairTask, frac: float) -> str:
    """train | unseen_functions | unseen_packages | unseen_2025 | real (a release-history fix)."""
    if task.meta.get("split") == "real":
        return "real"
    if task.meta.get("split") == "heldout":
        return "unseen_packages"
    if task.meta.get("split") == "unseen_2025":
        return "unseen_2025"
    held = unseen_function(task.repo, task.meta.get("file", ""), task.meta.get("function", ""), frac)
    return "unseen_functions" if held else "train"


def gather(
    task: RepairTask, split: str, max_nodes: int, env: PlannerEnv | None = None, coverage: bool = True
) -> TaskContext:
    """Run the localisation steps of one episode in PlannerEnv and keep what they showed."""
    env = env or PlannerEnv(LocalRuntime(), EnvLimits(steps=10, test_runs=0))
    try:
        obs = env.reset(task)
        agent = RuleAgent(memory_nodes=max_nodes, coverage=coverage)
        agent.begin(obs)
        # find, expand (and coverage): the rule agent's ranking is the localisation every system shares
        for _ in range(3 if coverage else 2):
            obs, *_ = env.step(agent.act(obs))
        ranked = agent.take_ranking(obs)[:max_nodes]
        obs, *_ = env.step({"type": "explore", "op": "read", "nodes": ranked}) if ranked else ({}, 0, False, {})
    finally:
        if isinstance(env.runtime, LocalRuntime):
            env.runtime.close()
    views = []
    for node, text in (obs.get("source") or {}).items():
        parsed = from_read(node, text)
        if parsed:
            file, first, src = parsed
            lines = sorted(ln for f, ln in agent.trace_lines if f == file and first <= ln < first + src.count("\n"))
            views.append(NodeView(node, file, first, src, lines))
    errors = _ERROR.findall(task.problem_statement)
    return TaskContext(
        task.instance_id,
        split,
        f"{task.meta.get('file')}::{task.meta.get('function')}",
        list(task.fail_to_pass),
        errors[-1].strip()[:200] if errors else "",
        views,
    )


_NOT_CACHED = ("module", "proposals")  # the menu's settings of one run, set after loading (attach_modules)


def _gather_one(args) -> dict:
    task, split, max_nodes, coverage = args
    d = asdict(gather(task, split, max_nodes, coverage=coverage))
    d["nodes"] = [{k: v for k, v in n.items() if k not in _NOT_CACHED} for n in d["nodes"]]
    return d


def _from_dict(d: dict) -> TaskContext:
    return TaskContext(**{**d, "nodes": [NodeView(**n) for n in d["nodes"]]})


def load_contexts(
    corpus: str | Path,
    frac: float,
    max_nodes: int,
    kinds: list[str],
    max_chars: int,
    workers: int = 2,
    coverage: bool = True,
    progress: ProgressFn | None = None,
    keep_all: bool = False,
) -> tuple[dict[str, RepairTask], dict[str, TaskContext]]:
    """Tasks of the corpus (a folder or a JSONL file) with the wanted kinds and function size, and their contexts
    (built once, cached; `coverage` adds the SBFL ranking to the localisation). `progress` hears each context
    built, k of n. `keep_all` keeps every task: a too long buggy function or no offered function is a miss."""
    corpus = Path(corpus)
    tasks = [t for t in load_tasks(corpus) if t.meta.get("mutation") in kinds]
    settings = json.dumps([CONTEXT_VERSION, frac, max_nodes, coverage], sort_keys=True)
    digest = hashlib.sha256(settings.encode()).hexdigest()[:10]
    folder, stem = (corpus, "") if corpus.is_dir() else (corpus.parent, f"{corpus.stem}-")
    cache = folder / f"team-context-{stem}{digest}.jsonl"
    have: dict[str, TaskContext] = {}
    if cache.is_file():
        for line in cache.read_text().splitlines():
            if line.strip():
                ctx = _from_dict(json.loads(line))
                have[ctx.instance_id] = ctx
    todo = [t for t in tasks if t.instance_id not in have]
    if todo:
        jobs = [(t, split_of(t, frac), max_nodes, coverage) for t in todo]
        # Tens of minutes on a fresh corpus (each context runs the task's failing tests for SBFL): reported.
        phase = Phase("localisation contexts", len(jobs), progress)
        with ProcessPoolExecutor(max_workers=workers) as pool, open(cache, "a") as fh:
            for d in pool.map(_gather_one, jobs, chunksize=4):
                fh.write(json.dumps(d) + "\n")
                have[d["instance_id"]] = _from_dict(d)
                phase.advance()
    out_tasks, out_ctx = {}, {}
    for t in tasks:
        ctx = have[t.instance_id]
        bug = next((n for n in ctx.nodes if n.node == ctx.target), None)
        if bug is not None and len(bug.source) > max_chars and not keep_all:
            continue  # the buggy function does not fit the actor's context
        # Functions too long to show are not offered (a missed localisation stays in: it is honest failure).
        ctx.nodes = [n for n in ctx.nodes if len(n.source) <= max_chars]
        if ctx.nodes or keep_all:
            out_tasks[t.instance_id], out_ctx[t.instance_id] = t, ctx
    return out_tasks, out_ctx
