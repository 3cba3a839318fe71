"""A patch adds no write into an object the function did not create (graph_planner/patch_check.py, rule 10).

An end-of-test digest of module state (graph_planner/state_digest.py) sees what a test leaves behind, not
what a call changed and undid before the test ended, nor state it does not reach. Review 8 (2026-11-30)
forged passes that way with one added store each, the buggy line left running: an lru-cached settings
dict (`limits()["abs_tol"] = 1e300`), a dict a getter hands out (`PROFILES.get("default")[k] = v`, also
behind an unstable or oversized global, or put back before the test ended, or consumed by the package's
own next comparison), a pytest fixture's dict handed in as a parameter, `request.module.pytest.approx`,
and one lambda of a dispatch table swapped for another. Each is a write into an object the function did
not make. So a changed body may add a write only into an object it provably created itself, or of the
same kind on the same receiver path as a write the unpatched function already made.

Writes: item and attribute stores, augmented stores and deletes; an augmented assignment to a name (in
place for a list, a set, a dict; not `n += 1` / `s += "x"` with a constant, see below); an in-place
method (`MUTATORS`: update, pop, append, sort...), called or handed on as a value, or named by a literal
string (`getattr(d, "update")`, `methodcaller("pop")`); setattr / delattr (the builtins, and methods of
those names: pytest's monkeypatch); operator's, bisect's and heapq's in-place functions and
random.shuffle (`IN_PLACE`); `next()` of a named iterator (it consumes the iterator). The receiver path
is the chain from its root name, keys and arguments left out (`self.cache[k]` stores into `self.cache`;
`PROFILES.get("x")[k]` into `PROFILES.get()`); the kind groups methods that do the same (an item store,
`update`, `append`, `setdefault` all add; `pop`, `del`, `clear` remove; `sort`, `reverse` reorder).

Provably fresh: a name local to some scope of the function and global in none (symtable's, so a
comprehension's target that is a global elsewhere in the function is not it) whose every binding in the
function, nested scopes included, is a plain `name = <value>` of a literal display, a comprehension, a
constant, a call of a builtin constructor (`FRESH_CALLS`), of collections' copying containers
(`defaultdict`, `OrderedDict`, `Counter`, `deque`) or of a plain class of the file (no metaclass,
decorator or `__new__`, plain bases), a display repeated by a sure int, or an augmented assignment of
itself; and `*args` / `**kwargs`. Only the name itself: a store into an item of a fresh dict
(`d["k"]["j"] = v`) writes into whatever the item is, and so does an augmented store into an item or
attribute (`d["k"] |= v`, `box.items += [v]`: the old item's in-place operator runs first).
Likewise an attribute chain (`self.parts`) into which an earlier statement of the function's top-level
block stored a fresh value (`self.parts = []`; that store is itself a write, judged above).
Not seen: a call between the two that rebinds the attribute, a `try` whose handler runs the write after
the store was skipped.

An `__init__` (or `__post_init__`) may add stores into attributes of the object it builds (`self.x = v`,
`super().__init__(...)`, its first parameter never rebound): at construction no other code holds it yet
(unless unchanged code calls `__init__` again on a live object). `next()` of a local bound only by
`iter(...)` consumes the iterator the function made (of a caller's iterator too: as a `for` loop would).
`name += <number or string constant>` (and `-=`) is no write: a dict or set refuses it; not judged: a
numpy-like array a parameter holds taking the number in place, a list parameter extended by the string's
characters.

As new code (a helper of the file judged for rule 5, `HELPERS`) every write into an object it did not
create counts too, so a function, method or class of the file that makes one is impure: a changed body calls
it only where the old one did (`OPTIONS.remember(k, 1e300 if values else 1e-9)` would widen and put back
through a method, as M8 did with a store). An old call kept with new arguments is not judged here (its
writes are the helper's; rule 9 follows the file's own module data through it). `self.<attr>` stores in
other methods than `__init__` count like any other write (`SELF_ALLOWED` off: a method of a module-level
instance can widen and put back within one call); docs/code-repair.md gives the measurements of both.
"""

