"""What a piece of code reaches, as the patch check judges it (graph_planner/patch_check.py).

`Facts` of a function body (or a class body, or module code) record, per statement ("unit"):

* every read of a name that resolves to a global or builtin, with the form of the read: a call
  `name(...)`, a dotted chain `name.a.b`, a value `f(name)`, or a harmless `type(x)` (compared, or asked
  for its `__name__`);
* dunder and introspection words (names, attributes, keyword names, parameters, format fields), string
  constants that contain `__`, all string constants;
* attribute names and every name a statement mentions (for the data-flow slices of gadget calls);
* counted statement kinds, import statements, `global` / `nonlocal` names.

`Unit`s carry the compound statements around them, so a slice can take in a whole loop or `try`.
"""

from __future__ import annotations

import ast

from graph_planner.patch_forms import (  # noqa: F401 - the words are part of this module's interface
    BENIGN_DUNDERS,
    COUNTED,
    DUNDER,
    INTROSPECTION,
    NAME_ATTRS,
    TRY_STAR,
    WHOLE,
    dunder_word,
    form,
    string_words,
    type_locals,
)
from graph_planner.patch_scope import free_names  # noqa: F401 - re-exported for the helpers and policy
from graph_planner.patch_slice import (  # noqa: F401 - re-exported for the policy
    binds,
    horizon,
    input_slice,
    loops_around,
    mutates,
    names_outside,
    slice_units,
)
from graph_planner.patch_units import Facts, Unit  # noqa: F401 - the types this module builds, re-exported


def _header(s: ast.stmt) -> tuple[list[ast.AST], list[list[ast.stmt]], str]:
    """(header parts, bodies, extra key text) of a compound statement; ([s], [], "") of a simple one."""
    if isinstance(s, (ast.If, ast.While)):
        return [s.test], [s.body, s.orelse], ""
    if isinstance(s, (ast.For, ast.AsyncFor)):
        return [s.target, s.iter], [s.body, s.orelse], ""
    if isinstance(s, (ast.With, ast.AsyncWith)):
        return list(s.items), [s.body], ""
    if isinstance(s, ast.Try) or s.__class__.__name__ == "TryStar":
        return [], [s.body, s.orelse, s.finalbody], ""
    if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return [*s.decorator_list, s.args, *([s.returns] if s.returns else [])], [s.body], s.name
    if isinstance(s, ast.ClassDef):
        return [*s.decorator_list, *s.bases, *s.keywords], [s.body], s.name
    if isinstance(s, ast.Match):
        return [s.subject], [], ""
    return [s], [], ""


