"""Text the tiny planner and patch model read and choose among, and the teachers' demonstrations.

The planner's turn: the failing test, the error line, the functions it may read (traceback frames
first) and what it has read; its options are `read <function>` and, once read, `repair <function>`.
The actor's prompt is the plan's target function with the traceback's lines marked `>`; its options
are the function's candidate edits written `<line in function>: <old> -> <new>` (with `marks`, an edit
on a traceback line is written `><line>: ...`).
"""

from __future__ import annotations

import ast
import random
import sysconfig
import textwrap
from collections.abc import Callable
from pathlib import Path

from graph_planner.candidates import candidate_edits
from graph_planner.corpus.mutate import TOKEN_LEVEL, mutants
from graph_planner.pyparse import parse
from graph_planner.team.context import NodeView, TaskContext


def short(node: str) -> str:
    """`pkg/mod.py::Cls.method` -> `Cls.method` (what the model reads and names)."""
    return node.split("::", 1)[-1]


def _node_line(view: NodeView) -> str:
    lines = view.source.splitlines()
    traced = [lines[ln - view.first_line].strip() for ln in view.trace_lines if 0 <= ln - view.first_line < len(lines)]
    return " | ".join([lines[0].strip()[:80]] + [f"> {t[:80]}" for t in traced[-1:]])


def edit_level(view: NodeView) -> int:
    """2: a candidate edit sits on a traceback line; 1: the function has candidate edits; 0: none."""
    cands = view.candidates()
    return 2 if any(c.line in view.trace_lines for c in cands) else 1 if cands else 0


def _mark(view: NodeView, level: int | None) -> str:
    traced = bool(view.trace_lines)
    if level is None:
        return " (trace)" if traced else ""
    return {2: " (trace+edit)", 1: " (trace)" if traced else "", 0: " (trace, no edit)" if traced else " (no edit)"}[
        level
    ]


# env.repair.planner_labels 'mark': a function is named by what the rule agent ranks by, then its place
# among the functions of that kind.
MARK_WORDS = {
    (2, True): "trace+edit",
    (1, True): "trace",
    (1, False): "fn",
    (0, True): "trace-noedit",
    (0, False): "noedit",
}


def function_labels(ctx: TaskContext, levels: list[int] | None = None, by_mark: bool = False) -> list[str]:
    """How the planner names the offered functions: their rank ('1', '2', ...) or, with `by_mark` (needs
    `levels`), their mark and rank among functions with that mark ('trace+edit 1', 'trace 2', ...).

    Named by rank, a planner that imitated 'always the top function' gives every other option almost no
    probability and never explores. Named by mark, the option's own tokens say what kind of function it
    is, so the model's preference between kinds is a few shared tokens that RL can move for every task
    at once."""
    if not by_mark:
        return [str(i) for i in range(1, len(ctx.nodes) + 1)]
    if levels is None:
        raise ValueError("labels by mark need the functions' edit levels (env.repair.mark_editable_trace)")
    seen: dict[str, int] = {}
    out = []
    for view, level in zip(ctx.nodes, levels):
        word = MARK_WORDS[(level, bool(view.trace_lines))]
        seen[word] = seen.get(word, 0) + 1
        out.append(f"{word} {seen[word]}")
    return out


def planner_observation(
    ctx: TaskContext, read: list[str], levels: list[int] | None = None, by_mark: bool = False
) -> str:
    """The planner's observation after reading the functions in `read` (also its GiGPO anchor state).

    Functions are listed in the localisation's order (traceback frames innermost first) under the labels
    that actions name them by (function_labels), so the choice is about which, not about copying a name.
    With `levels` (edit_level per offered function, env.repair.mark_editable_trace) a function with a
    candidate edit on a traced line is marked `(trace+edit)`, one without any candidate edit `(no edit)`;
    with `by_mark` the mark is the label itself."""
    test = ctx.failing[0].split("::")[-1] if ctx.failing else "?"
    labels = function_labels(ctx, levels, by_mark)
    marks = levels or [None] * len(ctx.nodes)
    offered = " ; ".join(
        f"{lab} {short(v.node)}{'' if by_mark else _mark(v, m)}" for lab, v, m in zip(labels, ctx.nodes, marks)
    )
    seen = "".join(f"\nread {lab}: {_node_line(v)}" for lab, v in zip(labels, ctx.nodes) if v.node in read)
    return f"fail: {test}\nerr: {ctx.error[:120]}\nfunctions: {offered}{seen}\nact:"


def planner_options(
    ctx: TaskContext, read: list[str], reads_left: int, levels: list[int] | None = None, by_mark: bool = False
) -> list[tuple[str, str, str]]:
    """(text, action, node) the planner may choose now: read an unread function, or target a read one."""
    labels = function_labels(ctx, levels, by_mark)
    out = []
    if reads_left > 0:
        out += [(f" read {lab}", "read", v.node) for lab, v in zip(labels, ctx.nodes) if v.node not in read]
    out += [(f" repair {lab}", "repair", v.node) for lab, v in zip(labels, ctx.nodes) if v.node in read]
    return out


def actor_prompt(ctx: TaskContext, view: NodeView) -> str:
    """The patch model's input: the plan's target function, traceback lines marked, and the error."""
    traced = set(view.trace_lines)
    body = "".join(
        (">" if view.first_line + i in traced else " ") + line
        for i, line in enumerate(textwrap.dedent(view.source).splitlines(True))
    )
    return f"fix {short(view.node)}\nerr: {ctx.error[:120]}\n{body}edit:"


