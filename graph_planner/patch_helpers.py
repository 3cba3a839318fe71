"""What one file's own code hands out, for the patch check (graph_planner/patch_check.py).

`FileRules` is built once per file text (patch_check caches it): how each module-level name is bound;
which of the file's functions, classes and single top-level assignments are "helpers" a changed body
may read, and at which level:

* pure: the helper would pass the check as new code, transitively through what it reads;
* impure: it reaches a capability name, a dunder or a capability chain: only where the old function
  already read it;
* gadget: it (or a helper it calls with computed arguments) calls a gadget with computed arguments,
  so a string a caller computes may become an attribute: only where the old function read it, and
  only with inputs that are literals or come from unchanged statements.

Both levels are greatest fixpoints (a helper is impure only if something in it, or in what it reads,
is), so recursion is fine. It also keeps, per function, the names and attributes the statements that
feed its return values mention (what a changed function's result can reach), and the same for the
inputs of every gadget in the file, so a screen only intersects sets.
"""

from __future__ import annotations

import ast
import builtins

from graph_planner.patch_facts import (
    Facts,
    _Builder,
    class_facts,
    free_names,
    function_facts,
    horizon,
    input_slice,
    module_facts,
    slice_units,
)
from graph_planner.patch_forms import type_returners
from graph_planner.patch_hooks import class_builders
from graph_planner.patch_policy import CAPABILITY_MODULES, DECORATORS, GADGET_ATTRS, Judge, literal
from graph_planner.patch_scope import FUNCTIONS, file_uses, function_scopes, module_bindings, outer_functions

# A class whose base is one of these builds classes when called (a metaclass), or is an Enum whose
# functional API (`E("X", {...})`) builds one when it has no members of its own.
_RETURNS = (ast.Return, ast.Yield, ast.YieldFrom, ast.Raise)


def _owners(tree: ast.AST) -> dict[int, ast.ClassDef]:
    """{id(def or class): the class whose own body defines it (maybe inside an if / try there)}."""
    out = {}
    for cls in ast.walk(tree):
        if isinstance(cls, ast.ClassDef):
            todo = list(cls.body)
            while todo:
                s = todo.pop()
                if isinstance(s, (*FUNCTIONS, ast.ClassDef)):
                    out[id(s)] = cls
                else:
                    todo.extend(ast.iter_child_nodes(s))
    return out


def _params(fn: ast.AST) -> tuple[list[str], str, set[str], str]:
    """(positional parameter names, *args name, keyword-only names, **kw name) of a function."""
    a = fn.args
    names = [x.arg for x in [*a.posonlyargs, *a.args]]
    return names, a.vararg.arg if a.vararg else "", {x.arg for x in a.kwonlyargs}, a.kwarg.arg if a.kwarg else ""


def _static(fn: ast.AST) -> bool:
    """A staticmethod: its first parameter is an ordinary argument."""
    return any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in fn.decorator_list)


def _constant(e: ast.AST) -> bool:
    """A value no caller steers: constants, containers of them."""
    if isinstance(e, (ast.Tuple, ast.List, ast.Set)):
        return all(_constant(x) for x in e.elts)
    if isinstance(e, ast.UnaryOp):
        return _constant(e.operand)
    return isinstance(e, ast.Constant)


