"""Candidate repairs of one function: every token-level edit the mutation operators can undo.

The operators of graph_planner.corpus.mutate are their own inverses for comparisons, and/or, +-1
constants and bounds, True/False and swapped arguments; binary operators get every other member of
their family (a `%` mutated to `//` is fixed by `//` -> `%`, which the mutation table alone does not
hold). Each candidate is an edit script entry {file, old, new} replacing the whole function, so it
applies to the base commit no matter what else changed. Structural bugs (a removed statement or `if`)
have no candidate here: repairing them needs a model that writes code.
"""

from __future__ import annotations

import ast
import textwrap
from dataclasses import dataclass

from graph_planner.corpus.mutate import TOKEN_LEVEL, _op_text, _Text, mutants

_FAMILIES = [
    (ast.Add, ast.Sub),
    (ast.Mult, ast.Div, ast.FloorDiv, ast.Mod),
    (ast.BitAnd, ast.BitOr, ast.BitXor),
    (ast.LShift, ast.RShift),
]


@dataclass(frozen=True)
class Candidate:
    """One candidate edit of a function."""

    kind: str
    line: int
    """Line in the file the edit changes."""
    description: str
    edit: dict
    """{file, old, new} for Repair(edits=[...])."""


def _binop_alternatives(t: _Text, tree: ast.AST) -> list[tuple[str, int, str, str]]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp):
            family = next((f for f in _FAMILIES if type(node.op) in f), ())
            for op in family:
                if op is not type(node.op):
                    text = f"{t.segment(node.left)} {_op_text(op())} {t.segment(node.right)}"
                    out.append(("binop", node.lineno, f"{t.segment(node)} -> {text}", t.replace(node, text)))
    return out


def _negative_constants(t: _Text, tree: ast.AST) -> list[tuple[str, int, str, str]]:
    # `0 -> -1` leaves the literal `-1` (a unary minus on 1), which the +-1 constant operator cannot undo
    out = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.UnaryOp)
            and isinstance(node.op, ast.USub)
            and isinstance(node.operand, ast.Constant)
            and type(node.operand.value) is int
        ):
            for d in (1, -1):
                new = repr(-node.operand.value + d)
                out.append(("constant", node.lineno, f"{t.segment(node)} -> {new}", t.replace(node, new)))
    return out


def candidate_edits(file: str, first_line: int, source: str) -> list[Candidate]:
    """Candidate edits of the function whose text (as in the file) starts at `first_line`."""
    indent = source[: len(source) - len(source.lstrip(" \t"))]
    body = textwrap.dedent(source)
    try:
        tree = ast.parse(body)
    except SyntaxError:
        return []
    seen, out = {body}, []
    sites = [(m.kind, m.line, m.description, m.source) for m in mutants(file, body, kinds=TOKEN_LEVEL)]
    sites += _binop_alternatives(_Text(body), tree) + _negative_constants(_Text(body), tree)
    for kind, line, description, text in sites:
        if text in seen:
            continue
        seen.add(text)
        out.append(
            Candidate(
                kind,
                first_line + line - 1,
                description,
                {"file": file, "old": source, "new": _reindent(source, body, text, indent)},
            )
        )
    return out


def _reindent(source: str, body: str, text: str, indent: str) -> str:
    """`source` with only the lines the edit changed replaced (re-indented): string literals elsewhere in
    the function keep their exact text."""
    src, old, new = source.splitlines(True), body.splitlines(True), text.splitlines(True)
    p = 0
    while p < min(len(old), len(new)) and old[p] == new[p]:
        p += 1
    q = 0
    while q < min(len(old), len(new)) - p and old[-1 - q] == new[-1 - q]:
        q += 1
    changed = [indent + line if line.strip() else line for line in new[p : len(new) - q]]
    return "".join(src[:p] + changed + src[len(src) - q :])


def from_read(node: str, numbered: str) -> tuple[str, int, str] | None:
    """(file, first line, text) from a `read` observation's numbered source ("  114 | code" lines)."""
    lines = [ln for ln in numbered.splitlines() if " | " in ln and ln.split(" | ", 1)[0].strip().isdigit()]
    if not lines or numbered.rstrip().endswith("[... truncated]"):
        return None
    first = int(lines[0].split(" | ", 1)[0])
    return node.split("::")[0], first, "\n".join(ln.split(" | ", 1)[1] for ln in lines) + "\n"
