"""Which syntax nodes write, and into what (rule 10 of the patch check: graph_planner/patch_writes.py).

A write is an item or attribute store or delete, an augmented store, an in-place method (`MUTATORS`) called or
handed on, a library in-place function (`IN_PLACE`: operator's, heapq's, bisect's, random.shuffle) called,
handed on as a value or called under another name, setattr / delattr, a mutator named by a literal string, and
`next()` of a named iterator. Each is reported as (kind, receiver expression, attribute suffix); the receiver
path (`path`) is the chain from its root name with keys and arguments left out.
"""

from __future__ import annotations

import ast

from graph_planner.patch_state import IN_PLACE, MUTATORS
from graph_planner.patch_units import Facts

_ADD = frozenset(
    "update setdefault append extend insert add appendleft extendleft __setitem__ setitem iadd iand iconcat "
    "ifloordiv ilshift imod imul imatmul ior ipow irshift isub itruediv ixor insort insort_left insort_right "
    "heappush heappushpop heapreplace".split()
)
_REMOVE = frozenset(
    "pop popitem remove discard clear popleft __delitem__ delitem difference_update intersection_update "
    "symmetric_difference_update heappop".split()
)
_ORDER = frozenset("sort reverse rotate heapify shuffle".split())


def _kind(method: str) -> str:
    """The kind of write an in-place method or function makes."""
    if method in _ADD:
        return "set"
    if method in _REMOVE:
        return "remove"
    if method in _ORDER:
        return "order"
    return method


def path(e: ast.AST) -> str:
    """The receiver path of an expression: its chain from the root name, keys and arguments left out."""
    if isinstance(e, ast.Name):
        return e.id
    if isinstance(e, ast.Attribute):
        return f"{path(e.value)}.{e.attr}"
    if isinstance(e, ast.Subscript):
        return f"{path(e.value)}[]"
    if isinstance(e, ast.Call):
        return f"{path(e.func)}()"
    return f"<{ast.unparse(e)}>"


def _literal_name(call: ast.Call, at: int) -> str:
    args = call.args
    if len(args) > at and isinstance(args[at], ast.Constant) and isinstance(args[at].value, str):
        return args[at].value
    return ""


def _builtin(rules, facts: Facts, func: ast.AST, name: str) -> bool:
    return isinstance(func, ast.Name) and func.id == name and rules.kind(name, facts)[0] == "builtin"


def node_writes(rules, facts: Facts, n: ast.AST) -> list[tuple[str, ast.AST | None, str]]:
    """(kind, receiver expression, attribute suffix) of each write node `n` makes (receiver None: unknown)."""
    if isinstance(n, ast.Subscript) and not isinstance(n.ctx, ast.Load):
        return [("remove" if isinstance(n.ctx, ast.Del) else "set", n.value, "")]
    if isinstance(n, ast.Attribute) and not isinstance(n.ctx, ast.Load):
        return [("del-attr" if isinstance(n.ctx, ast.Del) else "attr", n.value, "." + n.attr)]
    if isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name):
        constant = isinstance(n.value, ast.Constant) and type(n.value.value) in (int, float, str)
        if constant and isinstance(n.op, (ast.Add, ast.Sub)):
            # `pos += 1`, `fmt += " %Y"`: a set or dict refuses either; not judged: an array taking a number, a
            # list extended by a string's characters (parse's real fix `type += " %Y"` on a parameter)
            return []
        return [("aug", n.target, "")]
    if isinstance(n, ast.AugAssign) and _in_place_on_item(n):
        # `d["k"] |= v`: Python runs the old item's own in-place operator before the store into `d`, so the item
        # is written into whatever `d` is (review 9's N8: a fresh `dict(_PENDING)` whose item is shared)
        return [("aug", n.target, "[]")]
    if isinstance(n, ast.Attribute) and n.attr in MUTATORS:
        return [(_kind(n.attr), n.value, "")]  # called, or handed on as a bound method
    if isinstance(n, (ast.Name, ast.Attribute)) and isinstance(n.ctx, ast.Load):
        parent = facts.parent(n)
        called = isinstance(parent, ast.Call) and parent.func is n
        if not called and not isinstance(parent, ast.Attribute) and _in_place_function(rules, facts, n):
            # handed on as a value (review 9's N10: `map(operator.setitem, ...)`, `partial`, `reduce(ior, ...)`)
            return [("add", None, "")]
    if not isinstance(n, ast.Call):
        return []
    last = path(n.func).split(".")[-1]
    if n.args and _in_place_function(rules, facts, n.func):
        return [(_kind(last), n.args[0], "")]
    for name, kind in (("setattr", "attr"), ("delattr", "del-attr")):
        # the builtin, or a method of that name (pytest's `monkeypatch.setattr(request.module, "f", g)`)
        if n.args and (_builtin(rules, facts, n.func, name) or (isinstance(n.func, ast.Attribute) and last == name)):
            return [(kind, n.args[0], "." + (_literal_name(n, 1) or "?"))]
    if _builtin(rules, facts, n.func, "getattr") and _literal_name(n, 1) in MUTATORS:
        return [(_kind(_literal_name(n, 1)), n.args[0], "")]
    if last == "methodcaller" and _literal_name(n, 0) in MUTATORS:
        return [(_kind(_literal_name(n, 0)), None, "")]
    if _builtin(rules, facts, n.func, "next") and n.args and isinstance(n.args[0], (ast.Name, ast.Attribute)):
        return [("next", n.args[0], "")]
    return []


def _in_place_function(rules, facts: Facts, e: ast.AST) -> bool:
    """`e` names one of the library's in-place functions (`IN_PLACE`): by its own name or attribute, or through
    an alias (`from operator import setitem as put`, review 9's N17) or a module-level name bound to one
    (`_set = operator.setitem`)."""
    if isinstance(e, ast.Attribute):
        return e.attr in IN_PLACE
    if not isinstance(e, ast.Name):
        return False
    if e.id in IN_PLACE:
        return True
    kind, found = rules.kind(e.id, facts)
    if kind == "alias":
        return any(isinstance(o, tuple) and len(o) > 1 and str(o[1]).split(".")[-1] in IN_PLACE for o in found)
    if kind == "defined" and isinstance(found, ast.Assign):
        return isinstance(found.value, (ast.Name, ast.Attribute)) and path(found.value).split(".")[-1] in IN_PLACE
    return False


def _in_place_on_item(n: ast.AugAssign) -> bool:
    """An augmented store into an item or attribute that may change the old item in place: any operator but
    `+=` / `-=`, and those when the value is a container (`x.queue += [v]` extends the list `x.queue` holds).
    Not judged: `x[k] += name` with a list behind both (numbers are the common case: `totals[k] += amount`)."""
    if isinstance(n.target, ast.Name):
        return False
    if not isinstance(n.op, (ast.Add, ast.Sub)):
        return True
    containers = (ast.List, ast.Tuple, ast.Set, ast.Dict, ast.ListComp, ast.SetComp, ast.DictComp)
    return isinstance(n.value, containers)