from __future__ import annotations

import ast

from graph_planner.patch_units import Facts, other_binding
from graph_planner.patch_write_sites import node_writes, path

# Builtins that return a new object (never one of their arguments): a store into it changes nothing shared.
FRESH_CALLS = frozenset("list dict set frozenset tuple bytearray sorted str bytes int float bool complex repr".split())
_BINDERS = ("except", "FunctionDef", "AsyncFunctionDef", "ClassDef")
HELPERS = True  # judge a helper's writes as new code (rule 5: a helper with one is impure)
SELF_ALLOWED = False  # let a method add stores into attributes of `self`


# Builtin bases whose instances a plain class call makes anew (no `__new__` that hands out a shared object).
_PLAIN_BASES = frozenset("object dict list set Exception ValueError TypeError KeyError RuntimeError".split())


def _fresh_class(rules, facts: Facts, e: ast.AST, depth: int = 0) -> bool:
    """A class of the file whose call makes a new instance and whose stores run no code of its own: no
    metaclass, no `__new__` or store hooks, and only such classes or plain builtins as bases (an Enum's call
    hands out a shared member)."""
    if not isinstance(e, ast.Name) or depth > 8:
        return False
    kind, info = rules.kind(e.id, facts)
    if kind == "builtin":
        return e.id in _PLAIN_BASES
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
    return all(_fresh_class(rules, facts, b, depth + 1) for b in info.bases)


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


def _fresh_value(rules, facts: Facts, v: ast.AST) -> bool:
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
    if not isinstance(v, ast.Call) or not isinstance(v.func, ast.Name):
        return False
    if v.func.id in FRESH_CALLS and rules.kind(v.func.id, facts)[0] == "builtin":
        return True
    return rules.kind(v.func.id, facts)[0] == "defined" and _fresh_class(rules, facts, v.func)


def _plain_def(rules, facts: Facts, u) -> bool:
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


def fresh_names(rules, facts: Facts) -> set[str]:
    """Names that provably hold only objects the function created (the module docstring)."""
    values: dict[str, list[ast.AST | None]] = {n: [None] for n in facts.star}
    other = set(facts.declared) | (facts.params - facts.star)
    for u in facts.units:
        if u.key.split(":")[0] in ("FunctionDef", "AsyncFunctionDef") and _plain_def(rules, facts, u):
            for name in u.binds:
                values.setdefault(name, []).append(None)  # a def makes a new function object
        elif u.key.split(":")[0] in _BINDERS:
            other |= u.binds  # a handler's name, a decorated nested def, a class
        for part in u.parts:
            for node in ast.walk(part):
                p = facts.parent(node)
                if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
                    if isinstance(p, ast.Assign) and p.targets == [node]:
                        values.setdefault(node.id, []).append(p.value)
                    elif isinstance(p, ast.AnnAssign) and p.target is node and p.value is not None:
                        values.setdefault(node.id, []).append(p.value)
                    elif not (isinstance(p, ast.AugAssign) and p.target is node):
                        other.add(node.id)  # a loop or comprehension target, unpacking, a walrus, with, del
                elif (name := other_binding(node)) is not None:
                    other.add(name)
    return {
        n
        for n, vs in values.items()
        if n not in other and n in facts.own and all(v is None or _fresh_value(rules, facts, v) for v in vs)
    }


def _made_here(rules, facts: Facts) -> dict[str, list[int]]:
    """{attribute path: units} of plain stores of a fresh value into an attribute chain (`self.parts = []`):
    what a later write into that path, in the same block or one inside it, writes into."""
    out: dict[str, list[int]] = {}
    for i, u in enumerate(facts.units):
        for p in u.parts:
            if isinstance(p, ast.Assign) and len(p.targets) == 1 and isinstance(p.targets[0], ast.Attribute):
                where = path(p.targets[0])
                if "(" not in where and "[" not in where and _fresh_value(rules, facts, p.value):
                    out.setdefault(where, []).append(i)
    return out


