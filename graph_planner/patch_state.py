"""The patch check's rules on state other code reads (graph_planner/patch_check.py states them): stores
into imported modules' attributes, and a type handed to an object's comparison methods. `rules` is the
file's FileRules (graph_planner/patch_helpers.py)."""

from __future__ import annotations

import abc
import ast
import builtins
import enum
import sys
import types

from graph_planner.patch_facts import Facts
from graph_planner.patch_forms import dotted, string_words, type_receivers
from graph_planner.patch_lists import CAPABILITY_MODULES, UNRESOLVED, resolved
from graph_planner.patch_values import SCALARS, bindings, fresh_augmented, fresh_locals, inert

# Metaclasses whose comparison and membership methods are the interpreter's or keep nothing they are handed.
_PLAIN_METACLASSES = (type, abc.ABCMeta, enum.EnumMeta)
_PLAIN_VALUES = (int, float, complex, str, bytes, bool, type(None), types.BuiltinFunctionType, types.FunctionType)


def _plain_object(obj: object) -> bool:
    """A value whose comparison methods keep nothing: a builtin scalar or function, or a class whose
    metaclass is type, ABCMeta or EnumMeta."""
    if obj is UNRESOLVED:
        return False
    return isinstance(obj, _PLAIN_VALUES) or (isinstance(obj, type) and type(obj) in _PLAIN_METACLASSES)


def _standard(module: str, parts: tuple[str, ...]) -> object:
    """`module.parts...` of a standard-library module this process has already imported (`ast.Name`), or
    what `resolved` gives: only to learn what a compared object is, so capability modules count too, but
    nothing is imported for it and no private name is followed."""
    found = sys.modules.get(module)
    if module.split(".")[0] not in sys.stdlib_module_names or found is None or any(p.startswith("_") for p in parts):
        return resolved(module, parts)
    for p in parts:
        found = getattr(found, p, UNRESOLVED)
    return found


