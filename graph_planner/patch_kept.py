"""Capabilities a changed function already had stay where they were (graph_planner/patch_check.py, rule 8).

A body may read again a capability its old version read: a chain through a capability module
(`sys.modules.get`), a builtin that hands one out (`__import__`, `globals`, `vars`, `open`...), or a function,
method or class of the file that may return or keep what such a read gave (`returners`). What that read
hands out is as strong as the read itself: `sys.modules.get("numpy")` kept lets a new `sys.modules.get("sys")`
reach the whole process. So each statement making such a read must be an old statement whose inputs have the
same backward data-flow slice, and every later statement reading what it stored must be an old one too
(truth and identity tests aside; data handed to a sink such as `write` may change). New attribute reads named
like a standard module, on values the check cannot type, are refused as well (`module_reach_reasons`).
"""

from __future__ import annotations

import ast
import sys
from dataclasses import replace

from graph_planner.patch_facts import Facts, horizon
from graph_planner.patch_lists import CAPABILITY_MODULES, PURE_CHAINS

FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
# Builtins whose result is a capability; `locals()` in a body is its own locals (parse's `return locals()`
# refused most fixes of the function that reads it), `dir()` and `id()` give strings and numbers.
_HANDING_OUT = frozenset("__import__ globals vars open eval exec compile breakpoint input".split())
# Forms of a read that hand out nothing (judged by the type and declaration rules).
_HARMLESS = frozenset({"base", "decorator", "type-safe", "type-clone", "literal-name"})


def _capability(rules, name: str, form: str, facts: Facts) -> bool:
    """Whether this read of a global or builtin hands out a capability (see the module docstring)."""
    if form in _HARMLESS:
        return False
    kind, info = rules.kind(name, facts)
    if kind == "alias":
        chain = form[6:] if form.startswith("chain:") else ""
        rest = chain.split(".")[1:]
        full = {".".join([o[0], *([o[1]] if o[1] else []), *rest]) for o in info}
        return any(o[0].split(".")[0] in CAPABILITY_MODULES for o in info) and not full <= PURE_CHAINS
    if kind == "builtin":
        # getattr & co. are judged by their names (rule 6 and the name guard), type by the type rules; what
        # `__import__`, `vars` or `globals` hand out is a capability; `object()` is a fresh sentinel
        return name in _HANDING_OUT or (name == "object" and form != "call")
    if kind == "unknown":
        return any(
            b.kind == "import" and b.origin[0].split(".")[0] in CAPABILITY_MODULES for b in rules.bindings.get(name, [])
        )
    # a function, method or class of the file counts where it may hand out what a capability read gave
    # (`returners`); an impure one that does not (boltons' `_norm_args_notimplemented`, impure for its
    # `type(other) is ...`) hands out plain values
    return kind == "defined" and name in returners(rules)


# Methods that only take data in: called on a capability whose chain carries no argument
# (`sys.stderr.write(msg)`, `_stream().write(msg)`, `log.info(msg)`) with the result dropped, a body may
# change what it hands them; nothing comes back out.
DATA_SINKS = frozenset("write writelines flush debug info warning warn error exception critical log".split())


def _use(facts: Facts, node: ast.AST) -> ast.AST:
    """The whole expression that uses the value `node` reads: attributes, items and calls on it."""
    while (p := facts.parent(node)) is not None and (
        (isinstance(p, (ast.Attribute, ast.Subscript)) and p.value is node)
        or (isinstance(p, ast.Call) and p.func is node)
    ):
        node = p
    return node


def _sink(facts: Facts, use: ast.AST) -> bool:
    """`use` hands data to a DATA_SINKS method of a capability reached without arguments, result dropped."""
    if not (isinstance(use, ast.Call) and isinstance(use.func, ast.Attribute) and use.func.attr in DATA_SINKS):
        return False
    inner = [n for n in ast.walk(use.func.value) if isinstance(n, (ast.Call, ast.Subscript))]
    # a call on the way is a helper's, with no arguments: `_stream().detach().write(x)` would run detach()
    return isinstance(facts.parent(use), ast.Expr) and all(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and not n.args and not n.keywords for n in inner
    )


def _inputs(facts: Facts, node: ast.AST, use: ast.AST) -> list[ast.AST]:
    """The arguments and item keys along `use`, from the capability `node` up: what steers what it hands out."""
    out = []
    while True:
        if isinstance(node, ast.Call):
            out += [*node.args, *(k.value for k in node.keywords)]
        elif isinstance(node, ast.Subscript):
            out.append(node.slice)
        if node is use:
            return out
        node = facts.parent(node)


