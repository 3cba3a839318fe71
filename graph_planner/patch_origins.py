"""What a local name may hold, and which objects are a library's (rule 10 of the patch check:
graph_planner/patch_writes.py).

An old write permits a new one on the same receiver path only while the path's root names the same objects:
the unpatched function stored `out["spread"] = r` into its parameter, so a patch that rebinds `out` to a
shared dict first (`out = limits()`) writes somewhere else under the same spelling (review 9's N3). So each
local name gets its origins, flow-insensitively: what every binding of it hands it (a parameter's caller, a
chain such as `limits()` or `table[]` with keys and arguments left out, a fresh object, a loop's iterable).
An old write's permission holds while no binding the old body lacks hands the path's root, or a local it is
bound from, anything but a fresh object.

A library object is a module-level name of the file bound to a call that is not a class of the file
(`PENDING = queue.Queue()`, `_TOL = contextvars.ContextVar(...)`): its methods are the library's, and a
list of mutators cannot be complete (`put`, `put_nowait`, `ContextVar.set`: review 9's N15, N18). So every
method of one called or handed on counts as a write unless it is on `READS`, a list of methods that only read.
"""

from __future__ import annotations

import ast
import re

from graph_planner.patch_fresh import fresh_value, unpacked
from graph_planner.patch_units import Facts, other_binding
from graph_planner.patch_write_sites import path

PARAM = "<param>"
FRESH = "<fresh>"

# Methods of builtin and standard-library objects that read and change nothing (dict, set, str, re's
# patterns and matches, logging's loggers, ContextVar.get, Queue's sizes). `get` is on it though
# `queue.Queue.get` takes an item: dict.get and ContextVar.get are the common reads.
READS = frozenset(
    "get keys values items copy count index union intersection difference symmetric_difference issubset "
    "issuperset isdisjoint startswith endswith find rfind format format_map join split rsplit splitlines strip "
    "lstrip rstrip lower upper casefold replace encode decode isdigit isalpha isspace match search fullmatch "
    "findall finditer sub subn group groups groupdict span start end expand most_common elements total qsize "
    "empty full is_set locked debug info warning warn error exception critical log isEnabledFor "
    "getEffectiveLevel getChild hasHandlers strftime isoformat timestamp date time timetuple weekday "
    "isoweekday total_seconds astimezone hex bit_length is_integer as_integer_ratio to_bytes tobytes tolist "
    "dumps loads iterencode raw_decode getvalue tell readable writable seekable fileno isatty "
    "__contains__ __getitem__ __len__ __iter__ __eq__ __hash__ __repr__ __str__".split()
)


def root_name(where: str) -> str:
    """The root name of a receiver path (`self` of `self.cache[]`, `limits` of `limits()`)."""
    found = re.match(r"[A-Za-z_]\w*", where)
    return found.group(0) if found else ""


def _value_origins(rules, facts: Facts, v: ast.AST) -> set[str]:
    """What value `v` may be: a fresh object, a chain's path, either branch of a conditional; any other
    expression by its kind and the chains it reads (a binop mutant keeps both)."""
    if isinstance(v, ast.IfExp):
        return _value_origins(rules, facts, v.body) | _value_origins(rules, facts, v.orelse)
    if isinstance(v, ast.BoolOp):
        return set().union(*(_value_origins(rules, facts, x) for x in v.values))
    if isinstance(v, ast.NamedExpr):
        return _value_origins(rules, facts, v.value)
    if fresh_value(rules, facts, v):
        return {FRESH}
    if isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id == "iter" and len(v.args) == 1:
        if rules.kind("iter", facts)[0] == "builtin":
            return _value_origins(rules, facts, v.args[0])  # an iterator's iter() is itself; a new one reads it
    if isinstance(v, (ast.Name, ast.Attribute, ast.Subscript, ast.Call)):
        return {path(v)}
    names = sorted({n.id for n in ast.walk(v) if isinstance(n, ast.Name)})
    return {f"<{type(v).__name__} {' '.join(names)}>"}


def _binding_origins(rules, facts: Facts, node: ast.Name) -> set[str]:
    """What the binding at `node` (a Name in a store or delete position) hands its name."""
    item = unpacked(facts, node)
    if item is not None:
        return _value_origins(rules, facts, item)  # `a, b = x, []`: `a` gets `x`
    p = facts.parent(node)
    head = ""
    while isinstance(p, (ast.Tuple, ast.List, ast.Starred)):  # unpacking: the whole value's origins
        p, head = facts.parent(p), "unpack "
    if isinstance(p, (ast.Assign, ast.AnnAssign, ast.NamedExpr)) and p.value is not None:
        return {head + o for o in _value_origins(rules, facts, p.value)}
    if isinstance(p, ast.AugAssign):
        return {"aug " + o for o in _value_origins(rules, facts, p.value)}
    if isinstance(p, (ast.For, ast.AsyncFor, ast.comprehension)):
        return {"item " + o for o in _value_origins(rules, facts, p.iter)}
    if isinstance(p, ast.withitem):
        return {"with " + o for o in _value_origins(rules, facts, p.context_expr)}
    return {f"<{type(p).__name__}>"}


