"""Names as Python resolves them, for the patch check (graph_planner/patch_check.py).

* `outer_functions`: every function not nested in another function (methods included), with its
  qualified name (`Class.method`, `func`);
* `function_scopes`: per outermost function, the names some scope inside it (its own, a comprehension's,
  a lambda's, a nested function's or class's) reads as a global or builtin, read from the standard
  library's `symtable`, so a name bound in a comprehension or lambda stays local to that scope only;
* `module_bindings`: how each module-level name is bound (a top-level def or class, an assignment, an
  import, or anything else), so the check can tell a name the file defines once from one that is
  "whatever it might be" at run time;
* `file_uses`: the dotted chains, attribute names and called names a file uses.
"""

from __future__ import annotations

import ast
import symtable
from dataclasses import dataclass, field

FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
# Nodes that open a scope of their own: their insides bind nothing at module level (but a walrus in a
# comprehension does, see _module_walk).
_SCOPES = (*FUNCTIONS, ast.Lambda, ast.ClassDef)
_ANONYMOUS = frozenset({"listcomp", "setcomp", "dictcomp", "genexpr", "lambda"})
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def outer_functions(tree: ast.AST) -> list[tuple[str, ast.AST]]:
    """(qualified name, node) of every function not nested in another function, in source order."""
    out: list[tuple[str, ast.AST]] = []
    todo: list[tuple[ast.AST, str]] = [(tree, "")]
    while todo:
        node, prefix = todo.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, FUNCTIONS):
                out.append((prefix + child.name, child))
            elif isinstance(child, ast.ClassDef):
                todo.append((child, f"{prefix}{child.name}."))
            else:
                todo.append((child, prefix))
    return sorted(out, key=lambda qf: (qf[1].lineno, qf[1].col_offset))


@dataclass
class Scope:
    """What the scopes inside one outermost function (or class) resolve."""

    globals: set[str] = field(default_factory=set)  # read as a global or builtin somewhere inside
    locals: set[str] = field(default_factory=set)  # bound (or a parameter, or free) somewhere inside
    declared: set[str] = field(default_factory=set)  # named in a `global` or `nonlocal` statement
    # local in some scope inside and global in none: where the write rule (graph_planner/patch_writes.py)
    # may call a name fresh (every binding of it, in every scope, is then of that one name or of another local)
    own: set[str] = field(default_factory=set)


def _subtree(table: symtable.SymbolTable) -> list[symtable.SymbolTable]:
    out, todo = [], [table]
    while todo:
        t = todo.pop()
        out.append(t)
        todo.extend(t.get_children())
    return out


def _scope(table: symtable.SymbolTable) -> Scope:
    scope = Scope()
    for t in _subtree(table):
        for s in t.get_symbols():
            name = s.get_name()
            if s.is_referenced() and s.is_global():
                scope.globals.add(name)
            if s.is_local() or s.is_parameter() or s.is_free() or s.is_imported():
                scope.locals.add(name)
            if s.is_declared_global() or s.is_nonlocal():
                scope.declared.add(name)
    # local (or a parameter, or a cell) somewhere inside and a global in no scope inside: a comprehension's
    # `[X for X in ...]` beside a module's X read outside it is not one name
    read_global = {s.get_name() for t in _subtree(table) for s in t.get_symbols() if s.is_global()}
    scope.own = scope.locals - read_global - scope.declared
    return scope