def plain_operand(rules, facts: Facts, e: ast.AST, depth: int = 0) -> bool:
    """An operand that a class compared with it cannot reach past the interpreter: a constant, a builtin, a
    literal or function of the file, a class of the file (or of a pure standard module) whose metaclass is
    plain, a module-level tuple of these, or a display of these. Not a local, a parameter, an instance, a
    class attribute or an imported object of another kind: its `__eq__` or `__contains__` (or its
    elements') may keep what it is handed (`type` itself, when the compared value was a class)."""
    if depth > 8:
        return False
    if isinstance(e, ast.Constant):
        return True
    if isinstance(e, (ast.Tuple, ast.List, ast.Set)):
        return all(plain_operand(rules, facts, x, depth + 1) for x in e.elts)
    if isinstance(e, ast.Call):
        # the class of a constant (`type(None)`); never of anything else: `type(a) == type(b)` hands
        # type(b)'s metaclass's `__eq__` type(a)
        return (
            isinstance(e.func, ast.Name)
            and e.func.id == "type"
            and rules.kind("type", facts)[0] == "builtin"
            and len(e.args) == 1
            and not e.keywords
            and isinstance(e.args[0], ast.Constant)
        )
    name = dotted(e)
    root, _, rest = name.partition(".")
    if not root or root in facts.locals or root in facts.params or rules.dynamic:
        return False
    kind, info = rules.kind(root, facts)
    if kind == "alias":
        parts = tuple(rest.split(".")) if rest else ()
        return all(o[1] is not None and _plain_object(_standard(o[3], (o[1],) * bool(o[1]) + parts)) for o in info)
    if rest:
        return False  # an attribute of the file's object or class may hold anything
    if kind == "builtin":
        return _plain_object(getattr(builtins, root, None))
    if kind == "literal":
        return True
    if kind != "defined":
        return False
    if isinstance(info, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and info.decorator_list:
        return False  # a decorator may bind the name to anything
    if isinstance(info, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return True
    if isinstance(info, ast.ClassDef):
        # compared, the class object meets its metaclass's methods: its bases' metaclass, unless it names one
        return not info.keywords and all(plain_operand(rules, facts, b, depth + 1) for b in info.bases)
    # an assigned value (the binding's node is the value): a tuple of plain operands stays one
    return isinstance(info, ast.Tuple) and all(plain_operand(rules, facts, x, depth + 1) for x in info.elts)


def type_reaches(rules, facts: Facts, node: ast.AST) -> list[ast.AST] | None:
    """The operands that may keep the class a `type` read at `node` hands over (the read itself, or a
    one-argument call of it, or a local `t = type(x)` only asked about): [] when every comparison it meets
    has plain operands or is by identity; None when its value flows on."""
    call = facts.call_of(node) if isinstance(node, ast.Name) else None  # `x.__class__` is the class itself
    value = call if call is not None else node
    parent = facts.parent(value)
    if call is not None and len(call.args) == 1 and isinstance(call.args[0], ast.Constant):
        return []  # the class of a constant is never type itself
    if call is not None and isinstance(parent, ast.Call) and parent.func is call and not parent.args + parent.keywords:
        return []  # type(x)(): a fresh value; when x is a class, type() with no arguments fails
    targets = [value]
    if isinstance(parent, ast.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0], ast.Name):
        t = parent.targets[0].id
        if t not in facts.locals:
            return None  # a global or nonlocal: other code reads it
        targets = [
            n
            for u in facts.units
            for part in u.parts
            for n in ast.walk(part)
            if isinstance(n, ast.Name) and n.id == t and isinstance(n.ctx, ast.Load)
        ]
    out = []
    for target in targets:
        receivers = type_receivers(facts, target)
        if receivers is None or not _real_question(rules, facts, target):
            return None
        out += [r for r in receivers if not plain_operand(rules, facts, r)]
    return out


def _real_question(rules, facts: Facts, value: ast.AST) -> bool:
    """A question (`str(t)`, `isinstance(x, t)`...) is asked of the builtin, not of a function of that name
    the module binds (which would be handed the class)."""
    p = facts.parent(value)
    if isinstance(p, ast.Tuple):
        p = facts.parent(p)
    named = p.func.id if isinstance(p, ast.Call) and isinstance(p.func, ast.Name) else None
    return named is None or (rules.kind(named, facts)[0] == "builtin" and not rules.dynamic)


def type_handed_over(rules, facts: Facts, old: Facts | None) -> bool:
    """A new comparison (==, <, in...; not `is`) of a `type` value with a name the file binds at module
    level, at any depth of the operands: that object's `__eq__`, or its metaclass's, is the file's code
    and may keep the type it is handed. (Constants, builtins and plain names are inert; an imported
    object is judged where a `type` value meets it, see type_reaches.)"""
    old_keys = {(u.path, u.key) for u in old.units} if old else set()
    if not any(name == "type" for name, *_ in facts.name_refs):
        return False
    for u in facts.units:
        if (u.path, u.key) in old_keys:
            continue
        for part in u.parts:
            for cmp in (n for n in ast.walk(part) if isinstance(n, ast.Compare)):
                if all(isinstance(op, (ast.Is, ast.IsNot)) for op in cmp.ops):
                    continue
                names = {n.id for n in ast.walk(cmp) if isinstance(n, ast.Name)}
                if "type" not in names and not names & facts.locals:
                    continue
                # every name in the operands, at any depth (`[type(v)] in [[handler]]`), unless plain
                operands = [n for o in [cmp.left, *cmp.comparators] for n in ast.walk(o) if isinstance(n, ast.Name)]
                for n in operands:
                    if n.id in facts.locals or n.id in facts.params:
                        continue
                    if rules.kind(n.id, facts)[0] in ("defined", "unknown") and not plain_operand(rules, facts, n):
                        return True
    return False


# Methods that change a container in place: called on an imported object, they change the library's state.
# `__init__` called on a live object initialises it again in place (`SETTINGS.__init__(k=v)`: review 7, 2026-11-30).
MUTATORS = frozenset(
    "append extend insert remove pop popitem clear update setdefault add discard sort reverse __setitem__ __init__ "
    "__delitem__ appendleft extendleft rotate intersection_update difference_update symmetric_difference_update "
    "setLevel addHandler removeHandler addFilter removeFilter disable".split()
)


# Builtins whose result is a new object built from their argument's items.
COPIES = frozenset("dict list set frozenset tuple sorted str repr bytes bytearray len bool int float".split())
# Standard functions that change their first argument in place: operator's, bisect's and heapq's (`insort(TOLS, x)`
# widened a module's tolerance list: review 7), random.shuffle.
IN_PLACE = frozenset(
    "setitem delitem iadd iand iconcat ifloordiv ilshift imod imul imatmul ior ipow irshift isub itruediv ixor "
    "insort insort_left insort_right heappush heappop heapify heapreplace heappushpop shuffle".split()
)


def _capability_call(rules, call: ast.Call, facts: Facts) -> bool:
    """A call of (something from) a capability module: it returns a shared object (a logger, a module)."""
    root = dotted(call.func).split(".")[0]
    return bool(root) and rules.kind(root, facts)[0] == "alias" and _capability_alias(rules, root, facts)


# What rule 7 guards: (a module-level name that holds such an object, a call that returns one).
IMPORTED = (lambda rules, name, facts: imported(rules, name, facts), _capability_call)


def _imported_chain(rules, chain: str, facts: Facts, held: set[str], test=IMPORTED) -> bool:
    return bool(chain) and _from_import(rules, ast.Name(chain.split(".")[0], ast.Load()), facts, held, test)


def _library_value(rules, e: ast.AST, facts: Facts, held: set[str], test=IMPORTED) -> str:
    """The first chain in `e` that hands on a guarded object itself (not only calls it): `[table][0]`,
    `None or table`, `helper(table)`, a call that returns one (`logging.getLogger()`); '' when none.
    `test`: which module-level names and calls hold one (rule 7: IMPORTED; rule 9: the file's own data)."""
    calls = [c for c in ast.walk(e) if isinstance(c, ast.Call)]
    called = {id(x) for c in calls for x in ast.walk(c.func)}
    # `dict(table)`, `sorted(table)`: a builtin's fresh copy of it, not the object
    called |= {
        id(x)
        for c in calls
        if isinstance(c.func, ast.Name) and c.func.id in COPIES and rules.kind(c.func.id, facts)[0] == "builtin"
        for a in c.args
        if dotted(a)
        for x in ast.walk(a)
    }
    called |= inert(e)
    # a builtin that returns a number, a bool or a range (`range(SIZE - 1)`, `sum(w - d for d in ds)`)
    called |= {
        id(x)
        for c in calls
        if isinstance(c.func, ast.Name)
        and (c.func.id in SCALARS or (c.func.id == "sum" and len(c.args) == 1 and not c.keywords))
        and rules.kind(c.func.id, facts)[0] == "builtin"
        for a in [*c.args, *(k.value for k in c.keywords)]
        for x in ast.walk(a)
    }
    for n in ast.walk(e):
        if isinstance(n, ast.Call) and test[1](rules, n, facts):
            return dotted(n.func) + "()"  # the shared object a call returns (a logger, a module, a getter's)
        if isinstance(n, ast.Name) and id(n) not in called and _imported_chain(rules, n.id, facts, held, test):
            top = n
            while isinstance(facts.parent(top), ast.Attribute) and facts.parent(top).value is top:
                top = facts.parent(top)
            return dotted(top) or n.id
    return ""


def foreign_stores(rules, facts: Facts) -> set[str]:
    """Attribute chains the code assigns, augments or deletes that start at an import alias, or at a
    module-level name bound to one (`enc = json.encoder`): `json.encoder.encode_basestring_ascii = f`
    rewrote every JSON line the process wrote, a signed report included. So do item stores, in-place
    methods (also handed on as values) and operator functions on such objects, through any local that
    may hold one (however bound) and any expression that hands one on."""
    return {chain for chain, *_ in stores(rules, facts)}


def held_locals(rules, facts: Facts, test=IMPORTED) -> set[str]:
    """Locals and parameters that may hold an object `test` guards, however bound (see stores)."""
    nodes = [n for u in facts.units for part in u.parts for n in ast.walk(part)]
    # a parameter's default is bound at its top: `def f(table=TABLE): table["k"] = v`
    defaults = [
        ([ast.Name(u.key[8:].partition("=")[0], ast.Store())], u.parts[0])
        for u in facts.units
        if u.key.startswith("default:")
    ]
    held: set[str] = set()  # locals that may hold a guarded object: `c = decimal.DefaultContext; c.prec = 1`
    while True:
        grown = held | {
            t.id
            for targets, value in bindings(nodes, facts) + defaults
            if _library_value(rules, value, facts, held, test) and not fresh_augmented(facts, value)
            for target in targets
            for t in ast.walk(target)
            if isinstance(t, ast.Name) and isinstance(t.ctx, ast.Store)  # `rv["c"] = x` does not rebind rv
        }
        if grown == held:
            return held
        held = grown


def stores(rules, facts: Facts, test=IMPORTED) -> set[tuple[str, int, ast.AST]]:
    """(chain, unit, node) of every store, augmented store, delete, in-place method (also handed on as a
    value) or operator function whose object `test` guards (see foreign_stores), through any local or
    parameter (its default included) that may hold one, however bound."""
    held = held_locals(rules, facts, test)
    fresh = fresh_locals(facts)
    out = set()
    for i, u in enumerate(facts.units):
        if u.key.startswith("default:"):
            continue  # a non-literal default is fixed by the skeleton and runs at definition, not per call
        for n in (n for part in u.parts for n in ast.walk(part)):
            chain = _store_chain(rules, facts, n, held, test, fresh)
            if chain:
                out.add((chain, i, n))
    return out


def _store_chain(rules, facts: Facts, n: ast.AST, held: set[str], test, fresh: set[str] = frozenset()) -> str:
    """The guarded chain node `n` changes (see stores), or ''."""
    if isinstance(n, (ast.Attribute, ast.Subscript)) and not isinstance(n.ctx, ast.Load):
        # `html.entities.html5["amp;"] = "Z"`, `[table][0]["k"] = v`, `logging.getLogger().disabled = True`
        chain = dotted(n) if isinstance(n, ast.Attribute) else ""
        if _imported_chain(rules, chain, facts, held, test):
            return chain
        return _library_value(rules, n.value, facts, held, test)
    if isinstance(n, ast.Attribute) and n.attr in MUTATORS:
        # `copy.dispatch_table.update(...)`, and the bound method as a value (`map(table.update, ...)`)
        return _library_value(rules, n.value, facts, held, test)
    if isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name) and n.target.id in held:
        return n.target.id  # `d = json.encoder.ESCAPE_DCT; d |= {...}` changes it in place
    if isinstance(n, ast.Call) and n.args:
        name = dotted(n.func)
        last = name.split(".")[-1]
        builtin = isinstance(n.func, ast.Name) and rules.kind(n.func.id, facts)[0] == "builtin"
        if (
            (builtin and last in ("setattr", "delattr"))
            or last in IN_PLACE
            or (last in MUTATORS and name.count(".") == 1 and name.split(".")[0] not in fresh)
        ):
            # `setattr(JSONEncoder, "item_separator", ";")`, operator.setitem / ior, dict.update(table, ...)
            return _library_value(rules, n.args[0], facts, held, test)
        if isinstance(n.func, ast.Call) and dotted(n.func.func).split(".")[-1] == "methodcaller":
            named = n.func.args[0] if n.func.args else None
            if isinstance(named, ast.Constant) and named.value in MUTATORS:
                return _library_value(rules, n.args[0], facts, held, test)  # methodcaller("update", d)(table)
    return ""