class FileRules:
    """What the check knows of one file text: bindings, scopes, helpers and their levels."""

    def __init__(self, tree: ast.Module, text: str):
        self.tree = tree
        self.bindings = module_bindings(tree)
        self.star_capability = any(
            isinstance(n, ast.ImportFrom)
            and any(a.name == "*" for a in n.names)
            and (n.level == 0 and (n.module or "").split(".")[0] in CAPABILITY_MODULES)
            for n in ast.walk(tree)
        )
        # any star import: a name the file neither binds nor gets from the builtins may be a gadget from it
        # (`from operator import *` binds attrgetter unseen)
        self.star = any(isinstance(n, ast.ImportFrom) and any(a.name == "*" for a in n.names) for n in ast.walk(tree))
        self.scopes, self.class_scopes = function_scopes(text)
        self.functions = outer_functions(tree)
        # names the module may rebind at run time, unseen by its bindings (`globals()['f'] = Keeper(f)`,
        # `setattr(sys.modules[__name__], ...)`, a star import after a def): none of its names is plain
        self.dynamic = self.star or any(
            (isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in ("globals", "vars"))
            or (isinstance(n, ast.Attribute) and n.attr == "modules")
            for n in ast.walk(tree)
        )
        self.builders = class_builders(tree)
        self.owner = _owners(tree)
        # chains and callables outside the bodies, and of each body: the unpatched file's are these with
        # the changed bodies' own (the skeletons are equal)
        self.body_uses = [file_uses(fn.body) for _, fn in self.functions]
        saved = [fn.body for _, fn in self.functions]
        try:
            for _, fn in self.functions:
                fn.body = []
            self.outside_uses = file_uses([tree])
        finally:
            for (_, fn), body in zip(self.functions, saved):
                fn.body = body
        self.chains, self.callables = self.uses_with({})
        self.impure: set[int] = set()  # ids of helpers (def, class or assigned value nodes)
        self.gadgets: set[int] = set()
        self.impure_names: set[str] = set()  # module-level names an impure helper is bound to
        self.gadget_names: set[str] = set()
        self.impure_attrs: set[str] = set()  # names of impure methods and nested classes
        self.gadget_attrs: set[str] = set()
        self._unknown: dict[str, bool] = {}
        self.helpers = self._helper_facts()
        self.type_returners = type_returners(tree)
        # `type(x)(x, ...)` may instantiate any of the file's classes: harmless only while none of them
        # steers a gadget. Judged optimistically first; if a class then steers, everything again without.
        self.clone_safe = True
        self._fixpoints()
        classes = {id(n) for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}
        if self.gadgets & classes:
            self.clone_safe = False
            self._fixpoints()
        self.module = module_facts(tree, {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)})
        self._slices()

    def may_give_type(self, ident: str) -> bool:
        """A gadget or helper site whose result may be type itself: the builtin, or a function of the file
        that returns what a `type` call gave."""
        return ident in ("type", ".__class__") or ident.lstrip(".") in self.type_returners

    def uses_with(self, bodies: dict[int, list[ast.stmt]]) -> tuple[set[str], set[str]]:
        """(chains, callables) of this file with the bodies of some functions (by index) replaced."""
        chains, callables = set(self.outside_uses[0]), set(self.outside_uses[1])
        for k, uses in enumerate(self.body_uses):
            c, n = file_uses(bodies[k]) if k in bodies else uses
            chains |= c
            callables |= n
        return chains, callables

    def kind(self, name: str, facts: Facts) -> tuple[str, object]:
        """("alias", origins) | ("param", status) | ("builtin", None) | ("defined", node) |
        ("literal", value) | ("unknown", None). "defined": one top-level def, class or assignment."""
        if name in facts.aliases:
            return "alias", facts.aliases[name]
        if name in facts.smuggled:
            return "param", facts.smuggled[name]
        found = self.bindings.get(name)
        if not found:  # a builtin, unless a star import from a capability module may bind it (os.open)
            return ("builtin", None) if hasattr(builtins, name) and not self.star_capability else ("unknown", None)
        if all(b.kind == "import" for b in found):
            return "alias", [b.origin for b in found]
        if len(found) == 1 and found[0].kind == "assign" and literal(found[0].node):
            return "literal", found[0].node
        if len(found) == 1 and found[0].kind in ("def", "class", "assign"):
            return "defined", found[0].node
        return "unknown", None

    def values(self, name: str) -> set[int]:
        """Ids of the helpers a module-level name may be bound to."""
        return {id(b.node) for b in self.bindings.get(name, []) if id(b.node) in self.helpers}

    def gadget_unknown(self, name: str) -> bool:
        """A name bound by more than one def / class / assignment that might hold a gadget: a binding with
        no value to judge (a loop target...), a gadget helper, or a value that reaches a gadget."""
        if name not in self._unknown:
            self._unknown[name] = False  # while judging its own value (`x = x + 1`): its other bindings decide
            judge = Judge(self, self.chains, self.callables, set())
            self._unknown[name] = bool(self.values(name) & self.gadgets) or any(
                (b.kind == "import" and b.origin[1] in GADGET_ATTRS)
                or (
                    b.kind == "other"
                    and not isinstance(b.node, (*FUNCTIONS, ast.ClassDef))  # a def / class is a helper
                    and (b.node is None or judge.expr_status(b.node) == "gadget")
                )
                for b in self.bindings.get(name, [])
            )
        return self._unknown[name]

    def _helper_facts(self) -> dict[int, tuple[Facts, set[int]]]:
        """{id(helper node): (its facts as new code, ids of its methods and nested classes)}."""
        out: dict[int, tuple[Facts, set[int]]] = {}
        class_locals: dict[int, set[str]] = {}
        for node in ast.walk(self.tree):
            if isinstance(node, ast.ClassDef):
                scope = self.class_scopes.get((self._qual(node), node.lineno))
                class_locals[id(node)] = scope.locals if scope else set()
                members = {i for i, c in self.owner.items() if c is node}
                out[id(node)] = (class_facts(node, scope.globals if scope else set(), class_locals[id(node)]), members)
        for qual, fn in self.functions:
            scope = self.scopes.get((qual, fn.lineno))
            owner = self.owner.get(id(fn))
            skip = class_locals.get(id(owner), set()) | DECORATORS if owner is not None else set()
            facts = function_facts(
                fn,
                scope.globals if scope else set(),
                scope.locals if scope else set(),
                True,
                skip,
                own=scope.own if scope else set(),
            )
            out[id(fn)] = (facts, set())
        for found in self.bindings.values():
            if len(found) == 1 and found[0].kind == "assign" and not literal(found[0].node):
                b = _Builder(free_names(found[0].node), set(), False)
                b.unit("value", [found[0].node], (), set())
                out[id(found[0].node)] = (b.f, set())
        return out

    def _qual(self, node: ast.AST) -> str:
        parts, x = [node.name], self.owner.get(id(node))
        while x is not None:
            parts.append(x.name)
            x = self.owner.get(id(x))
        return ".".join(reversed(parts))

    def _sets(self) -> None:
        """The names and attribute names of impure and gadget helpers, from the helper id sets."""
        names = {id(n): n.name for n in ast.walk(self.tree) if isinstance(n, (*FUNCTIONS, ast.ClassDef))}
        self.impure_names = {n for n in self.bindings if self.values(n) & self.impure}
        self.gadget_names = {n for n in self.bindings if self.values(n) & self.gadgets}
        self.impure_attrs = {names[i] for i in self.owner if i in self.impure}
        self.gadget_attrs = {names[i] for i in self.owner if i in self.gadgets}
        self._unknown = {}

    def _fixpoints(self) -> None:
        """Impure: a violation as new code, or reading an impure helper. Gadget: a parameter that
        steers a gadget's input (its data-flow slice reaches a gadget call, counting gadget helpers'
        steering arguments found so far); a class steers through __init__ / __new__, or builds classes.
        Both only grow, so each ends."""
        judge = Judge(self, self.chains, self.callables, set())
        nodes = {id(n): n for n in ast.walk(self.tree) if isinstance(n, (*FUNCTIONS, ast.ClassDef))}
        self.members: dict[str, set[int]] = {}
        for i in self.owner:
            self.members.setdefault(nodes[i].name, set()).add(i)
        deps = {}
        for h, (facts, members) in self.helpers.items():
            by_name = set().union(*(self.values(n) for n, *_ in facts.name_refs))
            by_attr = set().union(*(self.members.get(a, set()) for a, *_ in facts.attr_refs))
            deps[h] = members | by_name | by_attr
        impure = {h for h, (facts, _) in self.helpers.items() if judge.violations(None, facts)}
        while (grown := impure | {h for h in self.helpers if deps[h] & impure}) != impure:
            impure = grown
        self.impure = impure
        # steering: helper id -> parameter names ("*" for every argument)
        self.params = {h: _params(n) for h, n in nodes.items() if isinstance(n, FUNCTIONS)}
        builders = class_builders(self.tree)
        self.steer: dict[int, set[str]] = {h: {"*"} for h in self.helpers if h in builders}
        for h in self.helpers:
            if h not in nodes:  # an assigned value: a gadget when it reaches one
                self._sets()
                if judge.expr_status(self.helpers[h][0].units[0].parts[0]) == "gadget":
                    self.steer[h] = {"*"}
        # helpers that steer a gadget the boot script's name guard does not judge at run time (see
        # Judge.outliving): their sites' slices count changes made after them to outliving objects
        self.deep: set[int] = set(self.steer)
        # helpers that steer a gadget the name guard does not judge (Judge.judged_at_run): a value a
        # changed function returns may reach the others, whose names the guard judges by value
        self.unjudged: set[int] = set(self.steer)
        unknown = {n for n in self.bindings if self.kind(n, Facts())[0] == "unknown"}
        while True:
            self.gadgets = {h for h, st in self.steer.items() if st}
            self.impure |= self.gadgets
            self._sets()
            found = {h: set(st) for h, st in self.steer.items()}
            deep, unjudged = set(self.deep), set(self.unjudged)
            for h, (facts, _) in self.helpers.items():
                if h not in self.params:
                    continue
                positional, star, kwonly, kwarg = self.params[h]
                params = {*positional, star, *kwonly, kwarg} - {""}
                if h in self.owner and positional and not _static(nodes[h]):
                    params.discard(positional[0])  # self / cls: what it holds is object state, not judged
                for ident, node, i, _, checked in judge.sites(facts):
                    inputs = judge.inputs(facts, ident, node)
                    if not checked or (
                        inputs is not None and all(_constant(e) or judge.vetted(e, facts, None) for e in inputs)
                    ):
                        continue
                    outliving = judge.outliving(facts, ident, node)
                    _, reach, _ = input_slice(facts, i, inputs, facts.locals | unknown, node, outliving)
                    found.setdefault(h, set()).update(reach & params)
                    if reach & params and outliving:
                        deep.add(h)
                    if reach & params and not judge.judged_at_run(facts, ident, node):
                        unjudged.add(h)
            for cls in (n for n in nodes.values() if isinstance(n, ast.ClassDef)):
                for i, owner in self.owner.items():
                    if owner is cls and nodes[i].name in ("__init__", "__new__") and found.get(i):
                        found.setdefault(id(cls), set()).update(found[i] - set(self.params[i][0][:1]))
                    elif owner is cls and nodes[i].name == "__post_init__" and found.get(i):
                        found.setdefault(id(cls), set()).add("*")  # a dataclass's __init__ hands it InitVars
                    if owner is cls and i in deep and found.get(i):
                        deep.add(id(cls))
                    if owner is cls and i in unjudged and found.get(i):
                        unjudged.add(id(cls))
            if found == self.steer and deep == self.deep and unjudged == self.unjudged:
                break
            self.steer, self.deep, self.unjudged = found, deep, unjudged
        self.gadgets = {h for h, st in self.steer.items() if st}
        self.impure |= self.gadgets
        self._sets()

    def callees(self, ident: str) -> list[int]:
        """The helpers a gadget site's identity may call (none for a builtin or library gadget)."""
        if ident.startswith("."):
            return sorted(self.members.get(ident[1:], set()) & self.gadgets)
        return sorted(self.values(ident) & self.gadgets)

    def steered_args(self, callees: list[int], call: ast.Call, method: bool) -> list[ast.AST] | None:
        """The arguments of `call` that may reach a steering parameter of one of the callees (both ways
        of binding a method's arguments when called through an attribute); None: all of them."""
        if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
            return None
        out: list[ast.AST] = []
        for h in callees:
            steer = self.steer.get(h, {"*"})
            if "*" in steer:
                return None
            if h in self.params:
                (positional, star, kwonly, kwarg), offsets = self.params[h], [0, 1] if method else [0]
            else:  # a class: its __init__ / __new__ without self
                inits = [self.params[i] for i, c in self.owner.items() if id(c) == h and i in self.params]
                positional, star, kwonly, kwarg = max(inits, key=lambda p: len(p[0]), default=([], "", set(), ""))
                positional, offsets = positional[1:], [0]
            for off in offsets:
                for k, a in enumerate(call.args):
                    name = positional[k + off] if k + off < len(positional) else star
                    if name in steer or not name:
                        out.append(a)
            named = set(positional) | kwonly
            out += [k.value for k in call.keywords if k.arg in steer or (k.arg not in named and kwarg in steer)]
        return out

    def _slices(self) -> None:
        """Per outermost function: the mentions of the slice of its return / yield / raise statements
        (`returns`, by short name), and of each gadget's inputs with whether its slice counts outliving
        objects (`site_mentions`, by index)."""
        judge = Judge(self, self.chains, self.callables, set())
        unknown = {n for n in self.bindings if self.kind(n, Facts())[0] == "unknown"}
        self.returns: dict[str, set[str]] = {}
        self.site_mentions: dict[int, list[tuple[set[str], bool]]] = {}  # (mentions, outliving)
        code = [(k, self.helpers[id(fn)][0]) for k, (_, fn) in enumerate(self.functions)] + [(-1, self.module)]
        for k, facts in code:
            keep = facts.locals | unknown
            if k >= 0:
                seeds = {
                    i
                    for i, u in enumerate(facts.units)
                    if any(isinstance(n, _RETURNS) for p in u.parts for n in ast.walk(p))
                }
                short = self.functions[k][0].split(".")[-1]
                for i in seeds:  # each return's own slice: what may run before it
                    units, _ = slice_units(facts, set(facts.units[i].names), set(), keep, horizon(facts, i))
                    self.returns.setdefault(short, set()).update(
                        m for j in units | {i} for m in facts.units[j].names | facts.units[j].attrs
                    )
            mentions = []
            for ident, node, i, _, checked in judge.sites(facts):
                inputs = judge.inputs(facts, ident, node)
                if checked and not (
                    inputs is not None and all(_constant(e) or judge.vetted(e, facts, None) for e in inputs)
                ):
                    outliving = judge.outliving(facts, ident, node)
                    # module code runs once, at import: nothing after a gadget there runs before it
                    slice_ = input_slice(facts, i, inputs, keep, node, outliving and k >= 0)
                    mentions.append((slice_[2], outliving, judge.judged_at_run(facts, ident, node)))
            self.site_mentions[k] = mentions