def function_scopes(text: str) -> tuple[dict[tuple[str, int], Scope], dict[tuple[str, int], Scope]]:
    """({(qualified name, def line): Scope} of outermost functions, the same of classes) of a source text.

    A class's Scope covers its body and nested classes, not its methods (they are outermost functions)."""
    functions: dict[tuple[str, int], Scope] = {}
    classes: dict[tuple[str, int], Scope] = {}
    todo = [(symtable.symtable(text, "<patched>", "exec"), "", None)]
    while todo:
        table, prefix, owner = todo.pop()
        for child in table.get_children():
            kind = child.get_type()
            kind = getattr(kind, "value", kind)  # an enum from Python 3.13, a str before
            qual = prefix + child.get_name()
            if kind == "function" and child.get_name() in _ANONYMOUS and owner is not None:
                merged = _scope(child)  # a comprehension or lambda in a class body belongs to the class
                owner.globals |= merged.globals
                owner.locals |= merged.locals
            elif kind == "function":
                functions[(qual, child.get_lineno())] = _scope(child)
            elif kind == "class":
                own = Scope()
                for s in child.get_symbols():
                    if s.is_referenced() and s.is_global():
                        own.globals.add(s.get_name())
                    if s.is_local():
                        own.locals.add(s.get_name())
                classes[(qual, child.get_lineno())] = own
                todo.append((child, qual + ".", own))
            else:  # a type-parameter or annotation scope (3.12+): look through it
                todo.append((child, prefix, owner))
    return functions, classes


@dataclass
class Binding:
    """One way a module-level name gets its value."""

    kind: str  # "def", "class", "assign" (a plain `NAME = value` at top level), "import", "other"
    node: ast.AST | None = None  # the def / class / assigned value
    # imports: (top module, imported name or "", a `from` import, module path or "" when relative)
    origin: tuple[str, str, bool, str] | None = None


def _import_bindings(node: ast.Import | ast.ImportFrom) -> list[tuple[str, Binding]]:
    out = []
    for a in node.names:
        if isinstance(node, ast.Import):
            top = a.name.split(".")[0]
            path = a.name if a.asname else top  # `import a.b` binds a, `import a.b as c` binds a.b
            out.append((a.asname or top, Binding("import", origin=(top, "", False, path))))
        elif a.name != "*":
            top = "." if node.level else (node.module or "").split(".")[0]
            path = "" if node.level else node.module or ""
            out.append((a.asname or a.name, Binding("import", origin=(top, a.name, True, path))))
    return out


def _module_walk(tree: ast.AST):
    """Nodes evaluated in module scope (not inside function, lambda or class bodies); inside
    comprehensions only the walrus targets, which bind in the enclosing scope."""
    todo = list(ast.iter_child_nodes(tree))
    while todo:
        node = todo.pop()
        if isinstance(node, _COMPREHENSIONS):
            todo += [n.target for n in ast.walk(node) if isinstance(n, ast.NamedExpr)]
            continue
        yield node
        if isinstance(node, _SCOPES):
            # decorators, defaults and a class's bases run in module scope; the bodies do not
            todo += [*getattr(node, "decorator_list", []), *getattr(node, "bases", []), *getattr(node, "keywords", [])]
            if not isinstance(node, ast.ClassDef):
                todo += [d for d in [*node.args.defaults, *node.args.kw_defaults] if d is not None]
            continue
        todo += ast.iter_child_nodes(node)