def capability_uses(rules, facts: Facts) -> list[tuple[int, list[ast.AST]]]:
    """(unit, inputs) of every capability read, sinks left out."""
    nodes = [(node, i) for name, form, node, i in facts.name_refs if _capability(rules, name, form, facts)]
    back = returners(rules)
    nodes += [(node, i) for attr, node, i in facts.attr_refs if attr in back]
    # a returner named by a string: `operator.methodcaller("module")(obj)`, `attrgetter("module")(obj)()`
    for i, u in enumerate(facts.units):
        for n in (n for part in u.parts for n in ast.walk(part)):
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and set(n.value.split(".")) & back:
                nodes.append((n, i))
    found = []
    for node, i in nodes:
        use = _use(facts, node)
        if not _sink(facts, use):
            found.append((i, [e for e in _inputs(facts, node, use) if not isinstance(e, ast.Constant)]))
    return found


def returners(rules) -> frozenset[str]:
    """Short names of the file's functions, methods and classes that may hand out what a capability read
    gave: a return, yield or store into `self` in the forward reach of one (or of a call of another such
    name); a fixpoint, worked out once per file text."""
    found = getattr(rules, "_kept_returners", None)
    if found is not None:
        return found
    rules._kept_returners = found = frozenset()
    names = {id(n): n.name for n in ast.walk(rules.tree) if isinstance(n, (*FUNCTIONS, ast.ClassDef))}
    while True:
        grown = set(found)
        for h, (facts, _) in rules.helpers.items():
            if h not in names or names[h] in grown:
                continue
            starts = {i for i, _ in capability_uses(rules, facts)}
            if any(_hands_out(facts.units[k]) for k in starts | _reach(facts, starts)):
                grown.add(names[h])
                owner = rules.owner.get(h)
                if owner is not None and names[h] in ("__init__", "__new__", "__post_init__"):
                    grown.add(owner.name)
        if grown == set(found):
            return found
        rules._kept_returners = found = frozenset(grown)


def _hands_out(unit) -> bool:
    """The statement returns or yields a value, or stores one into `self`."""
    yields = any(isinstance(n, (ast.Yield, ast.YieldFrom)) for p in unit.parts for n in ast.walk(p))
    return unit.key.startswith("Return") or yields or "self" in _stored(unit.parts)


def _reach(facts: Facts, start: set[int]) -> set[int]:
    """Units that read what the `start` units stored, and so on forward (truth and identity tests left out)."""
    names, seen, todo = set(), set(), set(start)
    while todo:
        i = todo.pop()
        seen.add(i)
        names |= _stored(facts.units[i].parts)
        for k, u in enumerate(facts.units[_first_after(facts, i) :], _first_after(facts, i)):
            if k not in seen and k not in todo and u.reads & names and not _asked(facts, u, names):
                todo.add(k)
    return seen - start


def _stored(parts: list[ast.AST]) -> set[str]:
    """Names a statement stores into: targets, and the base of an attribute or item it stores."""
    out = set()
    for part in parts:
        for n in ast.walk(part):
            if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load):
                out.add(n.id)
            elif isinstance(n, (ast.Attribute, ast.Subscript)) and not isinstance(n.ctx, ast.Load):
                out |= {r.id for r in ast.walk(n.value) if isinstance(r, ast.Name)}
    return out


def _sinks_inert(facts: Facts) -> Facts:
    """`facts` with the statements that only hand data to a sink (`_stream().write("%r" % (x,))`: no other
    call, no walrus) binding and changing nothing: for the slices of a capability's inputs, a sink keeps
    nothing of its arguments (the slices of other gadgets still count every call)."""
    units = []
    for u in facts.units:
        p = u.parts[0] if len(u.parts) == 1 else None
        call = p.value if isinstance(p, ast.Expr) else None
        inert = (
            call is not None
            and _sink(facts, call)
            and not any(isinstance(n, (ast.Call, ast.NamedExpr, ast.Await)) for a in call.args for n in ast.walk(a))
        )
        units.append(replace(u, binds=set(), mutates=set()) if inert and not call.keywords else u)
    return replace(facts, units=units, index=None)


