"""Two releases of a package compared function by function: what changed, and what only adds API.

Source files (non-test `.py`) are matched by module name, so a module that became a package
(`inflection.py` -> `inflection/__init__.py`) is still compared with itself. In each file pair, every
function and method (methods of nested classes too; code nested in a function is that function's) is
compared as a syntax tree without its docstring:

  body       the body (or a literal default) changed: a candidate fix, applied alone to the old file
  docstring  only the docstring changed: skipped
  signature  parameters, decorators or annotations changed: API, skipped (a patch may not change them)
  added      a function the old release does not have: API only, skipped
  removed    a function the newer release dropped: skipped

A body change that reads a module-level name only the newer release binds (a new helper, a new import)
cannot be applied alone: it needs that addition (`needs`). Module code outside functions that differs
(imports, constants, class attributes) is listed per file (`module_changes`): the patch check lets a
patch change only function bodies, so such a change is never a task.
"""

from __future__ import annotations

import ast
import builtins
import copy
import difflib
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

from graph_planner.graph.build import SKIP_DIRS, is_test_file, module_name
from graph_planner.pyparse import parse

API_KINDS = ("signature", "added", "removed")


@dataclass(frozen=True)
class Function:
    """One function of a file: qualified name, its lines (decorators included) and text."""

    qualname: str
    first: int
    last: int
    text: str
    node: ast.AST = field(compare=False, repr=False)


@dataclass(frozen=True)
class Change:
    """One function that differs between the releases."""

    file: str
    """Path in the older release (the newer release's path for an added function in a new file)."""
    qualname: str
    kind: str
    """body | docstring | signature | added | removed (see the module docstring)."""
    old: Function | None = None
    new: Function | None = None
    new_file: str = ""
    """Path in the newer release (differs from `file` when the module moved)."""
    needs: tuple[str, ...] = ()
    """Module-level names the new body reads that only the newer release binds."""
    detail: str = ""
    """What else differs (the parameters added, for a signature change)."""

    @property
    def key(self) -> str:
        """file::qualname, the change's name in reports."""
        return f"{self.file}::{self.qualname}"

    @property
    def api_only(self) -> bool:
        """Adds, removes or re-declares API: never applied alone."""
        return self.kind in API_KINDS


@dataclass
class ReleaseDiff:
    """Every function change between two releases, and the module code outside functions that differs."""

    changes: list[Change] = field(default_factory=list)
    module_changes: dict[str, list[str]] = field(default_factory=dict)
    """file -> one line per top-level statement (outside functions) the newer release added or changed."""
    added_files: list[str] = field(default_factory=list)
    removed_files: list[str] = field(default_factory=list)
    moved_files: dict[str, str] = field(default_factory=dict)
    """old path -> new path of a module that moved (same module name)."""


def source_files(root: Path) -> list[str]:
    """Non-test Python files of a release (no setup.py, conftest or build folders), sorted."""
    out = []
    for p in sorted(root.rglob("*.py")):
        rel = p.relative_to(root)
        parts = set(rel.parts)
        if SKIP_DIRS & parts or any(x.endswith(".egg-info") for x in rel.parts):
            continue
        if is_test_file(rel.as_posix()) or rel.name in ("setup.py", "conftest.py") or "docs" in parts:
            continue
        out.append(rel.as_posix())
    return out


def functions(text: str) -> dict[str, Function]:
    """qualname -> Function for every function and method (nested classes' too) defined directly in a
    module or class body; a name defined twice at one level (an if/else pair) is left to module code."""
    tree = parse(text)
    lines = text.splitlines(keepends=True)
    found: dict[str, Function] = {}
    twice: set[str] = set()

    def walk(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                q = prefix + node.name
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                if q in found:
                    twice.add(q)
                found[q] = Function(q, first, node.end_lineno, "".join(lines[first - 1 : node.end_lineno]), node)
            elif isinstance(node, ast.ClassDef):
                walk(node.body, f"{prefix}{node.name}.")

    walk(tree.body, "")
    return {q: f for q, f in found.items() if q not in twice}


def _without_docstring(body: list[ast.stmt]) -> list[ast.stmt]:
    first = body[0] if body else None
    doc = isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str)
    return body[1:] if doc else body


