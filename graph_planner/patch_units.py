"""The records the patch check builds of a piece of code: `Unit` per statement, `Facts` per body.

They sit below everything that reads them (graph_planner/patch_forms.py, patch_slice.py) and the module
that fills them in (graph_planner/patch_facts.py, which re-exports both), so none of those imports another
back.
"""

from __future__ import annotations

import ast
import functools
from collections import Counter
from dataclasses import dataclass, field


def other_binding(node: ast.AST) -> str | None:
    """The name a binding node other than `ast.Name` binds (a parameter, an except or match capture, an
    import's first part), else None: what the binding walks count as bound by something they do not follow."""
    if isinstance(node, ast.arg):
        return node.arg
    if isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and node.name:
        return node.name
    if isinstance(node, ast.MatchMapping) and node.rest:
        return node.rest
    if isinstance(node, ast.alias):
        return (node.asname or node.name).split(".")[0]
    return None


@dataclass
class Unit:
    """One statement, or the header of a compound statement (its test, target, items, handler type)."""

    key: str  # the statement's syntax tree as text: equal keys are the same statement
    enclosing: tuple[int, ...]  # ids of the compound statements around it, outermost first
    names: set[str] = field(default_factory=set)
    attrs: set[str] = field(default_factory=set)
    parts: list[ast.AST] = field(default_factory=list)
    path: tuple[str, ...] = ()  # the headers of the blocks around it, outermost first
    binds: set[str] = field(default_factory=set)  # names it may bind or change (see patch_slice.binds)
    mutates: set[str] = field(default_factory=set)  # names whose object it may change in place
    reads: set[str] = field(default_factory=set)  # names it reads
    jumps: bool = False  # holds a break, continue, return or raise


@dataclass
class Facts:
    """What one function body (or other stretch of code) reads and uses; see the module docstring."""

    reads: dict[str, set[str]] = field(default_factory=dict)  # global name -> forms
    name_refs: list[tuple[str, str, ast.AST, int]] = field(default_factory=list)  # (name, form, node, unit)
    attr_refs: list[tuple[str, ast.Attribute, int]] = field(default_factory=list)  # (attr, node, unit)
    words: set[str] = field(default_factory=set)
    dstrings: set[str] = field(default_factory=set)  # string constants with a dunder word
    strings: set[str] = field(default_factory=set)
    kinds: Counter = field(default_factory=Counter)
    imports: Counter = field(default_factory=Counter)
    declared: set[str] = field(default_factory=set)
    aliases: dict[str, list[tuple[str, str, bool]]] = field(default_factory=dict)  # local import aliases
    smuggled: dict[str, str] = field(default_factory=dict)  # parameters with an impure default
    params: set[str] = field(default_factory=set)  # the function's own parameters
    star: set[str] = field(default_factory=set)  # its `*args` / `**kwargs` parameters: fresh per call
    own: set[str] = field(default_factory=set)  # names local to the function's own scope (symtable's)
    init_self: str = ""  # an `__init__` / `__post_init__`'s first parameter: the object it builds
    locals: set[str] = field(default_factory=set)
    module: bool = False  # module code: runs once, no caller hands it objects
    units: list[Unit] = field(default_factory=list)
    headers: dict[int, int] = field(default_factory=dict)  # compound statement id -> its header unit
    wholes: set[int] = field(default_factory=set)
    loops: dict[int, bool] = field(default_factory=dict)  # loops among the wholes: only their jumps count
    ends: dict[int, int] = field(default_factory=dict)  # compound statement id -> its last unit
    defs: set[int] = field(default_factory=set)  # nested defs: their bodies run later
    index: dict | None = None  # patch_slice's index of the units per horizon, built on first use
    parents: dict[int, ast.AST] = field(default_factory=dict)

    @functools.cached_property
    def constants(self) -> dict[str, list[ast.AST]]:
        """{local name: its values} of names whose every binding is a plain `name = <value>` or a loop over a
        tuple / list display (no parameter, other loop, with, except, import, walrus, augmented, unpacking
        or `global` binding of that name)."""
        values: dict[str, list[ast.AST]] = {}
        other: set[str] = set(self.declared) | self.params
        for u in self.units:
            if u.key.split(":")[0] in ("except", "FunctionDef", "AsyncFunctionDef", "ClassDef", "default"):
                other |= u.names | u.binds  # a handler's name, a nested def or class, a parameter
            for part in u.parts:
                for node in ast.walk(part):
                    p = self.parent(node)
                    if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
                        loop = isinstance(p, (ast.For, ast.AsyncFor, ast.comprehension)) and p.target is node
                        if isinstance(p, ast.Assign) and p.targets == [node]:
                            values.setdefault(node.id, []).append(p.value)
                        elif loop and isinstance(p.iter, (ast.Tuple, ast.List, ast.Set)):
                            values.setdefault(node.id, []).extend(p.iter.elts)  # `for f in ("a", "b")`
                        else:
                            other.add(node.id)
                    elif (name := other_binding(node)) is not None:
                        other.add(name)
        return {n: v for n, v in values.items() if n not in other}

    @property
    def mentions(self) -> set[str]:
        """Every name and attribute name the code mentions."""
        return {n for u in self.units for n in u.names | u.attrs}

    def parent(self, node: ast.AST) -> ast.AST | None:
        """The node `node` is a child of (within the units' statements)."""
        return self.parents.get(id(node))

    def chain_top(self, node: ast.AST) -> ast.AST:
        """The outermost attribute of the dotted chain `node` heads (`os` in `os.path.join` -> the join)."""
        while isinstance(self.parent(node), ast.Attribute) and self.parent(node).value is node:
            node = self.parent(node)
        return node

    def call_of(self, node: ast.AST) -> ast.Call | None:
        """The call whose callee is `node`, if it is one."""
        p = self.parent(node)
        return p if isinstance(p, ast.Call) and p.func is node else None