def _asked(facts: Facts, unit, names: set[str]) -> bool:
    """Every read of `names` in the unit only asks about the value: its truth (`if rv:`, `not rv`) or its
    identity (`rv is None`); none runs code of the file or hands the value on."""
    tests = unit.key.split(":")[0] in ("If", "While")

    def asked(node: ast.AST) -> bool:
        p = facts.parent(node)
        if p is None or node in unit.parts:
            return tests and node in unit.parts
        if isinstance(p, ast.UnaryOp) and isinstance(p.op, ast.Not):
            return True
        if isinstance(p, ast.Compare):
            return all(isinstance(op, (ast.Is, ast.IsNot)) for op in p.ops)
        if isinstance(p, ast.BoolOp):
            return asked(p)
        return isinstance(p, ast.IfExp) and p.test is node

    reads = [n for part in unit.parts for n in ast.walk(part) if isinstance(n, ast.Name) and n.id in names]
    return all(isinstance(n.ctx, ast.Load) and asked(n) for n in reads)


def _first_after(facts: Facts, i: int) -> int:
    """The first unit that may run after unit i: the next one, or the header of a loop around it (all of
    them inside a nested def or lambda, which run later)."""
    if horizon(facts, i) == len(facts.units) and any(c in facts.defs for c in facts.units[i].enclosing):
        return 0
    return min([i + 1, *(facts.headers[c] for c in facts.units[i].enclosing if facts.loops.get(c))])


def kept_reasons(judge, old: Facts, new: Facts) -> list[str]:
    """Why `new` moves a capability its old version read (the module docstring): [] when it does not."""
    uses = capability_uses(judge.rules, new)
    if not uses:
        return []
    start = {i for i, _ in uses}
    # by statement text: a statement that only moved under a changed test does with the value what it did
    old_at: dict[str, set[int]] = {}
    for j, u in enumerate(old.units):
        old_at.setdefault(u.key, set()).add(j)
    old_start = {j for j, _ in capability_uses(judge.rules, old)}
    inert_new, inert_old = _sinks_inert(new), _sinks_inert(old)
    moved = set()
    for i, inputs in uses:
        u = new.units[i]
        # the same statement, its inputs computed by the same statements (a constant is part of its text)
        seeds = old_at.get(u.key, set()) & old_start
        if not any(
            not inputs or judge.same_slice(inert_new, inert_old, None, i, inputs, {j}, False) for j in sorted(seeds)
        ):
            moved.add(i)
    # forward: what those statements store is read only by old statements, and so on
    moved |= {k for k in _reach(new, start) if new.units[k].key not in old_at}
    if not moved:
        return []
    lines = sorted({getattr(p, "lineno", 0) for k in moved for p in new.units[k].parts[:1]})
    return [
        "moves a capability the function already had (a module, globals(), an impure helper: what it hands "
        f"out, on lines {', '.join(map(str, lines))}, must be read and used only by the old statements, "
        "with the same inputs)"
    ]


# Attribute names that may hold a module: a standard module's name (a module keeps the modules it imported:
# `json.decoder.re.enum.sys`), or sys's `modules`.
MODULE_WORDS = frozenset(sys.stdlib_module_names) | {"modules"}
_BY_STRING = frozenset({"attrgetter", "methodcaller"})


def module_reach_reasons(judge, old: Facts, new: Facts) -> list[str]:
    """Why `new` may walk from a value the check cannot type to a module: a new attribute read named like a
    module, not called (a module is not callable), on a base that is no import alias (rule 3 judges those):
    `backend.decoder.re.enum.sys.modules` from a parameter whose default is `json`, or an object attribute
    holding one (a third review's forges, 2026-11-29); the same names in an attrgetter / methodcaller string."""
    had = {a for a, _, _ in old.attr_refs}
    bad = set()
    for attr, node, _ in new.attr_refs:
        if attr not in MODULE_WORDS or attr in had or not isinstance(node.ctx, ast.Load):
            continue
        parent = new.parent(node)
        root = node.value
        while isinstance(root, (ast.Attribute, ast.Subscript, ast.Call)):
            root = root.func if isinstance(root, ast.Call) else root.value
        alias = isinstance(root, ast.Name) and judge.rules.kind(root.id, new)[0] == "alias"
        if not (isinstance(parent, ast.Call) and parent.func is node) and not alias:
            bad.add(attr)
    for part in (p for u in new.units for p in u.parts):
        for n in ast.walk(part):
            callee = n.func if isinstance(n, ast.Call) else None
            name = getattr(callee, "attr", None) or getattr(callee, "id", None)
            if name in _BY_STRING:
                for a in n.args:
                    if isinstance(a, ast.Constant) and isinstance(a.value, str):
                        bad |= (set(a.value.split(".")) & MODULE_WORDS) - had
    if not bad:
        return []
    return [f"reads {', '.join(sorted(bad))} of a value the check cannot type (a name a module may hold it under)"]
