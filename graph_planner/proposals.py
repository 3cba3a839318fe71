"""Proposed statements: candidate repairs for a removed statement or a removed `if` block.

What a `remove_stmt` / `remove_if` bug removed is not in the function any more, so no edit of the
function's own tokens restores it. Two sources propose it, both inserting one statement into one gap of
one block of the function (or in place of a lone `pass`):

  repository  statements and else-less `if` blocks found elsewhere in the same module (the function's own
              other statements first, then its class, then the module), kept only where every name they
              read is bound at that point (a parameter, a local, a module name or a builtin);
  unbound     a name the function reads that nothing binds (a removed assignment leaves it so: the code
              would raise NameError) bound again just before its first read, in `__init__` an attribute
              the class reads and never sets, or a lone `pass` (a removed block's last statement) turned
              into a `return` or `v = f(v)`; the values are a small grammar over the
              module's own words (`graph_planner.unbound`: literals, names, one call of a name, expressions the
              module assigns to that name or returns), so it is planact's text, not a model's;
  defects     a branch that lost its binding (a local read on a path where nothing bound it), a container
              created empty and never filled, a branch emptied to `pass` (`graph_planner.defects`), and, as an
              idiom rather than a defect, a removed `if x is None: <leave>` guard;
  model       the line a causal language model writes next at each gap, given the module text before it
              (`model_proposals`, any `generate(prompt) -> text` callable).

Every proposal is an ordinary candidate edit: it goes through the same patch check and tests as any other
repair, so a wrong proposal costs a test run and earns nothing.
"""

from __future__ import annotations

import ast
import builtins
import textwrap
from collections.abc import Callable, Iterator

from graph_planner.corpus.mutate import _Text
from graph_planner.defects import defect_insertions
from graph_planner.idioms import idiom_insertions
from graph_planner.leftovers import leftover_insertions
from graph_planner.pyparse import parse
from graph_planner.unbound import module_names, unbound_insertions

_SIMPLE = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr, ast.Return, ast.Raise)
_BLOCKS = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Try)
_BUILTINS = frozenset(dir(builtins))


def _is_docstring(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)


def _kind_of(text: str) -> str:
    """The mutation kind an inserted statement's text undoes: a removed `if` block or a removed statement."""
    return "remove_if" if text.startswith("if ") else "remove_stmt"


def _donor(stmt: ast.stmt) -> bool:
    """A statement worth proposing: a simple statement (not a docstring) or an `if` without `else`."""
    if isinstance(stmt, ast.If):
        return not stmt.orelse
    return isinstance(stmt, _SIMPLE) and not _is_docstring(stmt)


def free_names(node: ast.AST) -> set[str]:
    """Names `node` reads that it does not bind itself (comprehension targets, lambda arguments, stores)."""
    loaded, bound = set(), set()
    for n in ast.walk(node):
        if isinstance(n, ast.Name):
            (loaded if isinstance(n.ctx, ast.Load) else bound).add(n.id)
        elif isinstance(n, ast.arg):
            bound.add(n.arg)
    return loaded - bound


def _function_names(fn: ast.AST) -> set[str]:
    args = fn.args
    names = {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs}
    names.update(a.arg for a in (args.vararg, args.kwarg) if a is not None)
    names.update(n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load))
    names.update(n.name for n in ast.walk(fn) if isinstance(n, ast.ExceptHandler) and n.name)
    return names


def _blocks(fn: ast.AST) -> Iterator[tuple[list[ast.stmt], bool]]:
    """Every statement list inside `fn` (nested functions and classes excluded), with whether it is fn's body."""
    yield fn.body, True
    stack = list(fn.body)
    while stack:
        stmt = stack.pop()
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        for field in ("body", "orelse", "finalbody"):
            body = getattr(stmt, field, None)
            if isinstance(stmt, _BLOCKS) and isinstance(body, list) and body:
                yield body, False
                stack.extend(body)
        for handler in getattr(stmt, "handlers", []):
            yield handler.body, False
            stack.extend(handler.body)


