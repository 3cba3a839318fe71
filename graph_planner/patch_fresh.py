"""Which objects a function provably created itself (rule 10 of the patch check: graph_planner/patch_writes.py).

A fresh value is a display, a comprehension, a constant, a call of a builtin constructor, of collections'
copying containers, or of a plain class of the file. A fresh name is a name local to the function whose
every binding is one (the docstring of `fresh_names`).
"""

from __future__ import annotations

import ast

from graph_planner.patch_units import Facts, other_binding
from graph_planner.patch_write_sites import path

# Builtins that return a new object (never one of their arguments): a store into it changes nothing shared.
FRESH_CALLS = frozenset("list dict set frozenset tuple bytearray sorted str bytes int float bool complex repr".split())
_BINDERS = ("except", "FunctionDef", "AsyncFunctionDef", "ClassDef")


# Builtin bases whose instances a plain class call makes anew (no `__new__` that hands out a shared object).
PLAIN_BASES = frozenset("object dict list set Exception ValueError TypeError KeyError RuntimeError".split())


def fresh_class(rules, facts: Facts, e: ast.AST, depth: int = 0) -> bool:
    """A class of the file whose call makes a new instance and whose stores run no code of its own: no
    metaclass, no `__new__` or store hooks, and only such classes or plain builtins as bases (an Enum's call
    hands out a shared member)."""
    if not isinstance(e, ast.Name) or depth > 8:
        return False
    kind, info = rules.kind(e.id, facts)
    if kind == "builtin":
        return e.id in PLAIN_BASES
    if kind != "defined" or not isinstance(info, ast.ClassDef) or info.keywords or info.decorator_list:
        return False
    # nor code a store runs: a `__setattr__` / `__setitem__` of its own, a property's setter (`Box().size = v`
    # would run it, and it may write anywhere)
    hooks = {"__new__", "__setattr__", "__setitem__", "__delattr__", "__delitem__", "__set__", "__delete__"}
    for b in info.body:
        if isinstance(b, (ast.FunctionDef, ast.AsyncFunctionDef)) and (
            b.name in hooks
            or any(isinstance(d, ast.Attribute) and d.attr in ("setter", "deleter") for d in b.decorator_list)
        ):
            return False
    return all(fresh_class(rules, facts, b, depth + 1) for b in info.bases)


def _count(rules, facts: Facts, e: ast.AST) -> bool:
    """An int for sure: a constant, or a call of builtin len or int (`abs`, `round` call the object's own hooks)."""
    if isinstance(e, ast.Constant):
        return type(e.value) is int
    return (
        isinstance(e, ast.Call)
        and isinstance(e.func, ast.Name)
        and e.func.id in ("len", "int")
        and rules.kind(e.func.id, facts)[0] == "builtin"
    )


# collections' containers that copy what they are given (never ChainMap: it keeps the maps it is handed).
_COLLECTIONS = frozenset({"defaultdict", "OrderedDict", "Counter", "deque"})


def _library_constructor(rules, facts: Facts, func: ast.AST) -> bool:
    """`collections.defaultdict(int)`, `Counter(items)` (imported from collections): a new container."""
    where = path(func)
    root, _, rest = where.partition(".")
    kind, origins = rules.kind(root, facts) if root.isidentifier() else ("", [])
    if kind != "alias" or not origins:
        return False
    names = {(o[0], (o[1] + "." + rest) if o[1] and rest else (o[1] or rest)) for o in origins}
    return all(mod == "collections" and name in _COLLECTIONS for mod, name in names)


def fresh_value(rules, facts: Facts, v: ast.AST) -> bool:
    """A value that is a new object the function made: a display, a comprehension, a constant, a call of a
    builtin constructor (the real builtin, not a module-level name of the same spelling), or of a plain class
    of the file (`box = Box()`)."""
    if isinstance(v, (ast.Constant, ast.JoinedStr, ast.List, ast.Tuple, ast.Set, ast.Dict)):
        return True
    if isinstance(v, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
        return True
    if isinstance(v, ast.BinOp) and isinstance(v.op, ast.Mult):
        # `[0] * len(SETTINGS)`: list.__mul__ makes a new list when the count is a real int (a constant or a
        # builtin's number); any other count's `__rmul__` could hand back anything
        for seq, count in ((v.left, v.right), (v.right, v.left)):
            if isinstance(seq, (ast.List, ast.Tuple)) and _count(rules, facts, count):
                return True
        return False
    if isinstance(v, ast.BinOp) and isinstance(v.op, ast.Mod) and isinstance(v.left, ast.Constant):
        return isinstance(v.left.value, str)  # `"%s" % x`: a new string
    if isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) and isinstance(v.func.value, ast.Constant):
        return isinstance(v.func.value.value, str)  # `",".join(parts)`: str's methods make strings or lists
    if isinstance(v, ast.Call) and _library_constructor(rules, facts, v.func):
        return True
    if isinstance(v, ast.IfExp):
        return fresh_value(rules, facts, v.body) and fresh_value(rules, facts, v.orelse)
    if isinstance(v, ast.Call) and path(v.func) == "dict.fromkeys":
        return rules.kind("dict", facts)[0] == "builtin"  # a new dict (its values: the one value handed)
    if not isinstance(v, ast.Call) or not isinstance(v.func, ast.Name):
        return False
    if v.func.id in FRESH_CALLS and rules.kind(v.func.id, facts)[0] == "builtin":
        return True
    kind, found = rules.kind(v.func.id, facts)
    return kind == "defined" and (fresh_class(rules, facts, v.func) or _display_maker(found))


