"""Proposals for statements an idiom puts at the top of a function or after the value it checks.

Unlike the defects of graph_planner.defects, nothing in the code points at a removed idiom: the function
still runs, on the inputs the idiom was for it goes wrong. So these come after every defect and the unbound
grammar, few a function:

  default      ``if p is None: p = <value>`` / ``if not p: p = <value>`` for a parameter before its first
               read, the value a zero-argument call of the module named like it (``now = _now()``) or the
               empty container its uses imply (``items.append`` -> ``[]``);
  one or many  ``if isinstance(x, str): x = [x]`` before a loop over a name, so that one string is one item
               and not its characters;
  iterator     ``p = iter(p)`` at the top, for a parameter the function calls ``next`` on;
  guard        an early exit for a value that may be None or empty: ``if x is None: <leave>`` or
               ``if not x: <leave>``, for a parameter before its first read or a local right after the
               expression that made it (``m = pattern.search(s)`` -> ``if m is None: raise StopIteration()``).

Every text is planact's enumeration from the task's source (provenance ``menu``), judged like any candidate.
"""

from __future__ import annotations

import ast

from graph_planner.defects import MAX_PER_DEFECT, loop_targets, parameters
from graph_planner.leftovers import top_places
from graph_planner.unbound import places_around, related, typed_literal

GUARD_PLACES = 3  # gaps before a parameter's first read a guard is tried in, nearest first
# what may be None or empty: a call's result, an attribute or item looked up, an `a and b` / `x if c else y`
MADE = (ast.Call, ast.Attribute, ast.Subscript, ast.BoolOp, ast.IfExp)


def _exits(fn: ast.AST, loop: bool, x: str) -> list[str]:
    """What a guard does: leave with nothing, with `self` (a method) or with the tested value, the iterator
    protocol's `raise StopIteration()` in `__next__`, `continue` in a loop, or a `raise` the function has."""
    out = ["return", "return None", f"return {x}"]
    out += ["return self"] if parameters(fn, keep_self=True)[:1] == ["self"] else []
    out += ["raise StopIteration()"] if fn.name == "__next__" else []
    out += ["continue"] if loop else []
    return out + [ast.unparse(n) for n in ast.walk(fn) if isinstance(n, ast.Raise) and n.exc is not None]


def _reads(fn: ast.AST, name: str) -> list[int]:
    """The lines `fn` reads `name` on, ascending."""
    return sorted(n.lineno for n in ast.walk(fn) if isinstance(n, ast.Name) and n.id == name)


def _defaults(fn: ast.AST, mod: ast.Module, name: str) -> list[str]:
    """What a parameter left out gets: a zero-argument call of a function named like it (``_now()`` for
    ``now``) the module makes or can make, then the empty container its uses imply."""
    called = {
        n.func.id
        for n in ast.walk(mod)
        if isinstance(n, ast.Call) and not n.args and not n.keywords and isinstance(n.func, ast.Name)
    }
    # or a module function that needs no argument
    called |= {
        f.name
        for f in mod.body
        if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
        and len(f.args.posonlyargs + f.args.args) == len(f.args.defaults)
        and all(d is not None for d in f.args.kw_defaults)
    }
    calls = [f"{f}()" for f in sorted(called) if f != name and related(f, name)]
    implied = typed_literal(fn, name)
    return calls + ([implied] if implied else [])


def _iterated(fn: ast.AST) -> dict[str, ast.stmt]:
    """Names a `for` loop of `fn` runs over directly, with the first such loop."""
    out: dict[str, ast.stmt] = {}
    for n in ast.walk(fn):
        if isinstance(n, (ast.For, ast.AsyncFor)) and isinstance(n.iter, ast.Name):
            if n.iter.id not in out or n.lineno < out[n.iter.id].lineno:
                out[n.iter.id] = n
    return out


def _advanced(fn: ast.AST) -> set[str]:
    """Names `fn` passes to `next(...)`."""
    return {
        n.args[0].id
        for n in ast.walk(fn)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "next"
        if n.args and isinstance(n.args[0], ast.Name)
    }


def _idioms(fn: ast.AST, lines: list[str], mod: ast.Module, blocks: list, fits) -> list[tuple]:
    """The default, one-or-many and iterator idioms above."""
    out = []
    params = parameters(fn) + [a.arg for a in fn.args.kwonlyargs]
    for p in params:
        reads = _reads(fn, p)
        if not reads:
            continue
        for at, indent in places_around(blocks, reads[0], lines)[: GUARD_PLACES + 1]:
            for value in [v for v in _defaults(fn, mod, p) if fits(v)]:
                for test in (f"{p} is None", f"not {p}"):
                    why = f"default `if {test}: {p} = {value}` at line {at + 1}"
                    out.append((at, indent, f"if {test}:\n    {p} = {value}\n", None, why))
    for x, loop in sorted(_iterated(fn).items()):
        for at, indent in places_around(blocks, loop.lineno, lines)[:GUARD_PLACES]:
            for many in (f"[{x}]", f"({x},)"):
                why = f"one or many `if isinstance({x}, str): {x} = {many}` at line {at + 1}"
                out.append((at, indent, f"if isinstance({x}, str):\n    {x} = {many}\n", None, why))
    for p in sorted(_advanced(fn) & set(params)):  # a body that calls `next` is more than a docstring
        at, indent = top_places(fn, lines)[0]  # the first gap after the docstring
        out.append((at, indent, f"{p} = iter({p})\n", None, f"iterator `{p} = iter({p})` at line {at + 1}"))
    return out


def _guards(fn: ast.AST, lines: list[str], blocks: list) -> list[tuple]:
    """The early exits above."""
    made = {
        s.targets[0].id: s
        for body, _ in blocks
        for s in body
        if isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name)
        if isinstance(s.value, MADE)
    }
    subjects = [(p, None) for p in parameters(fn)] + sorted(made.items(), key=lambda kv: kv[1].lineno)
    out = []
    for x, stmt in subjects:
        reads = [r for r in _reads(fn, x) if stmt is None or r > stmt.end_lineno]
        if not reads:
            continue
        if stmt is None:
            places = places_around(blocks, reads[0], lines)[:GUARD_PLACES]
        else:
            body = next(b for b, _ in blocks if stmt in b)
            at = stmt.end_lineno
            places = [(at, lines[stmt.lineno - 1][: stmt.col_offset])] if body[-1] is not stmt else []
        for at, indent in places:
            loop = bool(loop_targets(fn, at + 1))
            for test in (f"{x} is None", f"not {x}"):
                for leave in _exits(fn, loop, x)[:MAX_PER_DEFECT]:
                    why = f"guard `if {test}: {leave}` at line {at + 1}"
                    out.append((at, indent, f"if {test}:\n    {leave}\n", None, why))
    return out


def idiom_insertions(
    fn: ast.AST, lines: list[str], mod: ast.Module, blocks: list, fits
) -> list[tuple[int, str, str, ast.stmt | None, str]]:
    """(line index, indent, statement, None, description) for each idiom above: the few first, the guards last."""
    return _idioms(fn, lines, mod, blocks, fits) + _guards(fn, lines, blocks)
