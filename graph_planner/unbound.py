"""Proposals for a defect the function's own code shows: a name read that nothing binds, a block emptied to `pass`.

A removed assignment leaves its name read but bound nowhere (pyflakes' "undefined name"); a removed last
statement of a block leaves a lone `pass`. Where the code shows either, the statement that is missing is
bound to be near it, so the values tried are few and the places fewer: the unbound name is assigned in the
gaps just before the statement that first reads it (in that block and each block around it), the `pass` is
replaced by a `return`. Values come from a small grammar over the module's own words, in this order:

  1. what the module assigns to the same name elsewhere;
  2. literals: [] {} () set() "" 0 1 None True False (the empty value the name's uses imply first, at every
     place: `chars.append(c)` says `chars = []`);
  3. a name in scope whose word pieces share a stem with the target's (``raw_val`` <- ``val``,
     ``padfn`` <- ``_padboth``);
  4. one call of such a name: ``f(x)`` with f a function of the module or a pure builtin, after a literal the
     module repeats times such a name (``pad = " " * padding``).

In `__init__`, an attribute the class reads (`self.x`) but sets nowhere is bound the same way (`self.x = x`,
at each gap of the function's own body, the last one included: `__init__` returns nothing); a lone `pass`
may also become `v = f(v)`, one of the function's names passed through another (`ret = f(ret)`).

A return tries the function's own names first (its locals and parameters, and the names it reads), then the
literals, then what the module returns elsewhere, then the calls.

Every value reads only names bound at that point; the text is planact's own enumeration from the task's
source (provenance ``menu``), judged like any other candidate.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from keyword import iskeyword

# Pure builtins worth one call on a name: constructors and iteration helpers (no I/O, no introspection).
CALLS = ("len", "list", "tuple", "set", "dict", "sorted", "reversed", "iter", "next", "str", "int", "float", "bool")
LITERALS = ("[]", "{}", "()", "set()", '""', "0", "1", "None", "True", "False")
MAX_VALUES = 400  # values per unbound name or lone `pass`: the grammar's tail is long and rarely right
MAX_GAPS = 6  # places per unbound name, nearest to its first read first
MAX_ATTR_VALUES = 40  # values per unset attribute: a parameter of its name, a literal or a related name
BIND = re.compile(r"bind unbound `(?P<name>\w+)` at line \d+: ")  # a binding proposal's description


def bound_name(description: str) -> str | None:
    """The name a binding proposal binds, from its description, or None for any other candidate."""
    m = BIND.match(description)
    return m.group("name") if m else None


def name_pieces(name: str) -> set[str]:
    """Lower-case word pieces of an identifier (snake and camel case), at least 3 characters."""
    words = re.findall(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])", name)
    return {w.lower() for w in words if len(w) >= 3}


def related(a: str, b: str) -> bool:
    """Two names share a stem: a word piece of one starts with a 3-character prefix of a piece of the other."""
    return any(p[:3] == q[:3] for p in name_pieces(a) for q in name_pieces(b))


# The empty value a method called on a name implies: `chars.append(c)` says `chars` was a list.
USES = {"append": "[]", "extend": "[]", "insert": "[]", "sort": "[]", "add": "set()", "discard": "set()"}
USES |= dict.fromkeys(("items", "keys", "values", "setdefault", "update"), "{}")


def typed_literal(fn: ast.AST, name: str) -> str | None:
    """The empty value the methods `fn` calls on `name` imply (USES), or None when they imply none or several."""
    implied = {
        USES[n.func.attr]
        for n in ast.walk(fn)
        if isinstance(n, ast.Call)
        and isinstance(n.func, ast.Attribute)
        and isinstance(n.func.value, ast.Name)
        and n.func.value.id == name
        and n.func.attr in USES
    }
    return implied.pop() if len(implied) == 1 else None


def first_reads(fn: ast.AST) -> dict[str, int]:
    """Every name `fn` reads, with the line of its first read."""
    first: dict[str, int] = {}
    for n in ast.walk(fn):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
            first[n.id] = min(first.get(n.id, n.lineno), n.lineno)
    return first


def _containing(body: list[ast.stmt], line: int) -> int | None:
    """The index of the statement of `body` that spans `line`, or None."""
    return next((i for i, s in enumerate(body) if s.lineno <= line <= s.end_lineno), None)


def places_around(blocks: list[tuple[list[ast.stmt], bool]], line: int, lines: list[str]) -> list[tuple]:
    """(line index to insert before, indent) in every block around `line`, nearest to it first."""
    out = []
    for body, _top in blocks:
        k = _containing(body, line)
        if k is None:
            continue
        indent = lines[body[0].lineno - 1][: body[0].col_offset]
        out += [(body[i].lineno - 1, indent, line - body[i].lineno) for i in range(k + 1)]
    out.sort(key=lambda p: p[2])
    return [(at, indent) for at, indent, _ in out[:MAX_GAPS]]


def module_names(mod: ast.Module) -> set[str]:
    """Names the module binds at its top level (definitions, imports, assignments)."""
    out = set()
    for stmt in mod.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(stmt.name)
        elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
            out.update((a.asname or a.name).split(".")[0] for a in stmt.names)
        else:
            out.update(n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load))
    return out


def _target_name(t: ast.expr) -> str | None:
    """The name an assignment target binds: `x` for `x` and for `obj.x`."""
    return t.id if isinstance(t, ast.Name) else t.attr if isinstance(t, ast.Attribute) else None


def _aliases(name: str, local_names: set[str]) -> list[str]:
    """``cache.append`` for ``cache_append``: a loop's bound method kept in a local, named for what it is."""
    cuts = [k for k, c in enumerate(name) if c == "_" and 0 < k < len(name) - 1]
    # an attribute must be a name: `get_in` is never `get.in`, `x_1` never `x.1`
    attr = lambda k: name[k + 1 :].isidentifier() and not iskeyword(name[k + 1 :])  # noqa: E731
    return [f"{name[:k]}.{name[k + 1 :]}" for k in cuts if name[:k] in local_names and attr(k)]


