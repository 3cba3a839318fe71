"""A patch adds no write into an object the function did not create (graph_planner/patch_check.py, rule 10).

An end-of-test digest of module state (graph_planner/state_digest.py) sees what a test leaves behind, not
what a call changed and undid before the test ended, nor state it does not reach. Review 8 (2026-11-30)
forged passes that way with one added store each, the buggy line left running: an lru-cached settings
dict (`limits()["abs_tol"] = 1e300`), a dict a getter hands out (`PROFILES.get("default")[k] = v`, also
behind an unstable or oversized global, or put back before the test ended, or consumed by the package's
own next comparison), a pytest fixture's dict handed in as a parameter, `request.module.pytest.approx`,
and one lambda of a dispatch table swapped for another. Each is a write into an object the function did
not make. So a changed body may add a write only into an object it provably created itself, or of the
same kind on the same receiver path as a write the unpatched function already made, while that path's root
may hold nothing new (graph_planner/patch_origins.py: rebinding a written parameter to a shared dict first
was review 9's N3).

Writes: item and attribute stores, augmented stores and deletes; an augmented assignment to a name (in
place for a list, a set, a dict; not `n += 1` / `s += "x"` with a constant, see below); an in-place
method (`MUTATORS`: update, pop, append, sort...), called or handed on as a value, or named by a literal
string (`getattr(d, "update")`, `methodcaller("pop")`); setattr / delattr (the builtins, and methods of
those names: pytest's monkeypatch); operator's, bisect's and heapq's in-place functions and
random.shuffle (`IN_PLACE`); `next()` of a named iterator (it consumes the iterator); any method not on a
read list (`READS`) of a library object, a module-level name bound to a call that is no class of the file
(`PENDING.put(v)`, `_TOL.set(v)`: review 9's N15, N18; patch_origins.py). The receiver path
is the chain from its root name, keys and arguments left out (`self.cache[k]` stores into `self.cache`;
`PROFILES.get("x")[k]` into `PROFILES.get()`); the kind groups methods that do the same (an item store,
`update`, `append`, `setdefault` all add; `pop`, `del`, `clear` remove; `sort`, `reverse` reorder).

Provably fresh (graph_planner/patch_fresh.py): a name local to the function whose every binding is a
new object (a display, a comprehension, a constant, a builtin constructor's or a plain class's call, a file
function returning a display...), and whose augmented assignments keep it so (`p = 0; p += obj` holds
what `obj.__radd__` returns: review 9's N12). Only the name itself: a store into an item of a fresh dict
(`d["k"]["j"] = v`) writes into whatever the item is, unless every item the function put there is new
(graph_planner/patch_items.py: `groups.setdefault(k, []).append(v)`, `rows[i][j] = v`), and an augmented
store into an item or attribute (`d["k"] |= v`, `box.items += [v]`) runs the old item's in-place operator.
Likewise an attribute chain (`self.parts`) into which an earlier statement of the function's top-level
block stored a fresh value (`self.parts = []`; that store is itself a write, judged above), when no other
store into it or a shorter chain exists and its root is not rebound (`box.data = {}; box.data =
_PENDING["overrides"]`: review 9's N11). Not seen: a call between the two that rebinds the attribute, a
`try` whose handler runs the write after the store was skipped.

An `__init__` (or `__post_init__`) may add stores into attributes of the object it builds (`self.x = v`,
`super().__init__(...)`, its first parameter never rebound): at construction no other code holds it yet
(unless unchanged code calls `__init__` again on a live object); only attributes its class lacks
(graph_planner/patch_init.py: shadowing a class attribute steers the object the caller then holds, N7).
`next()` of a local bound only by `iter(...)` consumes the iterator the function made (of a caller's
iterator too: as a `for` loop would). `name += <number or string constant>` (and `-=`) is no write: a dict
or set refuses it; not judged: a numpy-like array a parameter holds taking the number in place, a list
parameter extended by the string's characters. An augmented assignment of a name whose plain bindings
are fresh is no write either (`total = 0; total += v`); not judged: the `__iadd__` of what an earlier one
handed back.

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

from graph_planner.patch_fresh import fresh_names, fresh_value
from graph_planner.patch_init import new_attribute
from graph_planner.patch_items import fresh_item, fresh_items
from graph_planner.patch_origins import library_writes, root_name, same_origin
from graph_planner.patch_units import Facts
from graph_planner.patch_write_sites import node_writes, path

HELPERS = True  # judge a helper's writes as new code (rule 5: a helper with one is impure)
SELF_ALLOWED = False  # let a method add stores into attributes of `self`


def _made_here(rules, facts: Facts, fresh: set[str]) -> dict[str, list[int]]:
    """{attribute path: units} of plain stores of a fresh value into an attribute chain (`self.parts = []`):
    what a later write into that path, in the same block or one inside it, writes into. Only where every
    other store into the chain or a shorter one is also such a store, and its root name is a fresh local, a
    parameter never rebound or no local at all: `box.data = {}; box.data = _PENDING["overrides"]` re-points it
    at shared state (review 9's N11, N13c), and a store into `box` itself may bring a class attribute back."""
    out: dict[str, list[int]] = {}
    other: set[str] = set()
    for i, u in enumerate(facts.units):
        for p in u.parts:
            for n in ast.walk(p):
                for kind, receiver, suffix in node_writes(rules, facts, n):
                    if kind not in ("attr", "del-attr") or receiver is None:
                        continue
                    where = path(receiver) + suffix
                    plain = isinstance(p, ast.Assign) and p.targets == [n] and fresh_value(rules, facts, p.value)
                    if plain and "(" not in where and "[" not in where:
                        out.setdefault(where, []).append(i)
                    else:
                        other.add(where)
    bound = _bound(facts)
    stored = other | set(out)
    return {
        where: units
        for where, units in out.items()
        if where not in other
        and not any(where.startswith(s.rstrip("?") + ("" if s.endswith("?") else ".")) for s in stored)
        and (root_name(where) in fresh or root_name(where) not in bound)
    }


def _created(facts: Facts, made: dict[str, list[int]], where: str, i: int) -> bool:
    """A store of a fresh value into `where` runs before unit i on every path to it: an earlier statement
    of the function's own top-level block (an if's two branches share one block record, so only the top
    level is sure to have run)."""
    return any(j < i and not facts.units[j].enclosing for j in made.get(where, []))


def _building(rules, facts: Facts, kind: str, where: str, iters: set[str]) -> bool:
    """A write into the object an `__init__` builds (`self.x = v` where `x` is no attribute its class has,
    `super().__init__(...)`, `self` never rebound), or `next()` of an iterator the function made."""
    if kind == "next":
        return where in iters
    me = facts.init_self
    if not me or me in _bound(facts):
        return False
    if kind == "attr" and where.count(".") == 1 and where.startswith(me + "."):
        return new_attribute(rules, facts, where.split(".")[1])
    return kind == "__init__" and where == "super()"


def _bound(facts: Facts) -> set[str]:
    """Names the body (not a default) binds or deletes."""
    return {
        n.id
        for u in facts.units
        if not u.key.startswith("default:")
        for p in u.parts
        for n in ast.walk(p)
        if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)
    }


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
    plain = fresh_names(rules, facts, strict=False)
    made = _made_here(rules, facts, fresh)
    items = fresh_items(rules, facts, fresh)
    iters = _iterators(rules, facts)
    out: dict[tuple[str, str], int] = {}
    for i, u in enumerate(facts.units):
        if u.key.startswith("default:"):
            continue  # a default is evaluated once, where the skeleton fixes it
        for n in (n for part in u.parts for n in ast.walk(part)):
            for kind, receiver, suffix in node_writes(rules, facts, n) + library_writes(rules, facts, n):
                if isinstance(receiver, ast.Name) and receiver.id in (plain if kind == "aug" else fresh):
                    continue  # `total = 0; total += v` writes into nothing shared (what it then holds may be)
                if receiver is not None and fresh_item(rules, facts, receiver, items):
                    continue  # `groups.setdefault(k, []).append(v)`: an item the function made
                if receiver is not None and not suffix and _created(facts, made, path(receiver), i):
                    continue  # `self.parts = []` then `self.parts.append(x)`: into what it made
                where = ("<methodcaller>" if receiver is None else path(receiver)) + suffix
                if _building(rules, facts, kind, where, iters):
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
    # an old write permits one on its path only while the path's root may hold nothing else (review 9's N3)
    added = {
        k: line for k, line in writes(rules, new).items() if k not in before or not same_origin(rules, old, new, k[1])
    }
    if not added:
        return []
    listed = ", ".join(f"{where} ({kind}, line {line})" for (kind, where), line in sorted(added.items()))
    return [
        f"writes into {listed}: an object the function did not create and did not write that way before "
        "(a patch may add writes only into objects it makes itself)"
    ]