class _Builder:
    """Builds Facts; `judged` are the names read as globals or builtins somewhere in the code."""

    def __init__(self, judged: set[str], local: set[str], class_body: bool):
        self.f = Facts(locals=set(local))
        self.judged = judged
        self.class_body = class_body  # dunder names assigned in a class body define its own attributes
        self.base_ids: set[int] = set()  # a class's bases and keyword values: read as "base"
        self.compounds: dict[int, ast.AST] = {}  # id -> compound statement
        self.decorators: set[int] = set()  # decorator references (`@curry`, `@x.setter`): fixed, applied once
        self.slots: set[int] = set()  # the strings of a class body's `__slots__` (`"__weakref__"`): declarations

    def unit(self, key: str, parts: list[ast.AST], enclosing: tuple[int, ...], names: set[str]) -> int:
        """Add one unit (a statement, or a compound statement's header) and read its nodes."""
        f = self.f
        path = tuple(f.units[f.headers[c]].key for c in enclosing if c in f.headers)
        f.units.append(Unit(key, enclosing, set(names), parts=list(parts), binds=set(names), path=path))
        i = len(f.units) - 1
        for c in enclosing:
            f.ends[c] = i
        f.units[i].binds |= binds(parts)
        guarded = any(
            isinstance(self.compounds.get(c), (ast.Try, ast.With, ast.AsyncWith, *TRY_STAR)) for c in enclosing
        )
        # a call through a local changes what it may hold: `add = parts.append` then `add(x)` changes parts
        through = {
            n.func.id for p in parts for n in ast.walk(p) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
        }
        f.units[i].mutates = mutates(parts) | (through & f.locals)
        nested = any(isinstance(self.compounds.get(c), (ast.FunctionDef, ast.AsyncFunctionDef)) for c in enclosing)
        if len(parts) == 1 and isinstance(parts[0], (ast.Return, ast.Raise)) and not guarded and not nested:
            f.units[i].binds = f.units[i].mutates = set()  # nothing of the function runs after it
        f.units[i].reads = {
            n.id
            for p in parts
            for n in ast.walk(p)
            if isinstance(n, ast.Name)
            and (isinstance(n.ctx, ast.Load) or isinstance(f.parents.get(id(n)), ast.AugAssign))
        }
        f.units[i].jumps = any(
            isinstance(n, (ast.Break, ast.Continue, ast.Return, ast.Raise)) for p in parts for n in ast.walk(p)
        )
        for part in parts:
            for node in ast.walk(part):
                for child in ast.iter_child_nodes(node):
                    f.parents[id(child)] = node
        for part in parts:
            for node in ast.walk(part):
                self.visit(node, i)
        return i

    def statements(self, stmts: list[ast.stmt], enclosing: tuple[int, ...], skip_defs: bool = False) -> None:
        """Units of a list of statements, recursing into blocks (a nested def's body unless `skip_defs`)."""
        for s in stmts:
            parts, bodies, extra = _header(s)
            if not bodies and not isinstance(s, (ast.Match, ast.Try)) and s.__class__.__name__ != "TryStar":
                self.unit(ast.dump(s), parts, enclosing, set())
                continue
            self.decorators |= {id(d) for d in getattr(s, "decorator_list", [])}
            key = type(s).__name__ + ":" + extra + "|".join(ast.dump(p) for p in parts)
            self.f.kinds[type(s).__name__] += isinstance(s, COUNTED)
            h = self.unit(key, parts, enclosing, set())
            if isinstance(s, (ast.For, ast.AsyncFor)):  # its header's parts are roots: Facts.constants asks
                self.f.parents[id(s.target)] = s  # the target's loop what it iterates over
            self.f.units[h].binds |= {extra} - {""}  # a nested def / class binds its name; it is no read of it
            self.f.headers[id(s)] = h
            if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.f.defs.add(id(s))
            if isinstance(s, WHOLE):
                self.f.wholes.add(id(s))
                self.f.loops[id(s)] = isinstance(s, (ast.For, ast.AsyncFor, ast.While))
            inner = (*enclosing, id(s))
            self.compounds[id(s)] = s
            if skip_defs and isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            # a try's handlers run before its else and finally: units stay in an order where nothing runs
            # before a unit of lower index (horizon and the slices' aliases rely on it)
            handlers = getattr(s, "handlers", [])
            first, rest = (bodies[:1], bodies[1:]) if handlers else (bodies, [])
            for body in first:
                self.statements(body, inner, skip_defs)
            for handler in handlers:
                hk = "except:" + (handler.name or "") + (ast.dump(handler.type) if handler.type else "")
                hh = self.unit(hk, [handler.type] if handler.type else [], inner, {handler.name} - {None})
                self.f.headers[id(handler)] = hh
                self.statements(handler.body, (*inner, id(handler)), skip_defs)
            for body in rest:
                self.statements(body, inner, skip_defs)
            for case in getattr(s, "cases", []):
                ck = "case:" + ast.dump(case.pattern) + (ast.dump(case.guard) if case.guard else "")
                self.f.headers[id(case)] = self.unit(
                    ck, [case.pattern, *([case.guard] if case.guard else [])], inner, set()
                )
                self.statements(case.body, (*inner, id(case)), skip_defs)

    def visit(self, node: ast.AST, i: int) -> None:
        """Record what one node of unit `i` reads, mentions, binds and says."""
        f, u = self.f, self.f.units[i]
        if isinstance(node, COUNTED) and not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            f.kinds[type(node).__name__] += 1
        if isinstance(node, ast.Name):
            u.names.add(node.id)
            p = f.parent(node)
            # a class body's own dunders (`__slots__ = ...`, `next = __next__`) are its own attributes
            own = self.class_body and (node.id in self.f.locals or isinstance(node.ctx, ast.Store))
            if dunder_word(node.id) and not own:
                f.words.add(node.id)
            if isinstance(node.ctx, ast.Load) and (
                node.id in self.judged or node.id in f.aliases or node.id in f.smuggled
            ):
                how = (
                    "base"
                    if id(node) in self.base_ids
                    else "decorator"
                    if id(node) in self.decorators
                    else form(f, node)
                )
                f.reads.setdefault(node.id, set()).add(how)
                f.name_refs.append((node.id, how, node, i))
        elif isinstance(node, ast.Attribute):
            u.attrs.add(node.attr)
            p = f.parent(node)
            if dunder_word(node.attr) and not (
                node.attr == "__class__" and isinstance(p, ast.Attribute) and p.attr in NAME_ATTRS
            ):
                f.words.add(node.attr)
            if not (isinstance(node.value, ast.Constant) and isinstance(node.value.value, (str, bytes))):
                # a class's base or metaclass (`class Op(enum.Enum)`) is applied once, by code the skeleton fixes
                if isinstance(node.ctx, ast.Load) and id(node) not in self.decorators | self.base_ids:
                    f.attr_refs.append((node.attr, node, i))
        elif isinstance(node, ast.keyword) and node.arg and dunder_word(node.arg):
            f.words.add(node.arg)
        elif isinstance(node, ast.arg):
            u.names.add(node.arg)
            if dunder_word(node.arg):
                f.words.add(node.arg)
        elif isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes)) and id(node) not in self.slots:
            text = node.value if isinstance(node.value, str) else node.value.decode("latin-1")
            f.strings.add(text)
            words = string_words(text)
            if any("__" in w for w in words):
                f.dstrings.add(text)
            f.words |= {w for w in words if "__" not in w}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            f.imports[ast.dump(node)] += 1
            u.names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            f.declared |= set(node.names)
            u.names |= set(node.names)
        elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
            u.names.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            u.names.add(node.rest)


