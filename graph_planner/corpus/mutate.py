"""Procedural bugs: AST mutation operators of the kinds SWE-smith uses, applied as small text edits.

Each mutant changes one place inside one function and keeps the rest of the file byte for byte (the
edit replaces only the source span of the mutated node), so the fix is a one-hunk unified diff and a
tiny model sees exactly what changed. Operators:

  comparison   flip a comparison (< <=, > >=, == !=, in / not in, is / is not)
  boolop       swap and / or
  constant     integer constant +-1 (off by one), True <-> False
  binop        change an operator within its family (+ -, * / //, % //, & | ^, << >>)
  bound        slice or range() bound +-1
  negate_if    negate an `if` / `while` condition
  remove_if    remove an `if` (its body stays only if the `if` had no `else`: the guard is dropped)
  remove_stmt  remove an assignment, expression statement or early `return` (not the last statement)
  swap_args    swap two positional arguments of a call
  default      change a parameter's default value (None <-> a value, int +-1, bool flip)

comparison, boolop, constant, binop, bound and swap_args are token-level (what a tiny model can repair
from what it sees); see TOKEN_LEVEL. KINDS lists all ten.
"""

from __future__ import annotations

import ast
import difflib
from dataclasses import dataclass

from graph_planner.pyparse import parse

TOKEN_LEVEL = ("comparison", "boolop", "constant", "binop", "bound", "swap_args")
KINDS = TOKEN_LEVEL + ("negate_if", "remove_if", "remove_stmt", "default")
_CMP = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
}
_BIN = {
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.FloorDiv,
    ast.Div: ast.Mult,
    ast.FloorDiv: ast.Mult,
    ast.Mod: ast.FloorDiv,
    ast.BitAnd: ast.BitOr,
    ast.BitOr: ast.BitAnd,
    ast.BitXor: ast.BitOr,
    ast.LShift: ast.RShift,
    ast.RShift: ast.LShift,
}


@dataclass(frozen=True)
class Mutant:
    """One bug: where, what kind, the mutated file text and a one-line description."""

    file: str
    function: str
    kind: str
    line: int
    description: str
    source: str

    def patch(self, original: str) -> str:
        """The fix as a unified diff (mutated -> original), paths a/<file> b/<file>."""
        return unified_diff(self.file, self.source, original)


def unified_diff(path: str, before: str, after: str) -> str:
    """A git-style unified diff of one file."""
    lines = difflib.unified_diff(
        before.splitlines(keepends=True), after.splitlines(keepends=True), fromfile=f"a/{path}", tofile=f"b/{path}", n=3
    )
    return "".join(lines)


class _Text:
    """Replace the exact source span of an AST node; everything else stays byte for byte."""

    def __init__(self, source: str):
        self.source = source
        self.starts = [0]
        for line in source.splitlines(keepends=True):
            self.starts.append(self.starts[-1] + len(line))

    def offset(self, line: int, col: int) -> int:
        # ast columns are UTF-8 byte offsets
        line_text = self.source[self.starts[line - 1] : self.starts[line]]
        return self.starts[line - 1] + len(line_text.encode()[:col].decode(errors="ignore"))

    def span(self, node: ast.AST) -> tuple[int, int]:
        return self.offset(node.lineno, node.col_offset), self.offset(node.end_lineno, node.end_col_offset)

    def replace(self, node: ast.AST, text: str) -> str:
        a, b = self.span(node)
        return self.source[:a] + text + self.source[b:]

    def segment(self, node: ast.AST) -> str:
        a, b = self.span(node)
        return self.source[a:b]

    def remove_lines(self, first: int, last: int, keep_indent_pass: bool) -> str:
        a, b = self.starts[first - 1], self.starts[last]
        indent = self.source[a:b][: len(self.source[a:b]) - len(self.source[a:b].lstrip())]
        return self.source[:a] + (f"{indent}pass\n" if keep_indent_pass else "") + self.source[b:]


def _functions(tree: ast.Module):
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node.name, node
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    yield f"{node.name}.{item.name}", item