def gaps(fn: ast.AST, lines: list[str]) -> list[tuple[int, str, ast.stmt | None]]:
    """Insertion points of `fn`: (0-based line index to insert before, indentation, a lone `pass` to replace).

    A removed statement is never the last of the function's own body (a function's result is its last
    statement), so that gap is left out; every gap of a nested block is kept."""
    out = []
    for body, top in _blocks(fn):
        indent = lines[body[0].lineno - 1][: body[0].col_offset]
        if len(body) == 1 and isinstance(body[0], ast.Pass):
            out.append((body[0].lineno - 1, indent, body[0]))
            continue
        start = 1 if top and body and _is_docstring(body[0]) else 0
        for i in range(start, len(body) + (0 if top else 1)):
            at = body[i].lineno - 1 if i < len(body) else body[-1].end_lineno
            out.append((at, indent, None))
    return out


def _insert(lines: list[str], at: int, indent: str, text: str, replace: ast.stmt | None) -> str:
    block = "".join(indent + ln + "\n" if ln.strip() else "\n" for ln in text.splitlines())
    end = replace.end_lineno if replace is not None else at
    return "".join(lines[:at]) + block + "".join(lines[end:])


def _segment(lines: list[str], stmt: ast.stmt) -> str:
    """A statement's whole lines, dedented (donors sharing a line with another statement are skipped)."""
    return textwrap.dedent("".join(lines[stmt.lineno - 1 : stmt.end_lineno]))


def _class_at(mod: ast.Module, line: int) -> ast.ClassDef | None:
    """The top-level class of `mod` whose body holds `line`, or None."""
    return next((c for c in mod.body if isinstance(c, ast.ClassDef) and c.lineno <= line <= c.end_lineno), None)


def _class_spans(mod: ast.Module) -> list[tuple[int, int]]:
    return [(c.lineno, c.end_lineno) for c in mod.body if isinstance(c, ast.ClassDef)]


def _donors(mod: ast.Module, mod_lines: list[str], fn: ast.AST, fn_line: int, scope: set[str]) -> list[tuple]:
    """(statement, dedented text) of `mod` that read only names in `scope`, nearest first: the function's
    own statements (repeated code within a function is common), then its class's, then the module's."""
    own = {ast.dump(s) for s in ast.walk(fn) if isinstance(s, ast.stmt)}
    cls = next(((a, b) for a, b in _class_spans(mod) if a <= fn_line <= b), None)
    found, seen = [], set()
    for stmt in ast.walk(mod):
        if not isinstance(stmt, ast.stmt) or not _donor(stmt) or mod_lines[stmt.lineno - 1][: stmt.col_offset].strip():
            continue  # not a donor, or it shares its line with another statement
        key = ast.dump(stmt)
        if key in seen or not free_names(stmt) <= scope:
            continue
        seen.add(key)
        text = _segment(mod_lines, stmt)
        if len(text.splitlines()) > 6:
            continue  # a long block is not one forgotten statement
        tier = 0 if key in own else 1 if cls and cls[0] <= stmt.lineno <= cls[1] else 2
        found.append((tier, abs(stmt.lineno - fn_line), stmt, text))
    found.sort(key=lambda d: d[:2])
    return [(stmt, text) for *_, stmt, text in found]


def _defaults(args: ast.arguments) -> list[tuple[ast.arg, ast.expr]]:
    """(parameter, default) for every parameter that has one."""
    positional = list(zip((args.posonlyargs + args.args)[::-1], args.defaults[::-1]))
    return positional + [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None]


def _default_proposals(fn: ast.AST, body: str, mod: ast.Module) -> list[tuple[str, int, str, str]]:
    """A parameter's default replaced by a default the same-named parameter has elsewhere in the module
    (a default mutated to None loses its value; its siblings often still hold it)."""
    known, elsewhere = module_names(mod) | _BUILTINS, {}
    for f in (n for n in ast.walk(mod) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))):
        for arg, d in _defaults(f.args):
            if free_names(d) <= known:
                elsewhere.setdefault(arg.arg, set()).add(ast.unparse(d))
    t, out = _Text(body), []
    for arg, d in _defaults(fn.args):
        for new in sorted(elsewhere.get(arg.arg, set()) - {ast.unparse(d)}):
            out.append(("default", d.lineno, f"default {arg.arg}={t.segment(d)} -> {new}", t.replace(d, new)))
    return out


