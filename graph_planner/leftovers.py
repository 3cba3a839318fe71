"""Proposals for what a removed statement leaves behind: a name the function defines and never uses.

A removed statement was often the only use of a name, and a linter flags what is left (pyflakes' and pylint's
unused argument, unused function). Each such name says what to put back:

  unused parameter  a method keeps it (``self.timeout = timeout``, ``self._timeout = timeout``), or, beside
                    other parameters and named to be called, calls it with them (``func(x)`` in ``do(func, x)``);
  unused function   a function defined inside this one and never called is returned or run where it was
                    defined (``return ret()``, ``yield from ret()``, ``ret()``);
  delegation        a method emptied to `pass` whose sibling methods hand their call on to an attribute
                    under their own name (``return self._it.throw(*args)`` in ``throw``) does the same under
                    its name (``return self._it.send(value)`` in ``send``).

Every text is planact's enumeration from the task's source (provenance ``menu``), judged like any candidate;
a function's and a delegation's descriptions (``call unused ``, ``delegate ``) count as pointed in
graph_planner.defects; a parameter's do not: intact code leaves parameters unused all the time (an interface's
signature, a callback's), so its proposals go early in the list but are not promoted before token edits.
"""

from __future__ import annotations

import ast
import copy

from graph_planner.defects import parameters
from graph_planner.definite import exprs
from graph_planner.pyparse import parse
from graph_planner.unbound import first_reads

CALLABLES = frozenset("f fn func function callback cb handler hook key pred predicate action".split())
CALLABLE_ENDS = ("func", "_fn", "callback", "_cb", "handler", "hook")
ABSTRACT = (ast.Pass, ast.Raise)  # a body that only passes or raises does not use its parameters by design


def _docstring(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str)


def _unused_parameters(fn: ast.AST) -> list[str]:
    """The parameters `fn` never reads (`self`, `cls` and `_`-names left out), in order."""
    body = [s for s in fn.body if not _docstring(s)]
    if not body or all(isinstance(s, ABSTRACT) for s in body):
        return []
    names, read = parameters(fn) + [a.arg for a in fn.args.kwonlyargs], first_reads(fn)
    return [p for p in names if not p.startswith("_") and p not in read]


def top_places(fn: ast.AST, lines: list[str]) -> list[tuple[int, str]]:
    """The first gap of the body after its docstring, the gap before its last statement and (for a body that
    does not end by leaving) its end."""
    body = [s for s in fn.body if not _docstring(s)]
    indent = lines[body[0].lineno - 1][: body[0].col_offset]
    places = [body[0].lineno - 1, body[-1].lineno - 1]
    if not isinstance(body[-1], (ast.Return, ast.Raise)):
        places.append(body[-1].end_lineno)
    return [(at, indent) for at in dict.fromkeys(places)]


def _callable_name(name: str) -> bool:
    """Whether a parameter's name says it is called (``func``, ``key_fn``, ``on_error``, ``callback``)."""
    return name.lower() in CALLABLES or name.lower().endswith(CALLABLE_ENDS) or name.startswith("on_")


def _in_order(fn: ast.AST, p: str, lines: list[str]) -> list[tuple[int, str]]:
    """Right after the statement that stores the parameter before `p` (``self.string = string`` then
    ``self.pos = pos``): a constructor keeps its arguments in their order."""
    names = parameters(fn)
    before = names[: names.index(p)] if p in names else []
    for q in reversed(before):
        for s in fn.body:
            if isinstance(s, ast.Assign) and isinstance(s.value, ast.Name) and s.value.id == q:
                return [(s.end_lineno, lines[s.lineno - 1][: s.col_offset])]
    return []


def _use_parameters(fn: ast.AST, lines: list[str]) -> list[tuple]:
    out = []
    unused = _unused_parameters(fn)
    method = parameters(fn, keep_self=True)[:1] == ["self"]
    for p in unused:
        others = ", ".join(q for q in parameters(fn) if q != p)
        texts = [f"self.{p} = {p}", f"self._{p} = {p}"] if method else []
        texts += [f"{p}({others})"] if others and _callable_name(p) else []
        for at, indent in dict.fromkeys(_in_order(fn, p, lines) + top_places(fn, lines)):
            for text in texts:
                out.append((at, indent, text + "\n", None, f"use unused `{p}` at line {at + 1}: {text}"))
    return out


def _use_functions(fn: ast.AST, lines: list[str], blocks: list, fits) -> list[tuple]:
    out = []
    read = first_reads(fn).keys()
    for body, _top in blocks:
        for stmt in body:
            if not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) or stmt.name in read:
                continue
            args = ", ".join(parameters(stmt))
            # its own parameters passed on when the function has names of theirs (`fits` judges a tuple of them)
            calls = [f"{stmt.name}()"] + ([f"{stmt.name}({args})"] if args and fits(f"({args},)") else [])
            texts = [t for c in calls for t in (f"return {c}", f"yield from {c}", c)]
            indent = lines[stmt.lineno - 1][: stmt.col_offset]
            at = stmt.end_lineno  # right after its definition: what defines a helper is about to use it
            for text in texts:
                out.append((at, indent, text + "\n", None, f"call unused `{stmt.name}` at line {at + 1}: {text}"))
    return out


def _handed_on(method: ast.AST) -> list[ast.stmt]:
    """The statements of `method` that call an attribute under the method's own name (``self._it.throw(...)``
    in ``throw``)."""
    return [
        s
        for s in ast.walk(method)
        if isinstance(s, (ast.Return, ast.Expr))
        and isinstance(s.value, ast.Call)
        and isinstance(s.value.func, ast.Attribute)
        and s.value.func.attr == method.name
    ]


def _delegations(fn: ast.AST, lines: list[str], blocks: list, cls: ast.ClassDef | None) -> list[tuple]:
    if cls is None:
        return []
    lone = [b[0] for b, _ in blocks if len(b) == 1 and isinstance(b[0], ast.Pass)]
    siblings = [m for m in cls.body if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)) and m.name != fn.name]
    if not lone or not siblings:
        return []
    args = [ast.Name(p) for p in parameters(fn)]
    args += [ast.Starred(ast.Name(fn.args.vararg.arg))] if fn.args.vararg else []
    keywords = [ast.keyword(None, ast.Name(fn.args.kwarg.arg))] if fn.args.kwarg else []
    texts = []
    for m in siblings:
        for stmt in _handed_on(m):
            stmt = copy.deepcopy(stmt)
            stmt.value.func.attr, stmt.value.args, stmt.value.keywords = fn.name, args, keywords
            texts.append(ast.unparse(stmt))
    out = []
    for stmt in lone:
        at, indent = stmt.lineno - 1, lines[stmt.lineno - 1][: stmt.col_offset]
        for text in dict.fromkeys(texts):
            out.append((at, indent, text + "\n", stmt, f"delegate `pass` -> `{text}` at line {at + 1}"))
    return out


def leftover_insertions(
    fn: ast.AST, lines: list[str], blocks: list, cls: ast.ClassDef | None, fits
) -> list[tuple[int, str, str, ast.stmt | None, str]]:
    """(line index, indent, statement, lone `pass` it replaces or None, description) for each leftover above."""
    found = _delegations(fn, lines, blocks, cls) + _use_parameters(fn, lines)
    found = [f for f in found if all(fits(ast.unparse(e)) for e in exprs(parse(f[2]).body[0]))]
    # a nested function's name is the function's own, though not a name `fits` knows
    return _use_functions(fn, lines, blocks, fits) + found