def _new_int(v: int, delta: int) -> str:
    return repr(v + delta)


def _bound_shifts(t: _Text, what: str, bounds) -> list[tuple[str, int, str, str]]:
    """The off-by-one mutants (+1, then -1) of each literal int among `bounds` (a slice's, a range call's)."""
    return [
        ("bound", b.lineno, f"{what} {b.value} -> {b.value + d}", t.replace(b, _new_int(b.value, d)))
        for b in bounds
        if isinstance(b, ast.Constant) and type(b.value) is int
        for d in (1, -1)
    ]


def _site_mutants(t: _Text, fn: ast.AST) -> list[tuple[str, int, str, str]]:
    """(kind, line, description, new file text) for every mutation site inside `fn`'s body."""
    out = []
    # Only the body: a mutant of an annotation (`str | None` -> `str & None`), a decorator's arguments or
    # a computed default changes the signature, which no patch may touch, so its gold fix could never pass
    # the patch check (literal defaults are mutated by _default_changes, and a fix may change those).
    for node in (n for stmt in fn.body for n in ast.walk(stmt)):
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _CMP:
            new = ast.Compare(left=node.left, ops=[_CMP[type(node.ops[0])]()], comparators=node.comparators)
            text = f"{t.segment(node.left)} {_op_text(new.ops[0])} {t.segment(node.comparators[0])}"
            out.append(("comparison", node.lineno, f"{t.segment(node)} -> {text}", t.replace(node, text)))
        elif isinstance(node, ast.BoolOp) and len(node.values) == 2:
            word = "or" if isinstance(node.op, ast.And) else "and"
            text = f"{t.segment(node.values[0])} {word} {t.segment(node.values[1])}"
            out.append(("boolop", node.lineno, f"{t.segment(node)} -> {text}", t.replace(node, text)))
        elif isinstance(node, ast.BinOp) and type(node.op) in _BIN:
            text = f"{t.segment(node.left)} {_op_text(_BIN[type(node.op)]())} {t.segment(node.right)}"
            out.append(("binop", node.lineno, f"{t.segment(node)} -> {text}", t.replace(node, text)))
        elif isinstance(node, ast.Slice):
            out += _bound_shifts(t, "slice bound", (node.lower, node.upper))
        elif isinstance(node, ast.Call):
            if isinstance(node.func, ast.Name) and node.func.id == "range":
                out += _bound_shifts(t, "range bound", node.args)
            pos = [a for a in node.args if not isinstance(a, ast.Starred)]
            if len(pos) == len(node.args) >= 2 and t.segment(pos[0]) != t.segment(pos[1]):
                a, b = t.segment(pos[0]), t.segment(pos[1])
                swapped = (
                    t.source[: t.span(pos[0])[0]]
                    + b
                    + t.source[t.span(pos[0])[1] : t.span(pos[1])[0]]
                    + a
                    + t.source[t.span(pos[1])[1] :]
                )
                out.append(("swap_args", node.lineno, f"swap arguments {a}, {b}", swapped))
        elif isinstance(node, ast.Constant) and type(node.value) in (int, bool) and not _in_slice_or_range(fn, node):
            if type(node.value) is bool:
                out.append(
                    (
                        "constant",
                        node.lineno,
                        f"{node.value} -> {not node.value}",
                        t.replace(node, repr(not node.value)),
                    )
                )
            else:
                for d in (1, -1):
                    out.append(
                        (
                            "constant",
                            node.lineno,
                            f"{node.value} -> {node.value + d}",
                            t.replace(node, _new_int(node.value, d)),
                        )
                    )
        if isinstance(node, (ast.If, ast.While)):
            cond = t.segment(node.test)
            negated = cond[4:].strip() if cond.startswith("not ") else f"not ({cond})"
            out.append(("negate_if", node.lineno, f"condition {cond} -> {negated}", t.replace(node.test, negated)))
        if isinstance(node, ast.If) and not node.orelse:
            out.append(
                (
                    "remove_if",
                    node.lineno,
                    f"remove the `if {t.segment(node.test)}` block",
                    t.remove_lines(node.lineno, node.end_lineno, keep_indent_pass=False),
                )
            )
    out += _statement_removals(t, fn)
    out += _default_changes(t, fn)
    return out


