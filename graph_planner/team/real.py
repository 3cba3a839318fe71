"""The `real` evaluation split of the repair team: fixes from packages' release history, beside the mutations.

A release-history corpus (`planact-repair corpus --history`, real.jsonl) is loaded next to the training
corpus and its contexts are built the same way as the held-out tasks' (the rule agent's localisation,
cached beside that corpus). Two differences, both so the split's denominator is every real task: a task
whose fixed function is too long to show stays in (its function is simply not offered), and so does a task
with no offered function at all (every system then has nothing to try and it counts unsolved).

What any system here can reach is measured per task (`reach`): whether the localisation offers a function
the fix changes, whether the gold fix is in its function's menu of candidate edits, and both.
"""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

from graph_planner.candidates import function_menu, function_text
from graph_planner.judge import base_text
from graph_planner.patching import PatchError, apply_diff
from graph_planner.pyparse import parse
from graph_planner.team.context import TaskContext, load_contexts
from planact.progress import ProgressFn

SPLIT = "real"
_LOADED: dict[tuple, tuple] = {}


def load_real(path: str | Path, r, progress: ProgressFn | None = None) -> tuple[dict, dict[str, TaskContext]]:
    """The real-fix tasks of a release-history corpus (folder or JSONL) and their contexts, split 'real'."""
    path = Path(path).resolve()
    if not path.exists():
        raise FileNotFoundError(
            f"env.repair.eval_real_corpus: no corpus at {path}; build it with `planact-repair corpus --history "
            "--out runs/corpus-real`"
        )
    coverage = r.localisation == "sbfl"
    # One load per process, like the training corpus's (every task of a round builds the env anew).
    key = (str(path), r.unseen_function_frac, r.planner_nodes, r.max_function_chars, r.workers, coverage)
    if key not in _LOADED:
        tasks, ctx = load_contexts(
            path,
            r.unseen_function_frac,
            r.planner_nodes,
            [SPLIT],
            r.max_function_chars,
            r.workers,
            coverage,
            progress,
            keep_all=True,
        )
        for c in ctx.values():
            c.split = SPLIT  # contexts cached before split_of knew 'real' carry a training split
        _LOADED[key] = (tasks, ctx)
    return _LOADED[key]


def fix_functions(task) -> list[str]:
    """`file::function` of every function the task's fix changes (a release fix may change several)."""
    history = task.meta.get("history") or {}
    if history.get("functions"):
        return list(history["functions"])
    # without the list (a task loaded from elsewhere): a multi-function fix names its functions `a+b`, one file
    return [f"{task.meta.get('file')}::{q}" for q in str(task.meta.get("function", "")).split("+")]


def gold_in_candidates(task, proposals: int = 0) -> bool:
    """Whether the gold fix is in its function's menu (one function, one file): a token-level edit, a structural
    inverse, or one of the first `proposals` repository proposals (env.repair.proposals)."""
    file, function = task.meta.get("file", ""), task.meta.get("function", "")
    if len(fix_functions(task)) != 1:
        return False  # one candidate edit changes one function
    try:
        base = base_text(task, file)
        (fixed,) = apply_diff(task.gold_patch, lambda p: base, {file}).values()
    except (PatchError, ValueError, RuntimeError):
        return False  # the fix touches other files too, or does not apply: no single edit holds it
    found, want = function_text(base, function), function_text(fixed, function)
    if found is None or want is None:
        return False
    # the menu NodeView.candidates offers, with the same cap on the module's proposals
    target = _code(want[1])
    cands = function_menu(file, *found, module=base, proposals=proposals)
    return target is not None and any(_code(c.edit["new"]) == target for c in cands)


def _code(function: str) -> str | None:
    """The function's code without its docstring (a release fix often edits the docstring beside the code, and
    no candidate edit touches docstrings), as an AST dump: spacing and parentheses aside."""
    try:
        tree = parse(textwrap.dedent(function))
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            if isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
                node.body = body[1:] or [ast.Pass()]
    return ast.dump(tree)


def reach(env, ids: list[str]) -> dict[str, float]:
    """Shares of `ids`: 'offered' (the localisation offers a function the fix changes), 'gold_candidate' (the gold
    fix is a candidate edit of its function) and 'reachable' (both: the most any system here can solve)."""
    cache = env.__dict__.setdefault("_reach", {})  # computed once per task: each reads the base file via git
    rows = []
    for i in ids:
        if i not in cache:
            task, ctx = env.tasks[i], env.ctx[i]
            offered = bool({v.node for v in ctx.nodes} & set(fix_functions(task)))
            cache[i] = (offered, gold_in_candidates(task, env.r.proposals))
        rows.append(cache[i])
    n = max(1, len(rows))
    return {
        "reach/offered": sum(o for o, _ in rows) / n,
        "reach/gold_candidate": sum(g for _, g in rows) / n,
        "reach/reachable": sum(o and g for o, g in rows) / n,
    }