def module_bindings(tree: ast.Module) -> dict[str, list[Binding]]:
    """Every module-level name with each place that binds it. A top-level `def` / `class` / `NAME = value`
    is one binding of its kind; the same inside an `if` or `try`, a loop or `with` target, a `global`
    assignment in a function and any other binding construct count as "other"."""
    out: dict[str, list[Binding]] = {}
    counted: set[int] = set()  # Name targets of plain assignments: bound with their value
    top = {id(s) for s in tree.body}
    # what a loop target or an augmented assignment is made of: judged like an assigned value
    sources: dict[int, ast.AST] = {}
    for s in _module_walk(tree):
        if isinstance(s, ast.Assign) and not all(isinstance(t, ast.Name) for t in s.targets):
            for t in (t for target in s.targets for t in ast.walk(target)):
                if isinstance(t, ast.Name):  # `A, B = range(2)`: each is made of the value
                    sources[id(t)] = s.value
        if isinstance(s, (ast.For, ast.AsyncFor, ast.AugAssign)):
            for t in ast.walk(s.target):
                if isinstance(t, ast.Name) and isinstance(s, ast.AugAssign):  # `x += v`: x + v
                    sources[id(t)] = ast.BinOp(ast.Name(t.id, ast.Load()), ast.Add(), s.value)
                elif isinstance(t, ast.Name):  # a loop target: an element of the iterable
                    sources[id(t)] = s.iter
    for s in _module_walk(tree):
        if isinstance(s, (ast.Assign, ast.AnnAssign)) and s.value is not None:
            targets = s.targets if isinstance(s, ast.Assign) else [s.target]
            if all(isinstance(t, ast.Name) for t in targets):
                for t in targets:  # inside an if / try: "other", but its value is still judged
                    out.setdefault(t.id, []).append(Binding("assign" if id(s) in top else "other", s.value))
                    counted.add(id(t))
    for node in _module_walk(tree):
        bound: list[tuple[str, Binding]] = []
        if isinstance(node, (*FUNCTIONS, ast.ClassDef)):
            kind = ("class" if isinstance(node, ast.ClassDef) else "def") if id(node) in top else "other"
            bound.append((node.name, Binding(kind, node)))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound += _import_bindings(node)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)) and id(node) not in counted:
            bound.append((node.id, Binding("other", sources.get(id(node)))))
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.append((node.name, Binding("other")))
        elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
            bound.append((node.name, Binding("other")))
        elif isinstance(node, ast.MatchMapping) and node.rest:
            bound.append((node.rest, Binding("other")))
        for name, b in bound:
            out.setdefault(name, []).append(b)
    # a `global NAME` in any function makes every assignment to NAME there one more binding
    for node in ast.walk(tree):
        if isinstance(node, ast.Global):
            for name in node.names:
                out.setdefault(name, []).append(Binding("other"))
    return out


def file_uses(nodes: list[ast.AST]) -> tuple[set[str], set[str]]:
    """(every maximal dotted chain `a.b.c` and every attribute name as `.b`, names called or used as a
    class: `f(...)`, isinstance's second argument, an `except` clause) in code."""
    chains, callables, inner = set(), set(), set()
    for n in (x for node in nodes for x in ast.walk(node)):  # a parent before its children
        if isinstance(n, ast.Attribute):
            chains.add("." + n.attr)
            inner.add(id(n.value))
            if id(n) in inner:
                continue
            parts, x = [n.attr], n.value
            while isinstance(x, ast.Attribute):
                parts.append(x.attr)
                x = x.value
            if isinstance(x, ast.Name):
                chains.add(".".join([x.id, *reversed(parts)]))
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Name):
            callables.add(n.func.id)
            if n.func.id in ("isinstance", "issubclass") and len(n.args) == 2:
                cls = n.args[1]
                callables |= {e.id for e in [cls, *getattr(cls, "elts", [])] if isinstance(e, ast.Name)}
        elif isinstance(n, ast.ExceptHandler) and n.type is not None:
            callables |= {e.id for e in ast.walk(n.type) if isinstance(e, ast.Name)}
    return chains, callables


def free_names(expr: ast.AST) -> set[str]:
    """Names an expression reads from its enclosing scope: those bound by its own comprehensions and
    lambdas are local to them (a comprehension's first iterable and a lambda's defaults are not)."""
    if isinstance(expr, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
        gens, inner, bound = expr.generators, [], set()
        out = free_names(gens[0].iter)
        for k, g in enumerate(gens):
            bound |= {n.id for n in ast.walk(g.target) if isinstance(n, ast.Name)}
            inner += ([g.iter] if k else []) + g.ifs
        elts = [expr.key, expr.value] if isinstance(expr, ast.DictComp) else [expr.elt]
        return out | {n for e in inner + elts for n in free_names(e)} - bound
    if isinstance(expr, ast.Lambda):
        a = expr.args
        params = {x.arg for x in [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg] if x}
        defaults = [d for d in [*a.defaults, *a.kw_defaults] if d is not None]
        return {n for d in defaults for n in free_names(d)} | (free_names(expr.body) - params)
    if isinstance(expr, ast.Name):
        return {expr.id}
    return {n for c in ast.iter_child_nodes(expr) for n in free_names(c)}
