"""How a body reads a name, for the patch check (graph_planner/patch_check.py): a dotted chain
(`os.path.join`), a call, `type` only asked about (compared, its name or text, the class
argument of isinstance), `getattr(x, "name")` with a plain literal name, or a value.
"""

from __future__ import annotations

import ast
import re

from graph_planner.patch_units import Facts

# Statement and expression kinds a body may not gain.
COUNTED = (
    ast.Import,
    ast.ImportFrom,
    ast.Global,
    ast.Nonlocal,
    ast.ClassDef,
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.Lambda,
    ast.Match,
    ast.Yield,
    ast.YieldFrom,
    ast.Await,
)
DUNDER = re.compile(r"^__\w+__$")
# Frame, generator, coroutine, traceback and code attributes, and the other routes to them.
INTROSPECTION = re.compile(r"^((f|gi|cr|ag|tb|co)_[a-z]\w*|mro|cell_contents|func_\w+|im_(func|self|class))$")
# Dunders that give a string or the object's own constructor, nothing else.
BENIGN_DUNDERS = frozenset({"__init__", "__name__", "__qualname__", "__doc__"})
NAME_ATTRS = frozenset({"__name__", "__qualname__", "__doc__"})  # strings
# Compound statements whose body may run more than once or be cut short (a loop, a handler, a context
# manager that swallows an exception, a nested function): a slice that reaches inside takes all of it.
WHOLE = (ast.For, ast.AsyncFor, ast.While, ast.Try, ast.With, ast.AsyncWith, *COUNTED[4:7])
TRY_STAR = (ast.TryStar,) if hasattr(ast, "TryStar") else ()
WHOLE = (*WHOLE, *TRY_STAR)


def dunder_word(name: str) -> bool:
    """A dunder or introspection name that is not one of the benign few."""
    return (bool(DUNDER.match(name)) and name not in BENIGN_DUNDERS) or bool(INTROSPECTION.match(name))


def string_words(text: str) -> set[str]:
    """Dunder / introspection words a string carries: any `\\w+` run with `__` in it (a benign dunder
    aside), and attribute names in `{0.attr}` format fields."""
    words = {t for t in re.findall(r"\w+", text) if "__" in t and t not in BENIGN_DUNDERS}
    for fld in re.findall(r"\{([^{}!:]*)", text):
        words |= {a for a in re.findall(r"\.(\w+)", fld) if dunder_word(a)}
    return words


def dotted(node: ast.AST) -> str:
    """`a.b.c` for an attribute chain that starts from a name, else ""."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    return ".".join([node.id, *reversed(parts)]) if isinstance(node, ast.Name) else ""


def _local(facts: Facts, name: str) -> bool:
    return name in facts.locals or name in facts.params


def _inert(facts: Facts, e: ast.AST) -> bool:
    """An operand whose `__eq__` is not the patch's to choose: a constant, a global or builtin name or a
    dotted chain from one (a class, a module constant), another `type(...)` call, or a display of these.
    (A local or parameter may be an object whose `__eq__` keeps what it is compared with.)"""
    if isinstance(e, ast.Constant):
        return True
    if isinstance(e, (ast.Tuple, ast.List, ast.Set)):
        return all(_inert(facts, x) for x in e.elts)
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and e.func.id == "type":
        return not _local(facts, "type") and len(e.args) == 1 and not e.keywords
    root = dotted(e).split(".")[0]
    return bool(root) and not _local(facts, root)


def _compared(facts: Facts, target: ast.AST, cmp: ast.Compare) -> bool:
    """`target` only compared: by identity with anything, else (==, <, in...) with inert operands only:
    a comparison hands the value to the other operand's `__eq__`, which may keep it."""
    operands = [cmp.left, *cmp.comparators]
    k = next(i for i, o in enumerate(operands) if o is target)
    pairs = [(cmp.ops[i], operands[j]) for i, j in ((k - 1, k - 1), (k, k + 1)) if 0 <= i < len(cmp.ops)]
    return all(isinstance(op, (ast.Is, ast.IsNot)) or _inert(facts, other) for op, other in pairs)


