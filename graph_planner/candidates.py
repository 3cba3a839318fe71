"""Candidate repairs of one function: every token-level edit the mutation operators can undo.

The operators of graph_planner.corpus.mutate are their own inverses for comparisons, and/or, +-1
constants and bounds, True/False and swapped arguments; binary operators get every other member of
their family (a `%` mutated to `//` is fixed by `//` -> `%`, which the mutation table alone does not
hold). Each candidate is an edit script entry {file, old, new} replacing the whole function, so it
applies to the base commit no matter what else changed.

Of the structural kinds only a negated condition is enumerable (`structural=True`: every `if` / `while`
condition negated, `not c` back to `c`). A removed statement or `if` block has no candidate here: what
was removed is not in the code any more, so repairing it needs a model that writes the statement.
"""

from __future__ import annotations

import ast
import textwrap
from dataclasses import dataclass

from graph_planner.corpus.mutate import TOKEN_LEVEL, _functions, _op_text, _Text, mutants

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


def _condition_flips(t: _Text, tree: ast.AST) -> list[tuple[str, int, str, str]]:
    # The inverse of negate_if: `not (c)` -> `c` (the operand's own text, without the parentheses the
    # operator added) and any other condition `c` -> `not (c)`.
    out = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.If, ast.While)):
            cond = t.segment(node.test)
            if isinstance(node.test, ast.UnaryOp) and isinstance(node.test.op, ast.Not):
                new = t.segment(node.test.operand)
            else:
                new = f"not {cond}" if isinstance(node.test, (ast.Name, ast.Attribute, ast.Call)) else f"not ({cond})"
            out.append(("negate_if", node.lineno, f"condition {cond} -> {new}", t.replace(node.test, new)))
    return out


def candidate_edits(file: str, first_line: int, source: str, structural: bool = False) -> list[Candidate]:
    """Candidate edits of the function whose text (as in the file) starts at `first_line` (token-level
    edits first; with `structural`, then negated conditions)."""
    indent = source[: len(source) - len(source.lstrip(" \t"))]
    body = textwrap.dedent(source)
    try:
        tree = ast.parse(body)
    except SyntaxError:
        return []
    seen, out = {body}, []
    sites = [(m.kind, m.line, m.description, m.source) for m in mutants(file, body, kinds=TOKEN_LEVEL)]
    sites += _binop_alternatives(_Text(body), tree) + _negative_constants(_Text(body), tree)
    if structural:
        sites += _condition_flips(_Text(body), tree)
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


def gold_reachable(file: str, function: str, base_text: str, fixed_text: str, structural: bool = True) -> bool:
    """Whether a candidate edit of `function` (its qualified name) in the buggy `base_text` gives the
    gold-fixed file, compared as Python (parentheses and spacing aside)."""
    try:
        tree, want = ast.parse(base_text), ast.dump(ast.parse(fixed_text))
    except SyntaxError:
        return False
    fn = next((node for name, node in _functions(tree) if name == function), None)
    if fn is None:
        return False
    first = fn.lineno  # as `read` shows a function: from its def line
    lines = base_text.splitlines(True)
    source = "".join(lines[first - 1 : fn.end_lineno])
    for c in candidate_edits(file, first, source, structural):
        try:
            if ast.dump(ast.parse(base_text.replace(c.edit["old"], c.edit["new"], 1))) == want:
                return True
        except SyntaxError:
            continue
    return False


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