def _module_values(mod: ast.Module, name: str | None) -> list[str]:
    """What `mod` assigns to `name` (or to an attribute of that name) elsewhere, or (name None) the values it
    returns, in the module's order."""
    out = []
    for n in ast.walk(mod):
        if name is None and isinstance(n, ast.Return) and n.value is not None:
            out.append(n.value)
        elif name is not None and isinstance(n, ast.Assign) and any(_target_name(t) == name for t in n.targets):
            out.append(n.value)
    return [ast.unparse(v) for v in out]


def _self_attributes(cls: ast.ClassDef) -> tuple[set[str], set[str]]:
    """(attributes the class's methods read as `self.x`, names the class sets: `self.x = ...` anywhere in it,
    its class-level assignments and its methods)."""
    read, bound = set(), set()
    for stmt in cls.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            bound.add(stmt.name)
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            bound.update(n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store))
    for n in ast.walk(cls):
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "self":
            (bound if isinstance(n.ctx, ast.Store) else read).add(n.attr)
    return read, bound


def _dynamic(cls: ast.ClassDef) -> bool:
    """Whether the class sets or serves attributes by name (`__getattr__`, `setattr`, `__dict__`)."""
    for n in ast.walk(cls):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name in ("__getattr__", "__getattribute__"):
            return True
        if isinstance(n, ast.Name) and n.id == "setattr" or isinstance(n, ast.Attribute) and n.attr == "__dict__":
            return True
    return False


def unset_attributes(cls: ast.ClassDef | None, mod: ast.Module) -> list[str]:
    """Attributes `cls` reads on `self` and sets nowhere, when every base is `object` or a class of the module
    (an inherited attribute cannot be told from a missing one otherwise); the bases' own are set too."""
    if cls is None or _dynamic(cls):
        return []
    classes = {c.name: c for c in mod.body if isinstance(c, ast.ClassDef)}
    read, bound, todo, seen = *_self_attributes(cls), list(cls.bases), {cls.name}
    while todo:
        base = todo.pop()
        name = base.id if isinstance(base, ast.Name) else None
        if name == "object" or name in seen:
            continue
        if name not in classes:
            return []
        seen.add(name)
        bound |= set().union(*_self_attributes(classes[name]))  # a base's reads are its own business
        todo += classes[name].bases
    return sorted(read - bound)


def repeated(mod: ast.Module, most: int = 8) -> list[str]:
    """The literals `mod` repeats with `*` (``"-" * w``, ``[""] * n``), most used first."""
    seen = Counter()
    for n in ast.walk(mod):
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mult):
            for side in (n.left, n.right):
                if (
                    isinstance(side, ast.Constant)
                    and isinstance(side.value, str)
                    or (isinstance(side, ast.List) and len(side.elts) == 1 and isinstance(side.elts[0], ast.Constant))
                ):
                    seen[ast.unparse(side)] += 1
    return [text for text, _ in seen.most_common(most)]