def _asks(facts: Facts, target: ast.AST) -> bool:
    """A type object used only to ask about it: compared (see _compared), asked for its name, turned into
    text, or the class argument of isinstance / issubclass (the builtins, not a local of that name).
    Not a subscript: `d[type(x)]` keeps it in a defaultdict or Counter, `typing.Union[type]` is it."""
    p = facts.parent(target)
    if isinstance(p, ast.Compare):
        return _compared(facts, target, p)
    if isinstance(p, ast.Attribute) and p.attr in NAME_ATTRS:
        return True
    if isinstance(p, (ast.Tuple, ast.List, ast.Set)) and isinstance(facts.parent(p), ast.Compare):
        cmp = facts.parent(p)  # `x in (type(a), type(b))`: x's `__eq__` sees each element
        return _compared(facts, p, cmp) and all(isinstance(op, (ast.In, ast.NotIn)) for op in cmp.ops)
    if _builtin_call(facts, p, ("str", "repr")) and p.args == [target]:
        return True
    if isinstance(p, ast.FormattedValue):
        return True  # its text in an f-string
    text = (
        p.func.value
        if isinstance(p, ast.Call) and isinstance(p.func, ast.Attribute) and p.func.attr == "format"
        else None
    )
    if isinstance(text, ast.Constant) and isinstance(text.value, str) and target in p.args:
        return True  # its text in "...{}...".format(...)
    if isinstance(p, ast.Tuple):
        target, p = p, facts.parent(p)
    if (
        isinstance(p, ast.BinOp)
        and isinstance(p.op, ast.Mod)
        and p.right is target
        and isinstance(p.left, ast.Constant)
    ):
        return True  # its text in "...%s..." % (...)
    return _builtin_call(facts, p, ("isinstance", "issubclass")) and len(p.args) == 2 and p.args[1] is target


def _builtin_call(facts: Facts, p: ast.AST | None, names: tuple[str, ...]) -> bool:
    """A call of one of these builtins by name (not of a local the body bound to that name)."""
    named = isinstance(p, ast.Call) and isinstance(p.func, ast.Name) and p.func.id in names
    return named and not _local(facts, p.func.id)


def _type_safe(facts: Facts, node: ast.Name) -> bool:
    """`type` used only to ask (see _asks): `type(x)` or `type` itself. (`type(cls)` called, kept or passed
    on is type itself, which builds a class.) `t = type(x)` counts when every use of t only asks: see
    Facts.type_locals."""
    call = facts.call_of(node)
    if call is None:
        return _asks(facts, node)
    if len(call.args) != 1 or call.keywords or isinstance(call.args[0], ast.Starred):
        return False
    if isinstance(call.args[0], ast.Constant):
        return True  # the type of a constant (type(None)) is never type itself
    p = facts.parent(call)
    if isinstance(p, ast.Call) and p.func is call and not p.args and not p.keywords:
        return True  # type(x)(): a fresh x-like value; when x is a class, type() with no arguments fails
    if isinstance(p, ast.Assign) and len(p.targets) == 1 and isinstance(p.targets[0], ast.Name):
        return False  # decided once the whole function is read (type_locals)
    return _asks(facts, call)


def _literal_name(facts: Facts, node: ast.Name) -> bool:
    """`getattr(x, "name")`, `getattr(x, "name", d)`, `hasattr` / `setattr` / `delattr` alike with a plain
    attribute name: the same as writing `x.name`, which a body may."""
    call = facts.call_of(node)
    if call is None or node.id not in ("getattr", "hasattr", "setattr", "delattr") or call.keywords:
        return False
    if not 2 <= len(call.args) <= 3 or any(isinstance(a, ast.Starred) for a in call.args):
        return False
    name = call.args[1]
    return (
        isinstance(name, ast.Constant)
        and isinstance(name.value, str)
        and name.value.isidentifier()
        and not dunder_word(name.value)
        and not name.value.startswith("__")
    )