def _display_maker(fn: ast.AST) -> bool:
    """A plain function of the file whose every return is a display, a comprehension or a constant
    (`def _empty(): return []`): each call makes a new object."""
    if not isinstance(fn, ast.FunctionDef) or fn.decorator_list:
        return False
    made = (ast.Constant, ast.List, ast.Tuple, ast.Set, ast.Dict, ast.ListComp, ast.SetComp, ast.DictComp)
    found = [n for n in ast.walk(fn) if isinstance(n, (ast.Return, ast.Yield, ast.YieldFrom, ast.Lambda))]
    nested = [n for n in ast.walk(fn) if n is not fn and isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    return bool(found) and not nested and all(isinstance(n, ast.Return) and isinstance(n.value, made) for n in found)


def plain_def(rules, facts: Facts, u) -> bool:
    """A nested def (its header unit `u`: decorators, then arguments) whose name holds the function it makes:
    no decorator but `functools.wraps(...)`, which hands the same function back (funcy's `wrapper.fails = 0`)."""
    parts = u.parts
    at = next((i for i, p in enumerate(parts) if isinstance(p, ast.arguments)), len(parts))
    for d in parts[:at]:
        call = path(d.func) if isinstance(d, ast.Call) else ""
        root = call.split(".")[0]
        kind, origins = rules.kind(root, facts) if root else ("", [])
        if call not in ("wraps", "functools.wraps") or kind != "alias" or any(o[0] != "functools" for o in origins):
            return False
    return True


def fresh_names(rules, facts: Facts, strict: bool = True) -> set[str]:
    """Names that provably hold only objects the function created (the module docstring). `strict=False`:
    names whose plain bindings are fresh, whatever their augmented assignments hand back (an augmented
    assignment of such a name itself writes into nothing shared: `total = 0; total += v`)."""
    values: dict[str, list[ast.AST | None]] = {n: [None] for n in facts.star}
    augs: dict[str, list[ast.AST]] = {}
    other = set(facts.declared) | (facts.params - facts.star)
    for u in facts.units:
        if u.key.split(":")[0] in ("FunctionDef", "AsyncFunctionDef") and plain_def(rules, facts, u):
            for name in u.binds:
                values.setdefault(name, []).append(None)  # a def makes a new function object
        elif u.key.split(":")[0] in _BINDERS:
            other |= u.binds  # a handler's name, a decorated nested def, a class
        for part in u.parts:
            for node in ast.walk(part):
                p = facts.parent(node)
                if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
                    if isinstance(p, ast.Assign) and p.targets == [node] or isinstance(p, ast.NamedExpr):
                        values.setdefault(node.id, []).append(p.value)
                    elif (item := unpacked(facts, node)) is not None:
                        values.setdefault(node.id, []).append(item)  # `low, high = [], []`
                    elif isinstance(p, ast.AnnAssign) and p.target is node and p.value is not None:
                        values.setdefault(node.id, []).append(p.value)
                    elif isinstance(p, ast.AugAssign) and p.target is node:
                        augs.setdefault(node.id, []).append(p.value)
                    else:
                        other.add(node.id)  # a loop or comprehension target, unpacking, a walrus, with, del
                elif (name := other_binding(node)) is not None:
                    other.add(name)
    return {
        n
        for n, vs in values.items()
        if n not in other
        and n in facts.own
        and all(v is None or fresh_value(rules, facts, v) for v in vs)
        and (not strict or _keeps_itself(rules, facts, vs, augs.get(n, [])))
    }


def _keeps_itself(rules, facts: Facts, values: list[ast.AST | None], augs: list[ast.AST]) -> bool:
    """Every augmented assignment of a name leaves it holding an object the function made: its operand is a
    number or string constant, or every plain binding is a list, dict or set, whose in-place operator returns
    itself. `p = 0; p += obj` holds whatever `obj.__radd__` returns, the shared `obj` itself included (the
    sum()-support idiom; review 9's N12)."""
    if all(isinstance(a, ast.Constant) and type(a.value) in (int, float, str) for a in augs):
        return True
    return all(v is not None and _self_returning(rules, facts, v) for v in values)


def _self_returning(rules, facts: Facts, v: ast.AST) -> bool:
    """A new list, dict or set (a display, a comprehension, the builtin's call, collections' containers)."""
    if isinstance(v, (ast.List, ast.Dict, ast.Set, ast.ListComp, ast.SetComp, ast.DictComp)):
        return True
    if not isinstance(v, ast.Call):
        return False
    if isinstance(v.func, ast.Name) and v.func.id in ("list", "dict", "set", "bytearray"):
        return rules.kind(v.func.id, facts)[0] == "builtin"
    return _library_constructor(rules, facts, v.func)


def unpacked(facts: Facts, node: ast.Name) -> ast.AST | None:
    """The item of a display that unpacking binds to `node` (`a, b = [], {}`: `b` gets `{}`), or None."""
    target = facts.parent(node)
    p = facts.parent(target)
    if not isinstance(target, (ast.Tuple, ast.List)) or not isinstance(p, ast.Assign) or p.targets != [target]:
        return None
    value = p.value
    if not isinstance(value, (ast.Tuple, ast.List)) or len(value.elts) != len(target.elts):
        return None
    if any(isinstance(e, ast.Starred) for e in [*target.elts, *value.elts]):
        return None
    return value.elts[target.elts.index(node)]
