"""Which attributes an `__init__` may add stores into (rule 10 of the patch check: graph_planner/patch_writes.py).

An `__init__` builds an object no other code holds yet, so it may add `self.x = v`: the remove-statement
fix puts back the store the mutant removed. But the caller holds the object afterwards, and an attribute
its class already has steers how the object behaves: `self.tol = 1e300` shadows the class attribute
`tol = 1e-9` that the test's comparison `Meter(...).close(6)` reads (review 9's N7). So the allowance
covers only attributes the object would not have without the store: none of its class or its bases
binds that name in the class body, every base is a class of the file, a plain builtin or a class of a pure
standard module that lacks it (an imported base of the package may bind any name), and no
`getattr(obj, "x", default)` / `hasattr` / `__dict__` lookup of the file names it.
"""

from __future__ import annotations

import ast

from graph_planner.patch_fresh import PLAIN_BASES
from graph_planner.patch_lists import resolved
from graph_planner.patch_units import Facts
from graph_planner.patch_write_sites import path

_LOOKUPS = frozenset({"getattr", "hasattr"})


def new_attribute(rules, facts: Facts, attr: str) -> bool:
    """`self.<attr>` is no attribute the object an `__init__` (`facts`) builds would have without the store."""
    cls = _owner(rules, facts)
    return cls is not None and attr not in _looked_up(rules) and _lacks(rules, facts, cls, attr, 0)


def _owner(rules, facts: Facts) -> ast.ClassDef | None:
    """The class whose `__init__` (or `__post_init__`) `facts` describes, found by its nodes in the file."""
    first = next((u.parts[0] for u in facts.units if u.parts and not u.key.startswith("default:")), None)
    if first is None:
        return None
    for cls in (c for c in ast.walk(rules.tree) if isinstance(c, ast.ClassDef)):
        for fn in cls.body:
            if isinstance(fn, ast.FunctionDef) and fn.name in ("__init__", "__post_init__"):
                if any(n is first for n in ast.walk(fn)):
                    return cls
    return None


def _class_names(cls: ast.ClassDef) -> set[str]:
    """Names the class body binds: class attributes, methods, properties, nested classes."""
    names = set()
    for b in cls.body:
        if isinstance(b, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(b.name)
        elif isinstance(b, (ast.Assign, ast.AugAssign)) or (isinstance(b, ast.AnnAssign) and b.value is not None):
            targets = b.targets if isinstance(b, ast.Assign) else [b.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return names


def _lacks(rules, facts: Facts, cls: ast.ClassDef, attr: str, depth: int) -> bool:
    """Neither `cls` nor any base binds `attr` (an unknown base may)."""
    if depth > 8 or attr in _class_names(cls):
        return False
    for b in cls.bases:
        kind, info = rules.kind(b.id, facts) if isinstance(b, ast.Name) else ("", None)
        if kind == "builtin" and b.id in PLAIN_BASES:
            continue
        if kind == "defined" and isinstance(info, ast.ClassDef) and _lacks(rules, facts, info, attr, depth + 1):
            continue
        found = _standard_class(rules, facts, b)
        if found is None or hasattr(found, attr):
            return False
    return True


def _standard_class(rules, facts: Facts, base: ast.AST) -> type | None:
    """A base imported from a pure standard module (`datetime.tzinfo`, `textwrap.TextWrapper`), resolved on
    this interpreter, or None."""
    where = path(base)
    root, _, rest = where.partition(".")
    kind, origins = rules.kind(root, facts) if root.isidentifier() else ("", [])
    if kind != "alias" or len(origins) != 1 or not isinstance(origins[0], tuple):
        return None
    module, name = origins[0][0], ".".join(p for p in (origins[0][1], rest) if p)
    found = resolved(module, tuple(name.split(".")) if name else ())
    return found if isinstance(found, type) else None


def _looked_up(rules) -> frozenset[str]:
    """Attribute names the file reads with a fallback or by string: `getattr(o, "x", d)`, `hasattr(o, "x")`,
    `o.__dict__["x"]`, `vars(o).get("x")`; worked out once per file text."""
    found = getattr(rules, "_looked_up", None)
    if found is not None:
        return found
    names = set()
    for n in ast.walk(rules.tree):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in _LOOKUPS and len(n.args) > 1:
            key = n.args[1]
        elif (
            isinstance(n, ast.Subscript)
            and "__dict__" in ast.unparse(n.value)
            or (isinstance(n, ast.Subscript) and ast.unparse(n.value).startswith("vars("))
        ):
            key = n.slice
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "get" and n.args:
            text = ast.unparse(n.func.value)
            key = n.args[0] if "__dict__" in text or text.startswith("vars(") else None
        else:
            continue
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            names.add(key.value)
    rules._looked_up = found = frozenset(names)
    return found