# One argument that is never a class and never a str: when x is a class, type(x)(arg) is type(arg), a
# container's or generator's class (no class builder, no string-to-attribute); else x's class on data.
_DATA_ARGS = (ast.List, ast.Tuple, ast.Set, ast.Dict, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def _type_clone(facts: Facts, node: ast.Name) -> bool:
    """`type(x)(x, a, ...)`, `type(x)(constant)` or `type(x)(<display or comprehension>)`: see class_clone."""
    call = facts.call_of(node)
    if call is None or len(call.args) != 1 or call.keywords:
        return False
    return class_clone(facts, call.args[0], call)


def class_clone(facts: Facts, x: ast.AST, cls: ast.AST) -> bool:
    """`cls(x, a, ...)`, `cls(constant)` or `cls(<display or comprehension>)` where `cls` is x's class
    (`type(x)` or `x.__class__`): x's own class called on data. Not `cls(x)`: when x is a class that is
    `type(x)` with one argument, type itself, which a caller then calls with a name, bases and a namespace
    to build a class. With two or more arguments and x first, a class builder would need a str name first
    (type, a metaclass), attrgetter / methodcaller / ForwardRef a str: x is no str when its class is one of
    those. So it builds no class, returns none and names no attribute, unless x's class is one of the
    file's own classes that steer a gadget (FileRules.clone_safe says there is none)."""
    outer = facts.parent(cls)
    if not isinstance(x, ast.Name) or not isinstance(outer, ast.Call) or outer.func is not cls or not outer.args:
        return False
    if any(k.arg is None for k in outer.keywords) or isinstance(outer.args[0], ast.Starred):
        return False
    first = outer.args[0]
    if any(isinstance(a, ast.Starred) for a in outer.args):
        # toolz's `return type(self)(self, *args)`: `*args` may be empty, type(x)(x) again; handed back, a
        # caller in another file (which this check, judging one file, does not see) could build with it
        return False
    if isinstance(first, ast.Name) and first.id == x.id:
        return len(outer.args) >= 2
    if len(outer.args) != 1 or outer.keywords:
        return False
    if isinstance(first, _DATA_ARGS):
        return True
    # astor's `type(item)('\n')`: one plain constant; type(c) of a constant is its class, a metaclass wants
    # three arguments, attrgetter / methodcaller a name that says nothing new
    text = str(first.value) if isinstance(first, ast.Constant) else "__"
    words = re.findall(r"\w+", text)
    return "__" not in text and not any(map(INTROSPECTION.match, words))


def form(facts: Facts, node: ast.Name) -> str:
    """How a name is read: "chain:a.b.c", "type-safe", "type-clone", "literal-name", "call" or "value"."""
    p = facts.parent(node)
    if isinstance(p, ast.Attribute) and p.value is node:
        return "chain:" + dotted(facts.chain_top(node))
    if node.id == "type" and _type_safe(facts, node):
        return "type-safe"
    if node.id == "type" and _type_clone(facts, node):
        return "type-clone"
    if _literal_name(facts, node):
        return "literal-name"
    if isinstance(p, ast.Call) and p.func is node:
        return "call"
    return "value"


def type_locals(f: Facts) -> None:
    """`t = type(x)` where t is bound only by plain assignments and every read of t only asks (see _asks):
    that `type` read is harmless ("type-safe"), like `type(x) is int`."""
    nodes = [n for u in f.units for p in u.parts for n in ast.walk(p) if isinstance(n, ast.Name)]
    for k, (name, form, node, i) in enumerate(f.name_refs):
        call = f.call_of(node)
        p = f.parent(call) if call is not None else None
        if name != "type" or form != "call" or not isinstance(p, ast.Assign) or len(call.args) != 1 or call.keywords:
            continue
        t = p.targets[0].id if len(p.targets) == 1 and isinstance(p.targets[0], ast.Name) else None
        uses = [n for n in nodes if n.id == t]
        # t may also be assigned any other value (`t = type(x); if isclass(x): t = x`): whatever it holds,
        # a read that only asks is harmless; not an augmented, loop, with or walrus target (those read it)
        stores_ok = all(
            isinstance(f.parent(n), ast.Assign) and n in f.parent(n).targets
            for n in uses
            if not isinstance(n.ctx, ast.Load)
        )
        local = t in f.locals  # not a global or nonlocal (`global F; F = type(x)`): other code reads it
        if (
            t
            and local
            and t not in f.params
            and stores_ok
            and all(_asks(f, n) for n in uses if isinstance(n.ctx, ast.Load))
        ):
            f.name_refs[k] = (name, "type-safe", node, i)
    f.reads = {}
    for name, form, *_ in f.name_refs:
        f.reads.setdefault(name, set()).add(form)


def type_returners(tree: ast.Module) -> frozenset[str]:
    """Names of the file's functions and methods that may hand out a class, type itself included: any that
    calls `type` other than to ask about it, or reads `__class__`. What they compute may reach the caller
    through a return, a local, a tuple, a generator or object state, so a caller never reads one anew
    and a kept call's result goes only where it went (result_kept)."""
    out = set()
    parents = {id(c): n for n in ast.walk(tree) for c in ast.iter_child_nodes(n)}
    for fn in (n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))):
        if any(_hands_out_class(n, parents) for n in ast.walk(fn)):
            out.add(fn.name)
    return frozenset(out)


