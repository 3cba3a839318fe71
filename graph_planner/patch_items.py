"""Items of a fresh container that are fresh too (rule 10 of the patch check: graph_planner/patch_writes.py).

A store into an item of a fresh container writes into whatever the item is: `d = {"p": PROFILES["x"]}` holds
a shared dict. But a container whose every item the function put there is itself a new object holds only
objects the function made: `groups = {}` filled by `groups.setdefault(k, []).append(v)`, `defaultdict(list)`,
`rows = [[0, 0] for _ in values]`, `stats = {"low": {}, "high": {}}`, `runs = [[]]` (review 9's false refusals
R7, R8, R10c, R12, R13). So a name is a fresh container of fresh items when it is fresh, every binding is a
display or comprehension of fresh values (or `defaultdict` of a builtin container type, or an empty builtin
call), and every use of it is one that puts no other object in: an item store, `append` / `insert` / `add` /
`setdefault` of a fresh value, a read, a removal, or a builtin that only reads it. Handed anywhere else (a
call, another name) something else may put a shared object in, so it is not.
"""

from __future__ import annotations

import ast

from graph_planner.patch_fresh import fresh_value
from graph_planner.patch_units import Facts

_PUTS = frozenset({"append", "insert", "add", "setdefault", "appendleft"})  # the item is the last argument
_TAKES = frozenset(
    "get keys values items copy count index pop popitem remove discard clear sort reverse popleft".split()
)
_READERS = frozenset(
    "len max min sorted sum list tuple set frozenset any all enumerate zip iter reversed print repr str bool".split()
)
_CONTAINERS = frozenset({"list", "dict", "set"})


def fresh_items(rules, facts: Facts, fresh: set[str]) -> set[str]:
    """Fresh names whose every item is an object the function made (the module docstring)."""
    bound: dict[str, list[ast.AST | None]] = {}
    used_otherwise: set[str] = set()
    for u in facts.units:
        for part in u.parts:
            for n in ast.walk(part):
                if not isinstance(n, ast.Name) or n.id not in fresh:
                    continue
                if isinstance(n.ctx, ast.Load):
                    if not _safe_use(rules, facts, n):
                        used_otherwise.add(n.id)
                    continue
                p = facts.parent(n)
                bound.setdefault(n.id, []).append(p.value if isinstance(p, (ast.Assign, ast.NamedExpr)) else None)
    return {
        name
        for name, values in bound.items()
        if name not in used_otherwise and all(v is not None and _holds_made(rules, facts, v) for v in values)
    }


def fresh_item(rules, facts: Facts, e: ast.AST, items: set[str]) -> bool:
    """`e` is an item of such a container: `rows[i]`, `groups.setdefault(k, [])`."""
    if isinstance(e, ast.Subscript):
        return isinstance(e.value, ast.Name) and e.value.id in items
    if not isinstance(e, ast.Call) or not isinstance(e.func, ast.Attribute) or e.func.attr != "setdefault":
        return False
    owner = e.func.value
    named = isinstance(owner, ast.Name) and owner.id in items
    return named and len(e.args) == 2 and fresh_value(rules, facts, e.args[1])


def _holds_made(rules, facts: Facts, v: ast.AST) -> bool:
    """A new container whose items are new objects (or none yet)."""
    if isinstance(v, (ast.List, ast.Tuple, ast.Set)):
        return all(fresh_value(rules, facts, e) for e in v.elts)
    if isinstance(v, ast.Dict):
        return all(k is not None and fresh_value(rules, facts, x) for k, x in zip(v.keys, v.values))
    if isinstance(v, (ast.ListComp, ast.SetComp)):
        return fresh_value(rules, facts, v.elt)
    if isinstance(v, ast.DictComp):
        return fresh_value(rules, facts, v.value)
    if not isinstance(v, ast.Call) or v.keywords:
        return False
    name = v.func.id if isinstance(v.func, ast.Name) else ""
    if isinstance(v.func, ast.Attribute) and v.func.attr == "defaultdict":
        name = "defaultdict"  # `collections.defaultdict(list)` (fresh_value checks it is collections')
    if name in _CONTAINERS and not v.args:
        return rules.kind(name, facts)[0] == "builtin"
    if name == "defaultdict" and len(v.args) == 1 and fresh_value(rules, facts, v):
        factory = v.args[0]  # a new list, dict or set per missing key
        named = isinstance(factory, ast.Name) and factory.id in _CONTAINERS
        return named and rules.kind(factory.id, facts)[0] == "builtin"
    return False


def _safe_use(rules, facts: Facts, n: ast.Name) -> bool:
    """A use of the container that puts no object the function did not make into it (the module docstring)."""
    p = facts.parent(n)
    if isinstance(p, ast.Subscript) and p.value is n:
        store = facts.parent(p)
        if isinstance(p.ctx, ast.Store) and isinstance(p.slice, ast.Slice):
            return False  # `n[0:1] = [shared]` puts the display's items in, not the display
        if isinstance(p.ctx, ast.Store) and isinstance(store, ast.Assign) and store.targets == [p]:
            return fresh_value(rules, facts, store.value)
        if isinstance(store, ast.AugAssign) and store.target is p:
            return isinstance(store.value, ast.Constant) and type(store.value.value) in (int, float, str)
        return not isinstance(p.ctx, ast.Store)  # a read or a delete (an unpacking target: any value)
    if isinstance(p, ast.Attribute) and p.value is n:
        call = facts.parent(p)
        if not isinstance(call, ast.Call) or call.func is not p:
            return False
        if p.attr in _PUTS:
            return bool(call.args) and fresh_value(rules, facts, call.args[-1]) and not call.keywords
        return p.attr in _TAKES
    if isinstance(p, ast.Call) and n in p.args and isinstance(p.func, ast.Name) and p.func.id in _READERS:
        return rules.kind(p.func.id, facts)[0] == "builtin"
    if isinstance(p, (ast.For, ast.AsyncFor, ast.comprehension)):
        return p.iter is n
    return isinstance(p, (ast.Compare, ast.BoolOp, ast.Return, ast.FormattedValue, ast.UnaryOp, ast.If, ast.While))