def _dump(nodes) -> str:
    return "\n".join(ast.dump(n) if n is not None else "-" for n in nodes)


def _literal(node: ast.AST | None) -> bool:
    try:
        ast.literal_eval(node)
        return True
    except (ValueError, TypeError, SyntaxError, RecursionError):
        return False


def _signature(fn: ast.AST) -> str:
    """Parameters (literal defaults blanked: a patch may change those), decorators, annotations."""
    args = fn.args
    blank = lambda ds: [None if _literal(d) else d for d in ds]  # noqa: E731
    parts = [
        *args.posonlyargs,
        *args.args,
        args.vararg,
        *args.kwonlyargs,
        args.kwarg,
        *blank(args.defaults),
        *blank(args.kw_defaults),
        *fn.decorator_list,
        fn.returns,
    ]
    return type(fn).__name__ + _dump(parts)


def _body(fn: ast.AST) -> str:
    """The body without its docstring, and the literal defaults (a default flows into the body)."""
    defaults = [d for d in [*fn.args.defaults, *fn.args.kw_defaults] if d is not None and _literal(d)]
    return _dump([*_without_docstring(fn.body), *defaults])


def _param_names(fn: ast.AST) -> set[str]:
    a = fn.args
    return {x.arg for x in [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg] if x is not None}


