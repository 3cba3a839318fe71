"""The patch check's rule on functions the interpreter hands a class's class (graph_planner/patch_check.py
states it): their parameters may hold `type` itself or a class builder, which no changed body may keep.

`isinstance(int, SomeABC)` calls `SomeABC.__subclasshook__(type)`; a metaclass's methods and the
classmethods of an Enum without members get a class builder as their first parameter; a descriptor in a
metaclass's (or member-less Enum's) body gets it as `owner` in `__set_name__` and `__get__`, and a mixin's
`__init_subclass__` gets a member-less Enum that derives from it. Each reached an always-equal object in a
review. `class_builders` finds the class builders. `rules` is the file's FileRules (graph_planner/patch_helpers.py)."""

from __future__ import annotations

import ast

_METACLASSES = frozenset({"type", "ABCMeta", "EnumMeta", "EnumType"})
_ENUMS = frozenset({"Enum", "IntEnum", "Flag", "IntFlag", "StrEnum", "ReprEnum"})
# Methods Python calls with a class's class (`type` itself, when it checks a class).
CLASS_HOOKS = frozenset({"__subclasshook__", "__subclasscheck__", "__instancecheck__"})
# Methods Python calls with the class that owns or derives: a class builder where the file defines one.
OWNER_HOOKS = frozenset({"__set_name__", "__get__", "__init_subclass__", "__class_getitem__", "__mro_entries__"})


def class_builders(tree: ast.Module) -> set[int]:
    """ids of the file's classes that build classes: metaclasses, and Enums with no members (the functional
    API takes a namespace). Bases are read through the file's import aliases (`from enum import Enum as E`)
    and through its own classes (a class based on one of these is one too); a member is an assignment
    with a value that is not `nonmember(...)` (an annotation alone is none)."""
    aliases = {}
    for n in ast.walk(tree):
        if isinstance(n, ast.ImportFrom):
            aliases.update({a.asname or a.name: a.name for a in n.names})
    classes = [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]
    metas, enums = set(_METACLASSES), set(_ENUMS)

    def base_names(cls: ast.ClassDef) -> set[str]:
        names = {b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in cls.bases}
        return {aliases.get(x, x) for x in names} | names

    while True:  # a class based on a file metaclass (or Enum without members) is one too
        grown_m = metas | {c.name for c in classes if base_names(c) & metas}
        grown_e = enums | {c.name for c in classes if base_names(c) & enums and not _members(c)}
        if (grown_m, grown_e) == (metas, enums):
            break
        metas, enums = grown_m, grown_e
    return {id(c) for c in classes if base_names(c) & metas or (base_names(c) & enums and not _members(c))}


def _members(cls: ast.ClassDef) -> list[str]:
    """Names an Enum body surely makes members: assigned a value that is no descriptor (a call may build
    one, `label = Desc("x")`, which Enum keeps as a plain attribute) and not `nonmember(...)`; `auto()`
    and literals are members."""
    out = []
    for s in cls.body:
        if isinstance(s, (ast.Assign, ast.AnnAssign)) and s.value is not None:
            call = s.value.func if isinstance(s.value, ast.Call) else None
            if call is not None and (getattr(call, "id", None) or getattr(call, "attr", None)) != "auto":
                continue
            targets = s.targets if isinstance(s, ast.Assign) else [s.target]
            out += [t.id for t in targets if isinstance(t, ast.Name) and not t.id.startswith("_")]
    return out


def _short(qual: str) -> str:
    return qual.split(".")[-1]


def _params(fn: ast.AST) -> set[str]:
    a = fn.args
    return {x.arg for x in [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg] if x is not None}


def handed_a_class(rules) -> dict[str, str]:
    """{short name of a function of the file: why its parameters may hold type itself or a class builder}:
    the hooks, the methods of class builders, and (transitively) every function of the file one of these
    hands a parameter to (`__subclasshook__(cls, C): return _check(C)`)."""
    by_name: dict[str, list[ast.AST]] = {}
    for qual, fn in rules.functions:
        by_name.setdefault(_short(qual), []).append(fn)
    why = {name: "the interpreter hands it a class's class" for name in CLASS_HOOKS if name in by_name}
    for qual, fn in rules.functions:
        if id(rules.owner.get(id(fn))) in rules.builders:
            why[_short(qual)] = "a method of a class builder: its first parameter builds classes"
        elif rules.builders and _short(qual) in OWNER_HOOKS:
            why[_short(qual)] = "the file has a class builder, which Python may hand it as the owning class"
    todo = list(why)
    while todo:
        name = todo.pop()
        for fn in by_name.get(name, []):
            params = _params(fn)
            for call in (n for n in ast.walk(fn) if isinstance(n, ast.Call)):
                passed = [*call.args, *(k.value for k in call.keywords)]
                if not any(isinstance(a, ast.Name) and a.id in params for a in passed):
                    continue
                f = call.func
                callee = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
                if callee in by_name and callee not in why:
                    why[callee] = f"{name} hands it its parameters"
                    todo.append(callee)
    return why


def hook_reasons(rules, changed: list[str]) -> list[str]:
    """Why changing these functions (qualified names) is refused: one reason per function that is handed a
    class's class or a class builder (see handed_a_class)."""
    why = handed_a_class(rules)
    return [
        f"in {_short(q)}: changes a function whose parameters may hold type itself or a class builder "
        f"({why[_short(q)]})"
        for q in changed
        if _short(q) in why
    ]