def edit_text(view: NodeView, cand, marks: bool = False) -> str:
    """A candidate edit as the actor writes it: line within the function, then the change.

    With `marks` (env.repair.actor_marks) an edit on a traceback line starts with `>`, as that line does
    in the prompt: whether an edit sits where the test failed is then one option token shared by every
    task, instead of a line number the model must match against the prompt's marked lines."""
    mark = ">" if marks and cand.line in view.trace_lines else ""
    return f" {mark}{cand.line - view.first_line + 1}: {cand.description}"


def actor_options(view: NodeView, marks: bool = False) -> tuple[list[str], list]:
    """The candidate edits of the target function and their texts."""
    cands = view.candidates()
    return [edit_text(view, c, marks) for c in cands], cands


def teacher_index(teacher: str, levels: list[int] | None) -> int:
    """Which offered function the teacher targets (see teacher_trajectory)."""
    if teacher == "traced_edit" and levels:
        return next((i for i, lv in enumerate(levels) if lv == 2), next((i for i, lv in enumerate(levels) if lv), 0))
    return 0


def teacher_trajectory(
    ctx: TaskContext, teacher: str = "top", levels: list[int] | None = None, by_mark: bool = False
) -> list[tuple[str, str]]:
    """An imperfect teacher's episode: read one function, then target it.

    'top': the top-ranked function. 'traced_edit': the rule agent's localisation, the first function
    with a candidate edit on a traceback line, else the first with any candidate edit, else the
    top-ranked one; needs `levels`."""
    k = teacher_index(teacher, levels)
    node, label = ctx.nodes[k].node, function_labels(ctx, levels, by_mark)[k]
    return [
        (planner_observation(ctx, [], levels, by_mark), f" read {label}"),
        (planner_observation(ctx, [node], levels, by_mark), f" repair {label}"),
    ]


def true_edit(ctx: TaskContext, buggy: str, fixed: str, marks: bool = False) -> tuple[str, str] | None:
    """(prompt, target) for the actor: the bug's function and the candidate that turns the buggy file
    text into the fixed one (None when the localisation missed the function or no candidate does)."""
    view = next((v for v in ctx.nodes if v.node == ctx.target), None)
    if view is None:
        return None
    for c in view.candidates():
        if buggy.replace(c.edit["old"], c.edit["new"], 1) == fixed:
            return actor_prompt(ctx, view), edit_text(view, c, marks)
    return None


def _functions(text: str) -> dict[str, tuple[int, int]]:
    """qualname -> (first line, last line) of every function in a module."""
    out: dict[str, tuple[int, int]] = {}

    def walk(node, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out[prefix + child.name] = (child.lineno, child.end_lineno)
                walk(child, prefix + child.name + ".")
            elif isinstance(child, ast.ClassDef):
                walk(child, prefix + child.name + ".")

    try:
        walk(parse(text), "")
    except (SyntaxError, ValueError):
        pass
    return out


def unvalidated_demos(
    files: list[tuple[str, str]],
    max_chars: int,
    keep: Callable[[str, str], bool],
    rng: random.Random,
    limit: int,
    mark_prob: float = 0.0,
    marks: bool = False,
) -> list[tuple[str, str]]:
    """(prompt, target) from token-level mutants of the functions in `files` (path, text) that `keep(path,
    qualname)` admits, never run against any test: warm-start data only. Functions are visited in a
    seeded random order, each mutated on its own (a one-function module), until `limit` pairs exist.
    No test ran, so there is no traceback: the mutated line is marked with probability `mark_prob` (how
    often a validated training bug's line is on its traceback), so prompts look like real ones."""
    funcs = []
    for path, text in files:
        lines = text.splitlines(True)
        funcs += [
            (path, q, textwrap.dedent("".join(lines[a - 1 : b])))
            for q, (a, b) in _functions(text).items()
            if keep(path, q) and len("".join(lines[a - 1 : b])) <= max_chars
        ]
    rng.shuffle(funcs)
    out: list[tuple[str, str]] = []
    for path, qual, original in funcs:
        if len(out) >= limit:
            break
        name = qual.rsplit(".", 1)[-1]
        for m in mutants(path, original, functions={name}, kinds=TOKEN_LEVEL):
            fix = next((c for c in candidate_edits(path, 1, m.source) if c.edit["new"] == original), None)
            if fix is not None:
                view = NodeView(f"{path}::{qual}", path, 1, m.source, [m.line] if rng.random() < mark_prob else [])
                out.append(
                    (actor_prompt(TaskContext("", "sft", view.node, [], "", [view]), view), edit_text(view, fix, marks))
                )
    return out[:limit]


def package_files(corpus: Path, packages: set[str]) -> list[tuple[str, str]]:
    """(path relative to the package root, text) of the non-test Python files of unpacked training sdists."""
    out = []
    for pkg in sorted(packages):
        root = corpus / "src" / pkg
        for f in sorted(root.rglob("*.py")):
            rel = f.relative_to(root).as_posix()
            if "test" in rel.lower() or "/docs/" in f"/{rel}" or f.name in ("setup.py", "conftest.py"):
                continue
            out.append((rel, f.read_text(errors="replace")))
    return out


def stdlib_files(count: int) -> list[tuple[str, str]]:
    """The first `count` pure-Python standard-library modules (alphabetical: the same on every machine)."""
    root = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(p for p in root.glob("*.py") if not p.name.startswith(("_", "test")))
    return [(p.name, p.read_text(errors="replace")) for p in files[:count]]