def _hands_out_class(n: ast.AST, parents: dict[int, ast.AST]) -> bool:
    """`x.__class__`, or a `type(...)` value (or a clone of one) that may be type itself and is not only
    asked about (compared by identity, its name or text, or isinstance's class argument)."""
    p = parents.get(id(n))
    if isinstance(n, ast.Attribute) and n.attr == "__class__":
        return not _asked(n, parents)
    if not (isinstance(n, ast.Call) and _may_be_type(n)):
        return False
    if isinstance(p, ast.Call) and p.func is n:
        return False  # `type(x)(...)`: the outer call is judged itself
    if isinstance(p, ast.Assign) and len(p.targets) == 1 and isinstance(p.targets[0], ast.Name):
        # tabulate's `row_type = type(row)` then only compared: the class stays in the function
        fn = n
        while fn is not None and not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            fn = parents.get(id(fn))
        name = p.targets[0].id
        uses = [u for u in ast.walk(fn) if isinstance(u, ast.Name) and u.id == name] if fn is not None else []
        return not all(_asked(u, parents) for u in uses if isinstance(u.ctx, ast.Load))
    return not _asked(n, parents)


def _asked(n: ast.AST, parents: dict[int, ast.AST]) -> bool:
    """A class value used where it cannot leave the function: compared, named, turned into text, or
    isinstance's class argument (the other operand of a comparison is judged where it is written)."""
    p = parents.get(id(n))
    if isinstance(p, (ast.Tuple, ast.List, ast.Set)) and isinstance(parents.get(id(p)), ast.Compare):
        return True
    if isinstance(p, ast.Compare) or isinstance(p, ast.FormattedValue):
        return True
    if isinstance(p, ast.Attribute) and p.attr in NAME_ATTRS:
        return True
    named = p.func.id if isinstance(p, ast.Call) and isinstance(p.func, ast.Name) else ""
    return named in ("str", "repr") or named in ("isinstance", "issubclass") and n in p.args[1:]


def _may_be_type(e: ast.AST | None) -> bool:
    if isinstance(e, ast.IfExp):
        return _may_be_type(e.body) or _may_be_type(e.orelse)
    if isinstance(e, ast.BoolOp):
        return any(_may_be_type(v) for v in e.values)
    if not isinstance(e, ast.Call):
        return False
    if isinstance(e.func, ast.Name) and e.func.id == "type":
        return len(e.args) == 1 and not e.keywords
    if not (isinstance(e.func, ast.Call) and _may_be_type(e.func)):
        return False
    plain = [a for a in e.args if not isinstance(a, ast.Starred)]
    data = len(e.args) == 1 and isinstance(e.args[0], (ast.Constant, *_DATA_ARGS))
    return len(plain) < 2 and not data


def type_receivers(facts: Facts, value: ast.AST) -> list[ast.AST] | None:
    """What a class `value` reaches when a comparison or a question consumes it: the operands compared
    with it by anything but identity (`type(v) not in kinds`: kinds' `__contains__`, or its elements'
    `__eq__`, sees the class; `x in (type(a), type(b))`: x's `__eq__` does), none for identity or a
    question (`type(v).__name__`); None when the value may flow on (bound, called, returned, passed)."""
    p = facts.parent(value)
    if isinstance(p, (ast.Tuple, ast.List, ast.Set)) and isinstance(facts.parent(p), ast.Compare):
        value, p = p, facts.parent(p)
    if isinstance(p, ast.Compare):
        operands = [p.left, *p.comparators]
        k = next(i for i, o in enumerate(operands) if o is value)
        pairs = [(p.ops[i], operands[j]) for i, j in ((k - 1, k - 1), (k, k + 1)) if 0 <= i < len(p.ops)]
        return [o for op, o in pairs if not isinstance(op, (ast.Is, ast.IsNot))]
    return [] if _asks(facts, value) else None


def result_kept(facts: Facts, old: Facts, i: int, consumed: bool = False) -> bool:
    """The statement (unit i) holding a kept call whose result may be type itself, and every statement
    that result may reach through the names it binds or changes (transitively), are statements of the
    old function, or new ones that only ask about it (compare it, key on it, name it): the patch never
    calls it, stores it or hands it on where the old function did not. A call whose value a comparison
    with plain operands or a question consumes (`consumed`: `type(v) not in (int, float)`) reaches no
    name its statement binds."""
    old_units = {(u.path, u.key) for u in old.units}
    if consumed:
        return (facts.units[i].path, facts.units[i].key) in old_units
    todo, seen, names = [i], set(), set()
    while todo:
        k = todo.pop()
        if k in seen:
            continue
        seen.add(k)
        u = facts.units[k]
        if (u.path, u.key) not in old_units:
            loads = [
                n
                for part in u.parts
                for n in ast.walk(part)
                if isinstance(n, ast.Name) and n.id in names and isinstance(n.ctx, ast.Load)
            ]
            if k == i or not loads or not all(_asks(facts, n) for n in loads):
                return False
            continue
        names |= u.binds | u.mutates
        todo += [j for j, v in enumerate(facts.units) if j not in seen and v.reads & names]
    return True