def _function(body: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The function a dedented function text defines, or None."""
    try:
        tree = parse(body)
    except SyntaxError:
        return None
    fn = tree.body[0] if tree.body else None
    return fn if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) else None


def repository_proposals(body: str, module: str, fn_line: int, limit: int = 2000) -> list[tuple[str, int, str, str]]:
    """(kind, line in `body`, description, new body text): defaults of same-named parameters elsewhere in
    `module`, then statements of `module` inserted into the dedented function text `body` (which starts at
    line `fn_line` of `module`), nearest donors first."""
    try:
        mod = parse(module)
    except SyntaxError:
        return []
    fn = _function(body)
    if fn is None:
        return []
    lines = body.splitlines(True)
    scope = _function_names(fn) | module_names(mod) | _BUILTINS
    top_indent = lines[fn.body[0].lineno - 1][: fn.body[0].col_offset]
    # a defect the code itself shows (an unbound read, an emptied block) first: nearer the bug than any donor
    local_names = _function_names(fn)
    fits = lambda v: free_names(parse(v, mode="eval")) <= scope  # noqa: E731  (grammar values always parse)
    blocks = list(_blocks(fn))
    # the defects that point at one statement (a branch that lost its binding, a container never filled, an
    # emptied branch) before the unbound names, whose value grammar is long
    cls = _class_at(mod, fn_line)
    found = defect_insertions(fn, lines, mod, local_names, blocks, fits)
    found += leftover_insertions(fn, lines, blocks, cls, fits)
    found += unbound_insertions(fn, lines, mod, scope, local_names, blocks, fits, cls)
    out = [
        ("remove_stmt", at + 1, why, _insert(lines, at, indent, text, lone)) for at, indent, text, lone, why in found
    ]
    # a default or an early-exit guard is an idiom, not a defect the code shows: after the defects, kept whatever
    # their number
    guards = [
        (_kind_of(text), at + 1, why, _insert(lines, at, indent, text, lone))
        for at, indent, text, lone, why in idiom_insertions(fn, lines, mod, blocks, fits)
    ][: limit // 4]
    out = out[: limit - len(guards)] + guards
    out += _default_proposals(fn, body, mod)
    points = gaps(fn, lines)
    near = {
        at: {ast.dump(s) for s in ast.walk(fn) if isinstance(s, ast.stmt) and s.lineno in (at, at + 1)}
        for at, *_ in points
    }
    for stmt, text in _donors(mod, module.splitlines(True), fn, fn_line, scope):
        kind = "remove_if" if isinstance(stmt, ast.If) else "remove_stmt"
        key, head = ast.dump(stmt), text.splitlines()[0].strip()
        for at, indent, lone in points:
            if isinstance(stmt, ast.Return) and indent == top_indent:
                continue  # a removed return is an early one, inside a nested block
            if key in near[at]:
                continue  # the same statement twice in a row
            out.append((kind, at + 1, f"insert `{head}` at line {at + 1}", _insert(lines, at, indent, text, lone)))
            if len(out) >= limit:
                return out
    return out


def _first_statement(indent: str, completion: str) -> str | None:
    """The first complete statement a model wrote after `indent` (dedented), or None."""
    lines = (indent + completion).splitlines()
    for k in range(1, min(len(lines), 8) + 1):
        text = textwrap.dedent("\n".join(lines[:k])) + "\n"
        try:
            tree = parse(text)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue  # not Python yet, a null byte, or nesting deep enough to exhaust the parser
        if len(tree.body) == 1 and _donor(tree.body[0]):
            # A block header parses only with its body; stop at the first line back at the gap's indent.
            rest = lines[k:]
            if isinstance(tree.body[0], ast.If) and rest and rest[0].startswith(indent + " "):
                continue
            return text
        return None
    return None


def model_proposals(
    body: str, prefix: str, generate: Callable[[str], str], max_gaps: int = 24
) -> list[tuple[str, int, str, str]]:
    """(kind, line in `body`, description, new body text): at each gap of the dedented function `body`,
    the statement `generate` writes next after `prefix` (the module text before the function) and the
    function's lines up to the gap; a proposal equal to the statement already there is dropped."""
    fn = _function(body)
    if fn is None:
        return []
    lines, out, seen = body.splitlines(True), [], {body}
    for at, indent, lone in gaps(fn, lines)[:max_gaps]:
        text = _first_statement(indent, generate(prefix + "".join(lines[:at]) + indent))
        if text is None:
            continue
        new = _insert(lines, at, indent, text, lone)
        already = textwrap.dedent("".join(lines[at : at + len(text.splitlines())]))
        if new in seen or lone is None and already == text:
            continue
        seen.add(new)
        out.append((_kind_of(text), at + 1, f"insert `{text.splitlines()[0].strip()}` at line {at + 1}", new))
    return out