def _statement_removals(t: _Text, fn: ast.AST) -> list[tuple[str, int, str, str]]:
    out = []
    for node in ast.walk(fn):
        for field in ("body", "orelse"):
            body = getattr(node, field, None)
            if (
                not isinstance(body, list)
                or node is not fn
                and not isinstance(node, (ast.If, ast.For, ast.While, ast.With))
            ):
                continue
            for i, stmt in enumerate(body):
                last = i == len(body) - 1
                removable = isinstance(stmt, (ast.Assign, ast.AugAssign, ast.Expr)) and not (
                    isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)
                )  # not a docstring
                early_return = isinstance(stmt, ast.Return) and node is not fn
                if (removable and not (node is fn and last)) or early_return:
                    what = "early return" if early_return else "statement"
                    out.append(
                        (
                            "remove_stmt",
                            stmt.lineno,
                            f"remove the {what} on line {stmt.lineno}",
                            t.remove_lines(stmt.lineno, stmt.end_lineno, keep_indent_pass=len(body) == 1),
                        )
                    )
    return out


def _default_changes(t: _Text, fn: ast.AST) -> list[tuple[str, int, str, str]]:
    out = []
    for d in fn.args.defaults + [x for x in fn.args.kw_defaults if x is not None]:
        if isinstance(d, ast.Constant):
            if d.value is None:
                continue  # None -> a value would invent one
            new = repr(not d.value) if type(d.value) is bool else repr(d.value + 1) if type(d.value) is int else "None"
            out.append(("default", d.lineno, f"default {t.segment(d)} -> {new}", t.replace(d, new)))
    return out


def _in_slice_or_range(fn: ast.AST, target: ast.AST) -> bool:
    """Constants that `bound` mutates already (slice bounds, range arguments) are not mutated twice."""
    for node in ast.walk(fn):
        if isinstance(node, ast.Slice) and target in (node.lower, node.upper, node.step):
            return True
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "range"
            and target in node.args
        ):
            return True
        if (
            isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and target in node.args.defaults + node.args.kw_defaults
        ):
            return True
    return False


_OP_TEXT = {
    ast.Lt: "<",
    ast.LtE: "<=",
    ast.Gt: ">",
    ast.GtE: ">=",
    ast.Eq: "==",
    ast.NotEq: "!=",
    ast.In: "in",
    ast.NotIn: "not in",
    ast.Is: "is",
    ast.IsNot: "is not",
    ast.Add: "+",
    ast.Sub: "-",
    ast.Mult: "*",
    ast.Div: "/",
    ast.FloorDiv: "//",
    ast.Mod: "%",
    ast.BitAnd: "&",
    ast.BitOr: "|",
    ast.BitXor: "^",
    ast.LShift: "<<",
    ast.RShift: ">>",
}


def _op_text(op: ast.AST) -> str:
    return _OP_TEXT[type(op)]


def mutants(
    path: str, source: str, functions: set[str] | None = None, kinds: tuple[str, ...] | None = None
) -> list[Mutant]:
    """Every single-site mutant of the functions in one file (optionally only these functions / kinds).

    A mutant whose text does not compile, or equals the original, is skipped; identical texts count once.
    """
    tree = parse(source)
    t = _Text(source)
    seen, out = {source}, []
    for name, fn in _functions(tree):
        if functions is not None and name not in functions:
            continue
        for kind, line, description, text in _site_mutants(t, fn):
            if (kinds is not None and kind not in kinds) or text in seen:
                continue
            try:
                compile(text, path, "exec")
            except (SyntaxError, ValueError):  # ValueError: a null byte, on some releases (3.11.2)
                continue
            seen.add(text)
            out.append(Mutant(path, name, kind, line, description, text))
    return out