def _from_import(rules, value: ast.AST, facts: Facts, held: set[str], test=IMPORTED) -> bool:
    root = dotted(value).split(".")[0]
    if not root:
        return False
    if root in facts.locals or root in facts.params:
        return root in held
    return test[0](rules, root, facts)


def imported(rules, name: str, facts: Facts) -> bool:
    """An import alias, or a module-level name bound to an attribute chain from one."""
    kind, info = rules.kind(name, facts)
    if kind == "alias":
        return True
    value = info if kind == "defined" else None
    if isinstance(value, ast.Call):  # `LOG = logging.getLogger(__name__)`: the library's shared logger
        return _capability_call(rules, value, facts)
    root = dotted(value).split(".")[0] if isinstance(value, (ast.Name, ast.Attribute)) else ""
    return bool(root) and root != name and imported(rules, root, facts)


def _capability_alias(rules, name: str, facts: Facts) -> bool:
    """An import alias of (something from) a capability module."""
    return any((o[3] or "").split(".")[0] in CAPABILITY_MODULES for o in rules.kind(name, facts)[1])


def literal_words(rules, facts: Facts) -> tuple[set[str], set[str]]:
    """(words, dunder strings) of the literal module constants the code reads."""
    words, dstrings = set(), set()
    for name in facts.reads:
        kind, value = rules.kind(name, facts)
        for c in ast.walk(value) if kind == "literal" else ():
            if isinstance(c, ast.Constant) and isinstance(c.value, str):
                w = string_words(c.value)
                words |= {x for x in w if "__" not in x}
                dstrings |= {c.value} if any("__" in x for x in w) else set()
    return words, dstrings