def local_aliases(nodes: list[ast.AST]) -> dict[str, list[tuple[str, str, bool]]]:
    """Names bound by import statements inside the code: judged as imports wherever they are read."""
    from graph_planner.patch_scope import _import_bindings

    out: dict[str, list[tuple[str, str, bool]]] = {}
    for part in nodes:
        for node in ast.walk(part):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for name, b in _import_bindings(node):
                    out.setdefault(name, []).append(b.origin)
    return out


def function_facts(
    fn: ast.AST,
    judged: set[str],
    local: set[str],
    helper: bool = False,
    skip: set[str] = frozenset(),
    smuggled: dict[str, str] | None = None,
    own: set[str] = frozenset(),
) -> Facts:
    """Facts of a function's body and defaults; a `helper`'s also judge the names its decorators and
    defaults read in the enclosing scope (but `skip`: a class's own names, safe decorators). `smuggled`:
    parameters whose default is not pure ({name: "capability" or "gadget"}), judged where read; `own`:
    the names local to the function's own scope (Scope.own)."""
    b = _Builder(set(judged), local, class_body=False)
    b.f.smuggled = dict(smuggled or {})
    b.f.own = set(own)
    b.f.star = {a.arg for a in (fn.args.vararg, fn.args.kwarg) if a}
    first = [*fn.args.posonlyargs, *fn.args.args][:1]
    if fn.name in ("__init__", "__post_init__") and first:
        b.f.init_self = first[0].arg
    b.f.params = {
        a.arg for a in [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs, fn.args.vararg, fn.args.kwarg] if a
    }
    b.f.aliases = local_aliases(fn.body)
    args = fn.args
    positional = [*args.posonlyargs, *args.args]
    pairs = list(zip(positional[len(positional) - len(args.defaults) :], args.defaults))
    pairs += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None]
    b.decorators = {id(d) for d in fn.decorator_list}
    if helper:
        outer = [*fn.decorator_list, *(d for _, d in pairs)]
        b.judged |= {n.id for d in outer for n in ast.walk(d) if isinstance(n, ast.Name)} - set(skip)
        if fn.decorator_list:
            b.unit("decorators:" + "|".join(map(ast.dump, fn.decorator_list)), fn.decorator_list, (), set())
    for a, d in pairs:  # a parameter's default flows into the body like an assignment at its top
        b.unit(f"default:{a.arg}={ast.dump(d)}", [d], (), {a.arg})
    b.statements(fn.body, ())
    type_locals(b.f)
    return b.f


SLOTS = ast.dump(ast.Name("__slots__", ast.Store()))


def class_facts(cls: ast.ClassDef, judged: set[str], local: set[str]) -> Facts:
    """Facts of a class's header (decorators, bases, keywords: module scope) and body, methods left out;
    `local`: the names the class body binds."""
    b = _Builder(set(judged), local, class_body=True)
    b.judged |= {
        n.id for p in [*cls.decorator_list, *cls.bases, *cls.keywords] for n in ast.walk(p) if isinstance(n, ast.Name)
    }
    b.f.aliases = local_aliases([s for s in cls.body if not isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))])
    b.base_ids = {id(x) for x in [*cls.bases, *(k.value for k in cls.keywords)]}
    b.decorators = {id(d) for d in cls.decorator_list}
    slots = [s.value for s in cls.body if isinstance(s, ast.Assign) and [ast.dump(t) for t in s.targets] == [SLOTS]]
    b.slots = {id(n) for v in slots for n in [v, *getattr(v, "elts", [])] if isinstance(n, ast.Constant)}
    b.unit("class:" + cls.name, [*cls.decorator_list, *cls.bases, *cls.keywords], (), {cls.name})
    b.statements(cls.body, (), skip_defs=True)
    return b.f


def module_facts(tree: ast.Module, judged: set[str]) -> Facts:
    """Facts of the module's own statements (class bodies included, function bodies left out)."""
    b = _Builder(set(judged), set(), class_body=False)
    b.f.module = True
    b.statements(tree.body, (), skip_defs=True)
    return b.f
