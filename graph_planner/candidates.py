"""Candidate repairs of one function: every token-level edit the mutation operators can undo.

The operators of graph_planner.corpus.mutate are their own inverses for comparisons, and/or, +-1
constants and bounds, True/False and swapped arguments; binary operators get every other member of
their family (a `%` mutated to `//` is fixed by `//` -> `%`, which the mutation table alone does not
hold). Each candidate is an edit script entry {file, old, new} replacing the whole function, so it
applies to the base commit no matter what else changed.

Of the structural kinds a negated condition and a changed literal default are enumerable
(`structural=True`: every `if` / `while` condition negated, `not c` back to `c`; bool defaults flipped,
int defaults +-1). A removed statement or `if` block is not in the code any more:
given the module's text, `structural=True` also proposes statements found elsewhere in the module
(graph_planner.proposals); a model can propose more (proposals.model_proposals).
"""

from __future__ import annotations

import ast
import textwrap
from dataclasses import dataclass, replace

from graph_planner.corpus.mutate import TOKEN_LEVEL, _functions, _op_text, _Text, mutants
from graph_planner.proposals import repository_proposals
from graph_planner.pyparse import parse

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
    one_token: bool = False
    """A one-token edit: a token-level operator's inverse, or a `not` taken off a condition."""
    proposed: bool = False
    """A statement, `if` block or default put back from elsewhere in the module (graph_planner.proposals)."""


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


def _condition_flips(t: _Text, tree: ast.AST) -> list[tuple[str, int, str, str, bool]]:
    # The inverse of negate_if: `not (c)` -> `c` (the operand's own text, without the parentheses the
    # operator added) and any other condition `c` -> `not (c)`.
    out = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.If, ast.While)):
            cond = t.segment(node.test)
            taken_off = isinstance(node.test, ast.UnaryOp) and isinstance(node.test.op, ast.Not)
            if taken_off:
                new = t.segment(node.test.operand)
            else:
                new = f"not {cond}" if isinstance(node.test, (ast.Name, ast.Attribute, ast.Call)) else f"not ({cond})"
            out.append(("negate_if", node.lineno, f"condition {cond} -> {new}", t.replace(node.test, new), taken_off))
    return out


def _default_inverses(t: _Text, tree: ast.AST) -> list[tuple[str, int, str, str]]:
    # The inverse of the `default` operator on literals: a bool default flipped, an int default +-1 (a
    # default mutated to None needs its old value, which only the repository can propose).
    fn = tree.body[0] if tree.body and isinstance(tree.body[0], (ast.FunctionDef, ast.AsyncFunctionDef)) else None
    out = []
    for d in [] if fn is None else fn.args.defaults + [x for x in fn.args.kw_defaults if x is not None]:
        if isinstance(d, ast.Constant) and type(d.value) in (bool, int):
            news = [repr(not d.value)] if type(d.value) is bool else [repr(d.value + 1), repr(d.value - 1)]
            out += [("default", d.lineno, f"default {t.segment(d)} -> {new}", t.replace(d, new)) for new in news]
    return out


def candidate_edits(
    file: str, first_line: int, source: str, structural: bool = False, module: str | None = None
) -> list[Candidate]:
    """Candidate edits of the function whose text (as in the file) starts at `first_line` (token-level
    edits first; with `structural`, then negated conditions, then, given the file's text `module`,
    statements of the module inserted where a statement or an `if` may have been removed)."""
    body = textwrap.dedent(source)
    try:
        tree = parse(body)
    except SyntaxError:
        return []
    sites = [(m.kind, m.line, m.description, m.source) for m in mutants(file, body, kinds=TOKEN_LEVEL)]
    sites += _binop_alternatives(_Text(body), tree) + _negative_constants(_Text(body), tree)
    if structural:
        sites += _condition_flips(_Text(body), tree) + _default_inverses(_Text(body), tree)
        if module is not None:
            sites += repository_proposals(body, module, first_line)
    return edits_from_sites(file, first_line, source, sites)


def function_menu(
    file: str, first_line: int, source: str, module: str | None = None, proposals: int = 0
) -> list[Candidate]:
    """Every candidate an agent ranks for one function, in one list: token-level edits, then the structural
    inverses, then (given the file's text `module`) its first `proposals` repository proposals, nearest donors
    first, each marked `proposed`."""
    cands = candidate_edits(file, first_line, source, structural=True)
    if not module or proposals <= 0:
        return cands
    seen = {c.edit["new"] for c in cands}
    sites = repository_proposals(textwrap.dedent(source), module, first_line, limit=proposals)[:proposals]
    found = edits_from_sites(file, first_line, source, sites)
    return cands + [replace(c, proposed=True) for c in found if c.edit["new"] not in seen]


def edits_from_sites(file: str, first_line: int, source: str, sites: list[tuple]) -> list[Candidate]:
    """Candidates from (kind, line in the function, description, new dedented function text[, a `not` taken off]),
    duplicates and no-op edits dropped, each re-indented as the function is in the file."""
    indent = source[: len(source) - len(source.lstrip(" \t"))]
    body = textwrap.dedent(source)
    seen, out = {body}, []
    for kind, line, description, text, *taken_off in sites:
        if text in seen:
            continue
        seen.add(text)
        out.append(
            Candidate(
                kind,
                first_line + line - 1,
                description,
                {"file": file, "old": source, "new": reindent_changed(source, body, text, indent)},
                kind in TOKEN_LEVEL or any(taken_off),
            )
        )
    return out


