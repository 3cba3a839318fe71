"""The patch check's rules on state other code reads (graph_planner/patch_check.py states them): stores
into imported modules' attributes, and a type handed to a module-level object's `__eq__`. `rules` is the
file's FileRules (graph_planner/patch_helpers.py)."""

from __future__ import annotations

import ast

from graph_planner.patch_facts import Facts
from graph_planner.patch_forms import dotted


def _elements(e: ast.AST) -> list[ast.AST]:
    """The operand itself, or the elements of a tuple, list or set display (`x in (A, B)`)."""
    return list(e.elts) if isinstance(e, (ast.Tuple, ast.List, ast.Set)) else [e]


def type_handed_over(rules, facts: Facts, old: Facts | None) -> bool:
    """A new comparison (==, <, in...; not `is`) of a `type` value with a name the file binds at module
    level (or an attribute chain from one): that object's `__eq__`, or its metaclass's, is the file's
    code and may keep the type it is handed. (Constants, builtins and imported names are inert.)"""
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
                roots = {dotted(o).split(".")[0] for o in [cmp.left, *cmp.comparators] for o in _elements(o)}
                for root in roots - {""} - facts.locals - facts.params:
                    if rules.kind(root, facts)[0] in ("defined", "unknown"):
                        return True
    return False


def foreign_stores(rules, facts: Facts) -> set[str]:
    """Attribute chains the code assigns, augments or deletes that start at an import alias, or at a
    module-level name bound to one (`enc = json.encoder`): `json.encoder.encode_basestring_ascii = f`
    rewrote every JSON line the process wrote, a signed report included."""
    nodes = [n for u in facts.units for part in u.parts for n in ast.walk(part)]
    held = set()  # locals that may hold an imported object: `c = decimal.DefaultContext; c.prec = 1`
    while True:
        grown = held | {
            t.id
            for a in nodes
            if isinstance(a, (ast.Assign, ast.NamedExpr, ast.AnnAssign)) and a.value is not None
            for t in (a.targets if isinstance(a, ast.Assign) else [a.target])
            if isinstance(t, ast.Name) and _from_import(rules, a.value, facts, held)
        }
        if grown == held:
            break
        held = grown
    out = set()
    for n in nodes:
        chain = dotted(n) if isinstance(n, ast.Attribute) and not isinstance(n.ctx, ast.Load) else ""
        if chain and _from_import(rules, ast.Name(chain.split(".")[0], ast.Load()), facts, held):
            out.add(chain)
    return out


def _from_import(rules, value: ast.AST, facts: Facts, held: set[str]) -> bool:
    root = dotted(value).split(".")[0]
    if not root:
        return False
    if root in facts.locals or root in facts.params:
        return root in held
    return imported(rules, root, facts)


def imported(rules, name: str, facts: Facts) -> bool:
    """An import alias, or a module-level name bound to an attribute chain from one."""
    kind, info = rules.kind(name, facts)
    if kind == "alias":
        return True
    value = info if kind == "defined" else None
    root = dotted(value).split(".")[0] if isinstance(value, (ast.Name, ast.Attribute)) else ""
    return bool(root) and root != name and imported(rules, root, facts)