def _created(facts: Facts, made: dict[str, list[int]], where: str, i: int) -> bool:
    """A store of a fresh value into `where` runs before unit i on every path to it: an earlier statement
    of the function's own top-level block (an if's two branches share one block record, so only the top
    level is sure to have run)."""
    return any(j < i and not facts.units[j].enclosing for j in made.get(where, []))


def _building(facts: Facts, kind: str, where: str, iters: set[str]) -> bool:
    """A write into the object an `__init__` builds (`self.x = v`, `super().__init__(...)`, `self` never
    rebound), or `next()` of an iterator the function made with `iter(...)`."""
    if kind == "next":
        return where in iters
    me = facts.init_self
    if not me or me not in _params_only(facts):
        return False
    return (kind == "attr" and where.count(".") == 1 and where.startswith(me + ".")) or (
        kind == "__init__" and where == "super()"
    )


def _params_only(facts: Facts) -> set[str]:
    """Parameters the body never rebinds."""
    bound = {
        n.id
        for u in facts.units
        if not u.key.startswith("default:")
        for p in u.parts
        for n in ast.walk(p)
        if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)
    }
    return facts.params - bound


def _iterators(rules, facts: Facts) -> set[str]:
    """Locals of the function's own scope bound only by `name = iter(...)` (the builtin)."""
    found: dict[str, bool] = {}
    for u in facts.units:
        for p in u.parts:
            for n in ast.walk(p):
                if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load):
                    parent = facts.parent(n)
                    value = parent.value if isinstance(parent, ast.Assign) and parent.targets == [n] else None
                    ok = isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "iter"
                    found[n.id] = found.get(n.id, True) and ok and rules.kind("iter", facts)[0] == "builtin"
    return {n for n, ok in found.items() if ok and n in facts.own and n not in facts.params}


def writes(rules, facts: Facts) -> dict[tuple[str, str], int]:
    """{(kind, receiver path): line} of every write the code makes into an object it did not create."""
    fresh = fresh_names(rules, facts)
    made = _made_here(rules, facts)
    iters = _iterators(rules, facts)
    out: dict[tuple[str, str], int] = {}
    for i, u in enumerate(facts.units):
        if u.key.startswith("default:"):
            continue  # a default is evaluated once, where the skeleton fixes it
        for n in (n for part in u.parts for n in ast.walk(part)):
            for kind, receiver, suffix in node_writes(rules, facts, n):
                if isinstance(receiver, ast.Name) and receiver.id in fresh:
                    continue
                if receiver is not None and not suffix and _created(facts, made, path(receiver), i):
                    continue  # `self.parts = []` then `self.parts.append(x)`: into what it made
                where = ("<methodcaller>" if receiver is None else path(receiver)) + suffix
                if _building(facts, kind, where, iters):
                    continue
                if SELF_ALLOWED and kind == "attr" and where.count(".") == 1 and where.startswith("self."):
                    continue
                out.setdefault((kind, where), getattr(n, "lineno", 0))
    return out


def write_reasons(rules, old: Facts | None, new: Facts) -> list[str]:
    """Why `new` writes into an object it did not create where `old` made no write of that kind there."""
    if old is None and not HELPERS:
        return []
    before = writes(rules, old) if old is not None else {}
    added = {k: line for k, line in writes(rules, new).items() if k not in before}
    if not added:
        return []
    listed = ", ".join(f"{where} ({kind}, line {line})" for (kind, where), line in sorted(added.items()))
    return [
        f"writes into {listed}: an object the function did not create and did not write that way before "
        "(a patch may add writes only into objects it makes itself)"
    ]
