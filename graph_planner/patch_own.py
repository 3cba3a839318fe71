"""The file's own module state stays as the old function changed it (graph_planner/patch_check.py, rule 9).

A changed function runs before unchanged code that reads the file's module-level data: a tolerance in a
settings dict that the package's own `isclose` reads (the tests compare with it), a cache, a registry. A
patch that only widens that tolerance (`SETTINGS["abs_tol"] = 1e300`) scores with the bug in place
(forge F4). So each statement of a changed body that changes module state must be an old statement (the same
text key) whose inputs have the same backward data-flow slice (`Judge.same_slice`, as rule 8). "Changing
module state": an item or attribute store, augmented store or delete, an in-place method (`.update`,
`.setdefault`, `.append`..., also handed on as a value), `setattr` / `delattr`, operator's in-place
functions or `dict.update(SETTINGS, ...)` on a module-level name of the file (not an import: rule 7 judges
those), on a local or parameter that may hold one (however bound: `s = SETTINGS`, `(SETTINGS or {})[k]`,
a default), or on what a function of the file that returns one gives (`settings()["k"] = v`); and a plain
store to a name the function declares `global`. As new code (a helper, `old` None) every such statement
counts, so a helper that changes module state is impure: a body calls it only where the old one did.
"""

from __future__ import annotations

import ast

from graph_planner.patch_facts import Facts
from graph_planner.patch_forms import dotted
from graph_planner.patch_scope import FUNCTIONS
from graph_planner.patch_state import _library_value, held_locals, stores
from graph_planner.patch_values import immutable


def _module_name(rules, name: str, facts: Facts) -> bool:
    """A name the file binds at module level, other than by an import (rule 7's), to a value that may
    change in place (not a constant, a tuple of them or a string: `PATTERN % (MONTHS_PAT,)`)."""
    found = rules.bindings.get(name, [])
    if len(found) == 1 and found[0].kind == "assign" and immutable(found[0].node):
        return False
    return bool({b.kind for b in found} - {"import"})


def _getter_call(rules, call: ast.Call, facts: Facts) -> bool:
    """A call of a function or method of the file (by short name) that may return its module data."""
    return dotted(call.func).split(".")[-1] in own_returners(rules) or (
        isinstance(call.func, ast.Attribute) and call.func.attr in own_returners(rules)
    )


# rule 9's guarded objects, for patch_state's store finder: (module-level names, calls that return them)
OWN = (_module_name, _getter_call)


def own_returners(rules) -> frozenset[str]:
    """Short names of the file's functions and methods that may return its module data (`return SETTINGS`,
    through a local or another such function): a fixpoint, worked out once per file text."""
    found = getattr(rules, "_own_returners", None)
    if found is not None:
        return found
    rules._own_returners = found = frozenset()  # while it grows: what is known so far
    names = {id(n): n.name for n in ast.walk(rules.tree) if isinstance(n, FUNCTIONS)}
    while True:
        grown = set(found)
        for h, (facts, _) in rules.helpers.items():
            if h not in names or names[h] in grown:
                continue
            held = held_locals(rules, facts, OWN)
            values = [p.value for u in facts.units for p in u.parts if isinstance(p, ast.Return) and p.value]
            if any(_hands_on(rules, facts, v, held) for v in values):
                grown.add(names[h])
        if grown == set(found):
            return found
        rules._own_returners = found = frozenset(grown)


def _hands_on(rules, facts: Facts, value: ast.AST, held: set[str]) -> bool:
    """`value` may be the file's module data itself (not a copy, not a call's result but a getter's)."""
    return bool(_library_value(rules, value, facts, held, OWN))


def _global_stores(facts: Facts) -> set[tuple[int, ast.AST]]:
    """(unit, node) of plain stores and deletes of names the function declares `global`."""
    declared = {
        n for u in facts.units for p in u.parts for g in ast.walk(p) if isinstance(g, ast.Global) for n in g.names
    }
    return {
        (i, n)
        for i, u in enumerate(facts.units)
        for p in u.parts
        if not isinstance(p, ast.Global)
        for n in ast.walk(p)
        if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load) and n.id in declared
    }


def own_stores(rules, facts: Facts) -> dict[int, list[ast.AST]]:
    """{unit: the store nodes in it} of every statement that changes the file's module state."""
    out: dict[int, list[ast.AST]] = {}
    found = [(i, n) for _, i, n in stores(rules, facts, OWN)] + list(_global_stores(facts))
    for i, n in sorted(found, key=lambda t: (t[0], t[1].lineno, t[1].col_offset)):
        out.setdefault(i, []).append(n)
    return out


def own_reasons(judge, old: Facts | None, new: Facts) -> list[str]:
    """Why `new` changes the file's module state other than as `old` did (the module docstring); as new
    code (`old` None) every such statement is a reason."""
    found = own_stores(judge.rules, new)
    if not found:
        return []
    old_at: dict[str, set[int]] = {}
    for j in own_stores(judge.rules, old) if old is not None else {}:
        old_at.setdefault(old.units[j].key, set()).add(j)
    moved = set()
    for i in sorted(found):
        # the same statement, everything it reads computed by the same statements: the stored value too, or
        # a setter the task targets could store a forged value through its old statement (judging only the
        # receiver and key refused 20 of the first cut's 25 refused gold fixes instead of 25: little to win)
        inputs = [p for p in new.units[i].parts if not isinstance(p, ast.Constant)]
        seeds = old_at.get(new.units[i].key, set())
        if not any(judge.same_slice(new, old, None, i, inputs, {j}, False) for j in sorted(seeds)):
            moved.add(i)
    if not moved:
        return []
    lines = sorted({getattr(p, "lineno", 0) for k in moved for p in new.units[k].parts[:1]})
    return [
        f"changes the file's module state on lines {', '.join(map(str, lines))} (an item, attribute or global "
        "that other code reads: only an old statement may, with its inputs computed as before)"
    ]