def function_text(text: str, function: str) -> tuple[int, str] | None:
    """(def line, source) of `function` (its qualified name) in a module's text, as `read` shows it."""
    try:
        tree = parse(text)
    except SyntaxError:
        return None
    fn = next((node for name, node in _functions(tree) if name == function), None)
    if fn is None:
        return None
    return fn.lineno, "".join(text.splitlines(True)[fn.lineno - 1 : fn.end_lineno])


def _dump(text: str) -> str | None:
    try:
        return ast.dump(parse(textwrap.dedent(text)))
    except SyntaxError:
        return None


def same_function(a: str, b: str) -> bool:
    """Two function texts (any indentation) are the same Python, parentheses and spacing aside."""
    return _dump(a) is not None and _dump(a) == _dump(b)


def gold_source(file: str, function: str, base_text: str, fixed_text: str) -> str:
    """Which candidates hold the gold fix of `function` (its qualified name) in the buggy `base_text`:
    "token" (token-level edits), "inverse" (a negated condition or literal default changed back),
    "repository" (a statement, `if` block or default found elsewhere in the module) or "" (none)."""
    found, want = function_text(base_text, function), function_text(fixed_text, function)
    if found is None or want is None:
        return ""
    (first, source), target = found, _dump(want[1])
    for c in candidate_edits(file, first, source, structural=True):
        if _dump(c.edit["new"]) == target:
            return "token" if c.kind in TOKEN_LEVEL else "inverse"
    proposed = repository_proposals(textwrap.dedent(source), base_text, first)
    return "repository" if any(_dump(new) == target for *_, new in proposed) else ""


def gold_reachable(
    file: str, function: str, base_text: str, fixed_text: str, structural: bool = True, proposals: bool = True
) -> bool:
    """Whether a candidate edit of `function` (its qualified name) in the buggy `base_text` gives the
    gold-fixed function of `fixed_text` (structural: inverses of structural operators; proposals: the
    module's statements and defaults)."""
    allowed = ("token", "inverse", "repository")[: 1 + structural + (structural and proposals)]
    return gold_source(file, function, base_text, fixed_text) in allowed


def reindent_changed(source: str, body: str, text: str, indent: str, keep: frozenset[int] = frozenset()) -> str:
    """`source` with only the lines the edit changed replaced (re-indented): string literals elsewhere in
    the function keep their exact text. Changed lines numbered (from 1) in `keep` keep their text too."""
    src, old, new = source.splitlines(True), body.splitlines(True), text.splitlines(True)
    p = 0
    while p < min(len(old), len(new)) and old[p] == new[p]:
        p += 1
    q = 0
    while q < min(len(old), len(new)) - p and old[-1 - q] == new[-1 - q]:
        q += 1
    changed = [
        indent + line if line.strip() and n not in keep else line
        for n, line in enumerate(new[p : len(new) - q], start=p + 1)
    ]
    return "".join(src[:p] + changed + src[len(src) - q :])


def from_read(node: str, numbered: str) -> tuple[str, int, str] | None:
    """(file, first line, text) from a `read` observation's numbered source ("  114 | code" lines)."""
    lines = [ln for ln in numbered.splitlines() if " | " in ln and ln.split(" | ", 1)[0].strip().isdigit()]
    if not lines or numbered.rstrip().endswith("[... truncated]"):
        return None
    first = int(lines[0].split(" | ", 1)[0])
    return node.split("::")[0], first, "\n".join(ln.split(" | ", 1)[1] for ln in lines) + "\n"


def _function_at(base: str, start: int, old: str) -> bool:
    """`old`, found at character `start` of `base`, is exactly one whole function of the module (def line to end)."""
    if start and base[start - 1] != "\n":
        return False
    first = base.count("\n", 0, start) + 1
    try:
        tree = parse(base)
    except SyntaxError:
        return False
    lines = base.splitlines(True)
    return any(
        isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
        and n.lineno == first
        and "".join(lines[n.lineno - 1 : n.end_lineno]) == old
        for n in ast.walk(tree)
    )


def menu_edit(base: str, edit: dict) -> bool:
    """Whether the edit script entry {file, old, new} is one planact enumerates itself for the function `old`
    of the module text `base`: a candidate edit, an inverse, or a statement or default of the module put back."""
    old, new = str(edit.get("old", "")), str(edit.get("new", ""))
    if not old or base.count(old) != 1 or not _function_at(base, base.index(old), old):
        return False
    file, first = str(edit.get("file", "")), base.count("\n", 0, base.index(old)) + 1
    # the function's own edits first (the rule agent's menu, ~ms); then the module's proposals too (~0.1-3 s)
    return any(c.edit["new"] == new for c in candidate_edits(file, first, old, structural=True)) or any(
        c.edit["new"] == new for c in candidate_edits(file, first, old, structural=True, module=base)
    )