def module_names(tree: ast.Module) -> set[str]:
    """Names a module binds at top level (defs, classes, imports, assignments, in if/try blocks too)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            if node is not tree:
                if not isinstance(node, ast.Lambda):
                    names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    for node in _top_level(tree):
        for target in _targets(node):
            names |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
    return names


def _top_level(tree: ast.Module):
    """Statements at module level, including those inside module-level if / try / with blocks."""
    stack = list(tree.body)
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, (ast.If, ast.Try, ast.With)):
            for name in ("body", "orelse", "finalbody", "handlers"):
                stack.extend(getattr(node, name, []) or [])
        elif isinstance(node, ast.ExceptHandler):
            stack.extend(node.body)


def _targets(node: ast.stmt) -> list[ast.AST]:
    if isinstance(node, ast.Assign):
        return list(node.targets)
    if isinstance(node, (ast.AnnAssign, ast.AugAssign)):
        return [node.target]
    if isinstance(node, (ast.For, ast.AsyncFor)):
        return [node.target]
    return []


def _reads(fn: ast.AST) -> set[str]:
    """Names the function reads that it does not bind itself (globals and builtins)."""
    bound = set(_param_names(fn))
    for node in ast.walk(fn):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            bound.add(node.id)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node is not fn:
            bound.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)} - bound


def _self_attributes(fn: ast.AST) -> set[str]:
    """Attributes the function reads through `self` or `cls`."""
    return {
        n.attr
        for n in ast.walk(fn)
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id in ("self", "cls")
    }


def _module_skeleton(tree: ast.Module, fns: dict[str, Function]) -> list[str]:
    """One line per statement outside the functions of `fns` (they are compared on their own): top-level
    statements, and each class's header and class-level statements under the class's name."""
    lines: list[str] = []

    def walk(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and prefix + node.name in fns:
                continue
            if isinstance(node, ast.ClassDef):
                head = copy.copy(node)
                head.body = [ast.Pass()]
                lines.append(prefix + _one_line(head))
                walk(node.body, f"{prefix}{node.name}.")
            else:
                lines.append(prefix + _one_line(node))

    walk(tree.body, "")
    return lines


def _one_line(node: ast.AST) -> str:
    return " ".join(ast.unparse(node).split())[:120]


def compare_files(
    old_text: str, new_text: str, file: str, new_file: str | None = None
) -> tuple[list[Change], list[str]]:
    """The function changes between two texts of one module, and the module statements that differ."""
    new_file = new_file or file
    old_tree, new_tree = parse(old_text), parse(new_text)
    old_fns, new_fns = functions(old_text), functions(new_text)
    old_names = module_names(old_tree) | set(dir(builtins))
    new_only = module_names(new_tree) - old_names
    changes = []
    for q in sorted(old_fns.keys() | new_fns.keys()):
        o, n = old_fns.get(q), new_fns.get(q)
        if o is None:
            changes.append(Change(file, q, "added", None, n, new_file))
        elif n is None:
            changes.append(Change(file, q, "removed", o, None, new_file))
        elif o.text == n.text:
            continue
        elif _signature(o.node) != _signature(n.node):
            added = sorted(_param_names(n.node) - _param_names(o.node))
            detail = f"adds parameters {', '.join(added)}" if added else "changes parameters, decorators or annotations"
            changes.append(Change(file, q, "signature", o, n, new_file, detail=detail))
        elif _body(o.node) != _body(n.node):
            # a new helper method reached through self / cls is as much a new name as a new global
            prefix = q.rpartition(".")[0] + "." if "." in q else ""
            methods = {
                a for a in _self_attributes(n.node) if prefix and prefix + a in new_fns and prefix + a not in old_fns
            }
            needs = tuple(sorted((_reads(n.node) & new_only) | {prefix + m for m in methods}))
            changes.append(Change(file, q, "body", o, n, new_file, needs))
        elif ast.get_docstring(o.node) != ast.get_docstring(n.node):
            changes.append(Change(file, q, "docstring", o, n, new_file))
        # else: comments or formatting only, the same code
    old_sk, new_sk = _module_skeleton(old_tree, old_fns), _module_skeleton(new_tree, new_fns)
    return changes, [ln for ln in difflib.ndiff(old_sk, new_sk) if ln[:2] in ("+ ", "- ")]


def diff_releases(old: Path, new: Path) -> ReleaseDiff:
    """Every function change between the source trees `old` and `new` (module files matched by name)."""
    old_files = {module_name(f): f for f in source_files(old)}
    new_files = {module_name(f): f for f in source_files(new)}
    out = ReleaseDiff()
    for mod in sorted(old_files.keys() | new_files.keys()):
        of, nf = old_files.get(mod), new_files.get(mod)
        if of is None:
            out.added_files.append(nf)
            out.changes += [Change(nf, q, "added", None, f, nf) for q, f in sorted(functions(_read(new / nf)).items())]
            continue
        if nf is None:
            out.removed_files.append(of)
            continue
        if of != nf:
            out.moved_files[of] = nf
        old_text, new_text = _read(old / of), _read(new / nf)
        if old_text == new_text:
            continue
        try:
            changes, outside = compare_files(old_text, new_text, of, nf)
        except SyntaxError as e:  # a file this Python cannot parse is reported, never guessed at
            out.module_changes[of] = [f"does not parse: {e}"]
            continue
        out.changes += changes
        if outside:
            out.module_changes[of] = outside
    return out


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="surrogateescape")


def apply_changes(old_text: str, changes: list[Change]) -> str:
    """The old file text with each change's function replaced by the newer release's version (re-indented
    to the old function's indentation); every other line stays byte for byte."""
    lines = old_text.splitlines(keepends=True)
    for c in sorted(changes, key=lambda c: -c.old.first):
        old_lines = lines[c.old.first - 1 : c.old.last]
        indent = old_lines[0][: len(old_lines[0]) - len(old_lines[0].lstrip())]
        body = textwrap.indent(textwrap.dedent(c.new.text), indent, lambda ln: bool(ln.strip()))
        if not body.endswith("\n"):
            body += "\n"
        lines[c.old.first - 1 : c.old.last] = body.splitlines(keepends=True)
    return "".join(lines)