def _grammar(
    target: str, firsts: list[str], names: set[str], args: set[str], callees: list[str], repeats: list[str] = ()
) -> list[str]:
    """The candidate values for `target` (a name, or '' for a return), in the module docstring's order:
    `names` may be values, `args` (locals) may be a call's argument or a repeat count, `callees` in the order
    they are tried, `repeats` the literals the module repeats."""
    returning = not target
    near = sorted(n for n in names if not n.startswith("__") and (returning or related(n, target)))
    calls = [f"{f}({x})" for f in callees for x in sorted(args & set(near)) if f not in (x, target)]
    calls = [f"{c} * {x}" for c in repeats for x in sorted(args & set(near))] + calls
    seen, out = set(), []
    # a return's own names come first (what a removed return gives back is most often a local); for a binding,
    # an attribute's own name (`self.timeout = timeout`) comes before anything else
    own = [target] if target in names else []
    order = [*near, *LITERALS, *firsts, *calls] if returning else [*own, *firsts, *LITERALS, *near, *calls]
    for v in order:
        if v not in seen:
            seen.add(v)
            out.append(v)
    return out[:MAX_VALUES]


def _diagonal(places: list, values: list[str]) -> list[tuple]:
    """Every (place, value) pair, the sum of their ranks ascending (nearest place first on a tie): a cap keeps
    the best values at the nearest places, not every value at the nearest place alone."""
    pairs = [(i + j, i, p, v) for i, p in enumerate(places) for j, v in enumerate(values)]
    return [(p, v) for *_, p, v in sorted(pairs, key=lambda x: x[:2])]


def unbound_insertions(
    fn: ast.AST,
    lines: list[str],
    mod: ast.Module,
    scope: set[str],
    local_names: set[str],
    blocks: list,
    fits,
    cls: ast.ClassDef | None = None,
) -> list[tuple[int, str, str, ast.stmt | None, str]]:
    """(line index, indent, statement, lone `pass` it replaces or None, description) for each unbound read, each
    attribute of its class `cls` read and never set (in `__init__`) and each lone `pass` of `fn`; `fits(value)`
    says whether a value reads only names of `scope`."""
    funcs = {n.name for n in mod.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    reads = first_reads(fn)
    # the functions this one already calls first, then the pure builtins, then the module's other functions,
    # the ones it calls most first (a helper called all over the module is the likeliest to be called here)
    calls = Counter(n.func.id for n in ast.walk(mod) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name))
    callees = (
        sorted((funcs | set(CALLS)) & reads.keys())
        + sorted(set(CALLS) - reads.keys())
        + sorted(funcs - reads.keys(), key=lambda f: (-calls[f], f))
    )
    builtin, repeats = scope - local_names - module_names(mod), repeated(mod)
    out = []
    for name, line in sorted(reads.items(), key=lambda kv: kv[1]):
        if name in scope:
            continue
        firsts = _aliases(name, local_names) + _module_values(mod, name)
        values = _grammar(name, firsts, scope - builtin, local_names, callees, repeats)
        values = [v for v in values if fits(v)]
        places = places_around(blocks, line, lines)
        # the empty value its uses imply, at every place, before the rest of the grammar
        implied = typed_literal(fn, name)  # one walk of fn, not one per value
        typed = [v for v in values if v == implied]
        pairs = [(p, v) for v in typed for p in places] + _diagonal(places, [v for v in values if v not in typed])
        for (at, indent), v in pairs:
            out.append((at, indent, f"{name} = {v}\n", None, f"bind unbound `{name}` at line {at + 1}: {v}"))
    if fn.name == "__init__" and fn.body:
        top = fn.body
        indent = lines[top[0].lineno - 1][: top[0].col_offset]
        places = [s.lineno - 1 for s in top] + [top[-1].end_lineno]  # __init__'s last gap too: it returns None
        for attr in unset_attributes(cls, mod):
            values = _grammar(attr, _module_values(mod, attr), scope - builtin, local_names, callees)[:MAX_ATTR_VALUES]
            for at, v in _diagonal(places, [v for v in values if fits(v)]):
                why = f"bind unset `self.{attr}` at line {at + 1}: {v}"
                out.append((at, indent, f"self.{attr} = {v}\n", None, why))
    # a return's names: the function's locals, and the module and builtin names it already reads
    names = local_names | (reads.keys() & scope)
    returns = None
    # a lone pass may also have been `v = f(v)`: a name of the function passed through another of its names
    passes = [f"{v} = {f}({v})" for v in sorted(local_names) for f in sorted(local_names) + callees if f != v]
    for body, _top in blocks:
        if len(body) == 1 and isinstance(body[0], ast.Pass):
            if returns is None:
                returns = [v for v in _grammar("", _module_values(mod, None), names, local_names, callees) if fits(v)]
            at, indent = body[0].lineno - 1, lines[body[0].lineno - 1][: body[0].col_offset]
            out += [(at, indent, f"return {v}\n", body[0], f"`pass` -> `return {v}` at line {at + 1}") for v in returns]
            out += [(at, indent, f"{a}\n", body[0], f"`pass` -> `{a}` at line {at + 1}") for a in passes[:MAX_VALUES]]
    return out
