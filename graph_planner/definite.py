"""Definite assignment in one function: is a local bound on every path that reaches a read of it?

A removed assignment in one branch leaves its name bound on some paths and not on others (pylint's
"possibly-used-before-assignment"). `unsafe_read` finds the first read a path reaches with the name unbound;
a path that returns, raises, breaks or continues counts as bound (nothing after it runs), a loop may run no
time at all, and a lambda's or comprehension's own targets are its own.
"""

from __future__ import annotations

import ast

TERMINAL = (ast.Return, ast.Raise, ast.Continue, ast.Break)
SCOPES = (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def stores(node: ast.AST, name: str) -> bool:
    """Whether `node` (a target, or an expression holding a walrus) binds `name` in the function's scope."""
    todo = [node]
    while todo:
        n = todo.pop()
        if isinstance(n, ast.NamedExpr) and n.target.id == name:
            return True  # a walrus binds in the enclosing function, even inside a comprehension
        if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store):
            return True
        if isinstance(n, SCOPES):  # their own targets are theirs: look only for a walrus in them
            todo += [w for w in ast.walk(n) if isinstance(w, ast.NamedExpr)]
            continue
        todo.extend(ast.iter_child_nodes(n))
    return False


def _with_binds(stmt: ast.With | ast.AsyncWith, name: str) -> bool:
    return any(i.optional_vars is not None and stores(i.optional_vars, name) for i in stmt.items)


def definite(body: list[ast.stmt], name: str) -> bool:
    """Whether running `body` to its end binds `name` on every path (a path that leaves the block counts)."""
    return any(binds(s, name) for s in body)


def binds(stmt: ast.stmt, name: str) -> bool:
    """Whether `stmt` binds `name` on every path through it that carries on to the next statement."""
    if isinstance(stmt, TERMINAL):
        return True  # nothing after it runs on this path
    if isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.Expr)):
        return stores(stmt, name) if not isinstance(stmt, ast.AnnAssign) or stmt.value else False
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return any((a.asname or a.name).split(".")[0] == name for a in stmt.names)
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return stmt.name == name
    if isinstance(stmt, ast.If):
        return stores(stmt.test, name) or definite(stmt.body, name) and definite(stmt.orelse, name)
    if isinstance(stmt, (ast.With, ast.AsyncWith)):
        return _with_binds(stmt, name) or definite(stmt.body, name)
    if isinstance(stmt, ast.Try):
        handled = all(definite(h.body, name) for h in stmt.handlers)
        return definite(stmt.finalbody, name) or handled and definite(stmt.body + stmt.orelse, name)
    return False  # a loop may run no time at all; `match` is not followed


def _own_names(scope: ast.AST) -> set[str]:
    """Names a lambda or comprehension binds for itself (its targets and arguments)."""
    stored = {t.id for t in ast.walk(scope) if isinstance(t, ast.Name) and not isinstance(t.ctx, ast.Load)}
    return stored | {a.arg for a in ast.walk(scope) if isinstance(a, ast.arg)}


def _reads(node: ast.AST | None, name: str) -> bool:
    """Whether `node` reads `name` itself (nested scopes left out: a lambda or comprehension may bind it)."""
    if node is None:
        return False
    todo = [node]
    while todo:
        n = todo.pop()
        if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load):
            return True
        if isinstance(n, SCOPES) and name in _own_names(n):
            continue
        if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            todo.extend(ast.iter_child_nodes(n))
    return False


def _header(stmt: ast.stmt) -> list[ast.AST]:
    """The parts of `stmt` that run before any block it holds (a simple statement: all of it)."""
    if isinstance(stmt, (ast.If, ast.While)):
        return [stmt.test]
    if isinstance(stmt, (ast.For, ast.AsyncFor)):
        return [stmt.iter]
    if isinstance(stmt, (ast.With, ast.AsyncWith)):
        return [i.context_expr for i in stmt.items]
    if isinstance(stmt, ast.Try):
        return []
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return list(stmt.decorator_list)  # its body runs later, when called
    return exprs(stmt) if isinstance(stmt, (ast.Assign, ast.Return, ast.Expr)) else [stmt]


def exprs(stmt: ast.stmt) -> list[ast.expr]:
    """The expressions a simple statement evaluates (an assignment's plain-name targets are not read)."""
    if isinstance(stmt, ast.Assign):
        return [stmt.value, *(t for t in stmt.targets if not isinstance(t, ast.Name))]
    if isinstance(stmt, (ast.Return, ast.Expr)):
        return [stmt.value] if stmt.value is not None else []
    if isinstance(stmt, ast.AugAssign):
        return [stmt.target, stmt.value]
    return [stmt]


def _inner(stmt: ast.stmt, name: str, bound: bool) -> list[tuple[list[ast.stmt], bool]]:
    """The blocks `stmt` holds, each with whether `name` is bound on entering it."""
    if isinstance(stmt, (ast.For, ast.AsyncFor)):
        return [(stmt.body, bound or stores(stmt.target, name)), (stmt.orelse, bound)]
    if isinstance(stmt, (ast.With, ast.AsyncWith)):
        return [(stmt.body, bound or _with_binds(stmt, name))]
    if isinstance(stmt, ast.Try):
        out = [(stmt.body, bound), (stmt.orelse, bound or definite(stmt.body, name)), (stmt.finalbody, bound)]
        return out + [(h.body, bound or h.name == name) for h in stmt.handlers]
    if isinstance(stmt, (ast.If, ast.While)):
        return [(stmt.body, bound or stores(stmt.test, name)), (stmt.orelse, bound)]
    return []


def unsafe_read(body: list[ast.stmt], name: str, bound: bool = False) -> tuple[list[ast.stmt], int] | None:
    """The first statement reading `name` where a path reaches it with `name` unbound, as (its block, index)."""
    for i, stmt in enumerate(body):
        if not bound and any(_reads(part, name) for part in _header(stmt)):
            return body, i
        for block, entry in _inner(stmt, name, bound):
            hit = unsafe_read(block, name, entry)
            if hit is not None:
                return hit
        bound = bound or binds(stmt, name)
    return None