def _direct(rules, facts: Facts) -> dict[str, set[str]]:
    """{local name: what each of its bindings hands it}, locals not followed; worked out once per Facts."""
    memo = facts.__dict__.get("_direct")  # per rules: an old body is judged against each new file
    if memo is not None and memo[0] is rules:
        return memo[1]
    direct: dict[str, set[str]] = {p: {PARAM} for p in facts.params}
    for u in facts.units:
        if u.key.startswith("default:"):
            name = u.key[8:].partition("=")[0]
            direct.setdefault(name, set()).update(_value_origins(rules, facts, u.parts[0]))
            continue
        for part in u.parts:
            for node in ast.walk(part):
                if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
                    direct.setdefault(node.id, set()).update(_binding_origins(rules, facts, node))
                elif (name := other_binding(node)) is not None:
                    direct.setdefault(name, set()).add(f"<{type(node).__name__}>")
    facts.__dict__["_direct"] = (rules, direct)
    return direct


def _aliased(rules, facts: Facts, name: str) -> set[str]:
    """The names other than locals that local `name` may hold as they are, through locals bound to one
    another as they are (`q = PENDING`, `given = out`): a walk over the bindings, each local once."""
    direct = _direct(rules, facts)
    todo, seen, found = [name], set(), set()
    while todo:
        local = todo.pop()
        if local in seen:
            continue
        seen.add(local)
        for o in direct.get(local, ()):
            if o in direct:
                todo.append(o)
            elif o.isidentifier():
                found.add(o)
    return found


_PREFIXES = ("unpack ", "aug ", "item ", "with ")


def _local_root(o: str, local: dict) -> tuple[str, str, str] | None:
    """(prefixes, local root, rest) of an origin whose root is a local name, else None."""
    head = ""
    while o.startswith(_PREFIXES):
        word = o.split(" ", 1)[0] + " "
        head, o = head + word, o[len(word) :]
    root = root_name(o)
    return (head, root, o[len(root) :]) if root and root in local else None


_GLOBAL = ("defined", "alias", "builtin")


def _names(facts: Facts) -> set[str]:
    """Every name the code reads or binds."""
    return {n.id for u in facts.units for p in u.parts for n in ast.walk(p) if isinstance(n, ast.Name)}


def same_origin(rules, old: Facts, new: Facts, where: str) -> bool:
    """The root of receiver path `where`, and every local it may be bound from, gets no binding in `new` that
    `old` lacks, other than a fresh object, another of those locals, or a value derived from the name's own
    (`seq = iter(seq)`, `s = s.strip()`). A name `old` reads but never binds, with no module-level or
    builtin meaning (the mutant removed its binding: a NameError), may be bound to anything: its old writes
    never ran (a forge would have to write exactly there)."""
    before, after = _direct(rules, old), _direct(rules, new)
    todo, seen = [root_name(where)], set()
    while todo:
        name = todo.pop()
        if name in seen or name not in after:
            continue
        seen.add(name)
        feeding = [_local_root(o, after) for o in after[name]]
        todo += [f[1] for f in feeding if f is not None]
        if name not in before and name in _names(old) and rules.kind(name, old)[0] not in _GLOBAL:
            continue  # read but never bound in the unpatched function (a NameError): its writes never ran
        for o in after[name] - before.get(name, set()):
            local = _local_root(o, after)
            # a fresh object, another local whose own bindings are judged here, or the name's own value
            # derived (`s = s.strip()`, `seq = iter(seq)`: it reaches what the old value reached)
            if o != FRESH and not (local is not None and local[0] == "" and (local[2] == "" or local[1] == name)):
                return False
    return True


def library_object(rules, facts: Facts, e: ast.AST) -> bool:
    """`e` may be a library object of the file (the module docstring): such a module-level name, or a local
    or parameter default that may hold one."""
    if not isinstance(e, ast.Name):
        return False
    if e.id in facts.own or e.id in facts.params:
        return any(_module_object(rules, facts, o) for o in _aliased(rules, facts, e.id))
    return _module_object(rules, facts, e.id)


def _module_object(rules, facts: Facts, name: str) -> bool:
    """A module-level name bound to a call of anything but a class of the file (whose methods rule 10 judges
    as helpers)."""
    if not name.isidentifier():
        return False
    kind, found = rules.kind(name, facts)
    value = found.value if isinstance(found, ast.Assign) else found
    if kind != "defined" or not isinstance(value, ast.Call):
        return False
    func = value.func
    if isinstance(func, ast.Name):
        called_kind, called = rules.kind(func.id, facts)
        return not (called_kind == "defined" and isinstance(called, ast.ClassDef))
    return True


def library_writes(rules, facts: Facts, n: ast.AST) -> list[tuple[str, ast.AST, str]]:
    """(kind, receiver, suffix) when `n` is a method of a library object called or handed on (`PENDING.put`,
    `map(_TOL.set, ...)`) that is not on `READS` (an in-place method on `MUTATORS` is node_writes')."""
    if not isinstance(n, ast.Attribute) or not isinstance(n.ctx, ast.Load) or n.attr in READS:
        return []
    parent = facts.parent(n)
    handed = isinstance(parent, (ast.Call, ast.keyword, ast.Assign, ast.NamedExpr, ast.Return, ast.Starred))
    if not handed and not isinstance(parent, (ast.List, ast.Tuple, ast.Lambda)):
        return []  # a data attribute read into an expression (`PENDING.maxsize + 1`)
    return [(n.attr, n.value, "")] if library_object(rules, facts, n.value) else []
