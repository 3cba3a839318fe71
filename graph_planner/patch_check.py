"""The patch check: a patch may change the bodies of functions that already exist, and nothing else.

Patched code runs inside the pytest process that produces the reward, so the check is an allow-list
built to be sound by construction for what it can see: names (resolved with Python's own scoping, the
standard library's `symtable`), attribute chains through imported modules, dunder and introspection
words, and string-to-attribute / string-to-code "gadgets" with the data that flows into them.

What a patch may do
-------------------
1. Change the bodies of existing functions and methods, and literal defaults (`size=2` -> `size=1`). Everything else
   is compared as a syntax tree with every outermost body blanked: no new import, class, function, method,
   decorator, signature or module statement. No source-encoding declaration may be added or changed (the check
   parses the bytes as Python decodes them), nor any file nested deeper than `pyparse.MAX_DEPTH` (150) AST levels (a
   walk of it would overflow Python's stack).
2. Not add, inside a body, an import, `global`, `nonlocal`, class, def, lambda, `match`, `yield` or `await` (a
   `yield` only where the function, and each def in it, is a generator exactly when it was); import statements and
   `global` / `nonlocal` names stay exactly as they were.
3. Read, as a global or builtin (every scope in the function: comprehensions, lambdas, nested defs), only:
   (a) names the file binds once, at top level, by a `def`, a `class`, a literal constant, or a value that
   would itself pass these rules as new code (`PATTERN = re.compile("x")`: reading it gives nothing the body
   could not compute); a builtin shadowed at module level is what the module binds; (b) safe builtins
   (`SAFE_BUILTINS`: no type, getattr, setattr, delattr, hasattr, vars, dir, globals, locals, object, eval,
   exec, compile, open, __import__, breakpoint, input, memoryview...); `type(x)` only asked about (compared
   by identity, or by equality with constants, globals and other type calls: a local's `__eq__` could keep
   it; its name or text; the real isinstance's class argument; a local only so used; never a subscript: a
   defaultdict keeps its key, `typing.Union[type]` is type), or x's class called on data while no class of
   the file steers a gadget: `type(x)(x, a, ...)`, `type(x)(plain constant)`, `type(x)(<display or
   comprehension>)`, `return type(x)(x, *rest)` (a class builder would need a str, bases and a namespace).
   Never `type(x)(x)`: when x is a class that is type itself. "Asked about" counts only where every operand
   the class meets is plain (`plain_operand`: constants, builtins, undecorated functions, literals and
   classes of the file without a metaclass of their own, classes of pure standard modules, tuples and
   displays of these; `type(<constant>)`), and a question calls the real builtin (a module-level `repr`
   would be handed the class): a local, parameter, instance, other `type(...)` (its metaclass's `__eq__`) or
   other imported object may keep it in its `__eq__` / `__contains__`, or return it from a rich comparison.
   There a `type(x)` may take a computed x (the class reaches nothing that could keep it); elsewhere x and
   those operands are the call's inputs (rule 6). `x.__class__` is `type(x)`: where the old function read
   it, it is judged like a `type` call (harmless only asked about, called with no arguments or in the clone
   forms above). No patch changes a function whose parameters Python may fill with `type` itself or a class
   builder (graph_planner/patch_hooks.py): `__subclasshook__`, `__subclasscheck__`, `__instancecheck__`
   (`isinstance(int, Abc)` hands the hook `type`), a method of a class builder (a metaclass, an Enum without
   sure members), in a file with a class builder `__set_name__`, `__get__`, `__init_subclass__`,
   `__class_getitem__`, `__mro_entries__`, and every function of the file one of these hands a parameter to.
   In a module that may rebind its names at run time (`globals()`, `vars()`, `.modules`, a star import) no
   name is plain and no builtin is sure to be one; a `type` value stored in a global or nonlocal is never
   only asked about. A value that may be type itself (a `type` call; a function of the file that returns
   one, see `type_returners`) is never read anew, and where the old function had it, its result goes only to
   the old statements or is only asked about; (c) names the old function already read (an import alias: in
   the same form); (d) names imported from modules outside `CAPABILITY_MODULES`, called (`f(x)`) or used as
   a class (a module alias never as a bare value: `m = re` would let `m.sys` through). A dotted chain
   through an imported name (`os.path.join`, `re.compile`) must appear in the unpatched file (through a
   capability module: and be in `PURE_CHAINS` or read by the old function), or resolve on this interpreter,
   through a module in `RESOLVABLE` and public names only, to a plain function, class or value (never a
   metaclass, an Enum without members, whose functional API builds a class, or `ABCMeta.register`). So
   `re.sys`, `collections._sys`, `enum.sys`, `enum.ReprEnum` are refused. A class of the file is a class
   builder when it is a metaclass or an Enum without members (bases read through import aliases and the
   file's own classes; annotations and `nonmember` are no members): calling one is a gadget.
4. Use no dunder or introspection word the old function did not use: names, attributes, keyword names
   (`dict(__eq__=...)`), parameters, string constants containing `__` (`"__globals__"`, `"x.__class__"`, dict keys),
   format fields (`"{0.f_back}"`), literal module constants it reads. Benign: `__init__`, `__name__`,
   `__qualname__`, `__doc__`, and `x.__class__.__name__`.
5. Read a file helper (a def, class or valued assignment of the file) newly only when it is pure: it would itself
   pass rules 3-6 as new code, transitively through the helpers it reads (methods by name; `getattr(x, "name")` with
   a plain literal counts as `x.name` there; a class's bases, metaclass and `__slots__` strings are declarations,
   not reads); worked out once per file text. An impure helper may be kept where the old function read it.
6. Give a computed value to a gadget only as the old function did. Gadgets: `GADGET_BUILTINS` (getattr, setattr,
   delattr, hasattr, vars, type, eval, exec, compile, __import__), `GADGET_ATTRS` (`.format` / `.format_map` on a
   computed template, `operator.attrgetter` / `methodcaller`, `functools.wraps` / `update_wrapper`,
   `string.Formatter`'s methods, `import_module`, `typing.get_type_hints`, class builders: `enum.Enum`,
   `abc.ABCMeta`, `dataclasses.make_dataclass`, a file class that is a metaclass or an Enum without members), file
   helpers whose parameters reach one ("steering" parameters, a fixpoint; a class's through `__init__`, `__new__` or
   a dataclass's `__post_init__`), module names whose binding may hold one, a name a star import may have bound, a
   method named by a literal string (`methodcaller("format", x)(t)`, `getattr(t, "format")(x)`: the whole statement
   counts), a method of the file named like a library gadget. Only the inputs that name something count (the name of
   getattr, a template, a steering argument). A gadget whose such inputs are literals (without `__` or introspection
   words) is fine; otherwise the old function must have made the same call with the same inputs, and every statement
   that feeds them (their backward, flow-sensitive data-flow slice: statements before it or in a loop around it (a
   loop's own header included) that may bind or change a name they read, or change in place a name that may share an
   object with one by then (through any expression: `(a or b).append`, a saved bound method, a walrus, a match
   capture), with the headers of their blocks and the whole of a `try` / `with` around them; a try's handlers run
   before its else and finally; parameters and module names may be one object; for a gadget the boot script's name
   guard does not judge at run time, where an input may hold an object that outlives the call (a parameter's, a
   default's, a module's), every change of it counts, also after the gadget (another call or a recursion made it
   first), and no other changed function may change module data it reads) must be the same, in the same order, as
   for the old call (or all the old calls of that gadget with those inputs together); the gadget's own statement may
   bind a slice name only where it is unchanged; and the slice calls no changed function nor one whose result a
   changed function decides. So a computed dunder (`"_" + "_globals__"`, `"%s" % ...`, f-strings, `.join`,
   `chr(95)`) reaches no gadget. The same holds for gadgets in unchanged functions and module code: none may take a
   value a changed function returns, but getattr, setattr, delattr and import_module (and the file's helpers that
   steer only those), whose names the boot script's name guard judges by value.
7. Change no state other code reads: no store, augmented store or delete (`setattr` / `delattr` with a
   literal name, an item store, `operator.setitem` / `ior`, an in-place method such as `.update` or
   `.clear`, called or handed on as a value, included) into an attribute or item of an imported module or
   object (through a module-level name, a logger a capability module returns, a local that may hold one
   however it was bound, or any expression that hands one on: `json.encoder.encode_basestring_ascii = f`
   rewrote every JSON line the process wrote); no chain to process-wide state of a pure module (`STATEFUL`:
   the decimal contexts, `random.seed`, warning filters, `locale.setlocale`, class decorators such as
   `dataclasses.dataclass` handed a library's class anew, `copy.dispatch_table`); no comparison of a type
   with a module-level object of the file (its `__eq__` would be handed type itself).
8. Move no capability the old function read (a chain through a capability module, a builtin outside the
   safe list such as `globals`, an impure helper that is no gadget and hands out no class): each statement
   reading one is an old statement whose inputs have the same slice (a constant is part of its text), and
   every later statement reading what it stored is an old one, unless it only asks the value's truth or
   identity (graph_planner/patch_kept.py). Data handed to `write` / a logger's methods of a capability
   reached without arguments (`sys.stderr.write(msg)`) may change. No new attribute read named like a
   standard module or `modules`, not called, on a value that is no import alias (`backend.decoder.re` from
   a parameter whose default is `json`), nor such a name in an attrgetter / methodcaller string.
9. Change the file's own module state only with old statements (graph_planner/patch_own.py): an item or
   attribute store, augmented store or delete, an in-place method (`.update`, `.setdefault`..., also handed
   on as a value), `setattr` / `delattr`, operator's in-place functions or `dict.update(SETTINGS, ...)` on
   a module-level name of the file (through a local or parameter that may hold one, however bound, an
   expression handing one on, or a function of the file that returns one: `settings()["k"] = v`), and a
   plain store to a name declared `global`, must be an old statement (same text key) whose inputs, the
   stored value included, have the same backward slice. As new code every such statement counts, so a
   helper that changes module state is impure (rule 5): called only where the old function called it.
   `SETTINGS["abs_tol"] = 1e300` beside a kept bug widened the tolerance the package's `isclose`, and so
   the tests, compared with (forge F4). Module constants that cannot change in place (numbers, strings,
   tuples of them) are no state; a key, an index or a number derived from module data (`table[KEY]`,
   `[0] * SIZE`, `range(N - 1)`, `"%s" % (PAT,)`) hands none of it on.
10. Add no write (store, augmented store, delete, in-place method, setattr, in-place library function,
   `next()`) into an object the function did not provably create, unless the old function made a write of
   the same kind on the same receiver path (graph_planner/patch_writes.py: what "fresh" means, `__init__`'s
   `self`, what it does not judge). An end-of-test digest cannot see a change undone within the call.

What it cannot judge
--------------------
Meaning: a patch inside these rules can still be wrong, and the tests decide. Objects' behaviour: what a
parameter, an attribute of a non-module object, an imported function from another file or a container
holds (a string a changed function stores in `self`, or in module data through an old call of one of the
file's functions with new arguments (rule 9 judges a helper's stores only as new code), that unchanged
code later hands to a gadget; a class in the package whose `__eq__`
always agrees; `type` itself read back from a dataclass field annotated `type`; in module code, a value a
changed function returns at import time that reaches a gadget through a second module name for the
same object, `B = A; B.append(f())`); a function of another
file of the package that returns `type(x)` (the check judges one file); state a pure module's method
changes that `STATEFUL` does not list. Three independent reviews (2026-11-29) each found accepted
routes of these kinds; the ones they found inside the rules are refused and tested
(tests/unit/test_patch_check_order.py); five more (same day) found 48 routes to `type` itself, a class builder
or library state; 33 are refused and tested (tests/unit/test_patch_check_type_compare.py,
tests/unit/test_patch_check_hooks.py). Open, found by the fifth (the class-hook rule follows calls by
name only): a hook that hands its parameter on through a container, an alias, `functools.partial`, a
walrus, `C.__mro__`, a class's `__init__` or a hook bound by assignment (`__subclasshook__ =
classmethod(_hook)`); class builders the file does not show (a metaclass based on `type(object)` or an
alias, a builder imported from another file of the package, an Enum whose `_ignore_` hides its only
member); and unchanged code that hands `type(x)` to a function or object of the file (`_handler_for(type(obj))`,
a dict subclass's `__missing__`, a keeper's `__contains__`), whose changed body may keep it.
The runtime guard, its name guard (which judges the name a
getattr, setattr, delattr or import_module in the package's own modules receives, wherever it came from)
and the verdict's canaries are the second layer; for those four gadgets, a name carried from one call to
the next in an outliving object, or returned by a changed function to unchanged code, is the name
guard's alone (the check judges their inputs within a changed call: counting every later change of every
outliving object refused 45% of three packages' gold fixes). For
the other gadgets (attrgetter, methodcaller, templates, class builders) the routes above have no second
layer. `changed_functions` names the functions a patch touched, for that guard.
"""

from __future__ import annotations

import ast
import functools
import re

from graph_planner.patch_facts import Facts, function_facts
from graph_planner.patch_helpers import FileRules
from graph_planner.patch_hooks import CLASS_HOOKS, hook_reasons  # noqa: F401 - CLASS_HOOKS: the docstring's list
from graph_planner.patch_kept import kept_reasons, module_reach_reasons
from graph_planner.patch_policy import (  # noqa: F401 - the lists are part of this module's interface
    CAPABILITY_MODULES,
    GADGET_ATTRS,
    GADGET_BUILTINS,
    PURE_CHAINS,
    SAFE_BUILTINS,
    Judge,
    literal,
)
from graph_planner.patch_scope import function_scopes, outer_functions
from graph_planner.patch_slice import roots
from graph_planner.patch_values import immutable
from graph_planner.pyparse import PARSE_LOCK, added_breaks, parse_bounded, source_lines

_CODING = re.compile(rb"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)")


def _coding(source: bytes) -> str | None:
    """The encoding a PEP 263 declaration on the first two lines names, or None."""
    for line in source.splitlines()[:2]:
        m = _CODING.match(line)
        if m:
            return m.group(1).decode("ascii", "replace").lower().replace("_", "-")
        if line.strip() and not line.lstrip().startswith(b"#"):
            break
    return None


def _skeleton(tree: ast.Module, functions: list[ast.AST]) -> str:
    """The module with every outermost function body replaced by `pass` and its literal defaults by None
    (a fix may change `size=2` back to `size=1`), as a dump; the tree is restored afterwards."""
    saved = [(fn.body, fn.args.defaults, fn.args.kw_defaults) for fn in functions]
    try:
        for fn in functions:
            fn.body = [ast.Pass()]
            fn.args.defaults = [ast.Constant(None) if literal(d) else d for d in fn.args.defaults]
            fn.args.kw_defaults = [ast.Constant(None) if literal(d) else d for d in fn.args.kw_defaults]
        return ast.dump(tree, include_attributes=False)
    finally:
        for fn, (body, defaults, kw) in zip(functions, saved):
            fn.body, fn.args.defaults, fn.args.kw_defaults = body, defaults, kw


def _changed(old: ast.AST, new: ast.AST, old_lines: list[str], new_lines: list[str]) -> bool:
    """The body or a default differs (a default flows into the body); the same text is the same code."""
    if old_lines[old.lineno - 1 : old.end_lineno] == new_lines[new.lineno - 1 : new.end_lineno]:
        return False
    dump = lambda fn: [ast.dump(x) if x else "" for x in [*fn.body, *fn.args.defaults, *fn.args.kw_defaults]]  # noqa: E731
    return dump(old) != dump(new)


def _span(fn: ast.AST) -> tuple[int, int]:
    return min([fn.lineno, *(d.lineno for d in fn.decorator_list)]), fn.end_lineno


# Both functions below build many AST objects from judge slots' threads: held under pyparse's PARSE_LOCK.


def _locked(fn):
    @functools.wraps(fn)
    def run(*args, **kwargs):
        with PARSE_LOCK:
            return fn(*args, **kwargs)

    return run


@_locked
def changed_functions(before: str, after: str) -> list[tuple[str, tuple[int, int], tuple[int, int]]]:
    """(qualified name, (first, last) line in `before`, (first, last) line in `after`) of every outermost
    function whose body or defaults changed; meaningful for patches `screen` accepted."""
    old_fns, new_fns = outer_functions(ast.parse(before)), outer_functions(ast.parse(after))
    lines = source_lines(before), source_lines(after)
    return [(q, _span(o), _span(n)) for (q, o), (_, n) in zip(old_fns, new_fns) if _changed(o, n, *lines)]


@functools.lru_cache(maxsize=8)
def _rules(text: str) -> FileRules:
    """The rules of one file text (pure helpers are worked out once per text)."""
    return FileRules(ast.parse(text), text)


def _facts(judge: Judge, fn: ast.AST, scopes: dict, qual: str) -> Facts:
    """A function's Facts; a parameter whose default is not pure is read as what it might be."""
    scope = scopes.get((qual, fn.lineno))
    args = fn.args
    positional = [*args.posonlyargs, *args.args]
    pairs = [
        *zip(positional[len(positional) - len(args.defaults) :], args.defaults),
        *zip(args.kwonlyargs, args.kw_defaults),
    ]
    smuggled = {
        a.arg: s for a, d in pairs if d is not None and not literal(d) and (s := judge.expr_status(d)) != "pure"
    }
    return function_facts(
        fn,
        scope.globals if scope else set(),
        scope.locals if scope else set(),
        smuggled=smuggled,
        own=scope.own if scope else set(),
    )


def _tainted(rules: FileRules, changed: set[str]) -> set[str]:
    """Short names of the changed functions and of every function whose returned, yielded or raised
    values a tainted function's result may feed (by the data-flow slice of those statements)."""
    tainted = {q.split(".")[-1] for q in changed}
    while (grown := tainted | {f for f, mentions in rules.returns.items() if mentions & tainted}) != tainted:
        tainted = grown
    return tainted


def _generators(fn: ast.AST) -> list[bool]:
    """For the function and each def or lambda nested in it (in walk order): whether it is a generator."""
    out = []
    for scope in (n for n in ast.walk(fn) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))):
        todo, found = list(ast.iter_child_nodes(scope)), False
        while todo and not found:
            node = todo.pop()
            found = isinstance(node, (ast.Yield, ast.YieldFrom))
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                todo.extend(ast.iter_child_nodes(node))
        out.append(found)
    return out


def _check_function(judge: Judge, old: Facts, new: Facts, where: str, generators_kept: bool = False) -> list[str]:
    """Why one changed function is refused: structure it gained, imports, then the Judge's rules."""
    reasons = []
    # one more yield in a function that was already a generator (and no other function made one) hands
    # the consumer one more value, nothing else: it changes when no code runs
    same = {"Yield", "YieldFrom"} if generators_kept else set()
    gained = sorted(k for k in new.kinds if new.kinds[k] > old.kinds[k] and k not in same)
    if gained:
        reasons.append(f"{where}: adds {', '.join(gained)} (a patch changes statements, not structure)")
    if new.imports - old.imports or new.declared - old.declared:
        reasons.append(f"{where}: changes an import, global or nonlocal statement")
    return reasons + [
        f"{where}: {r}"
        for r in judge.violations(old, new) + kept_reasons(judge, old, new) + module_reach_reasons(judge, old, new)
    ]


def _state(rules: FileRules, changed: set[int]) -> dict[int, frozenset]:
    """Per changed function: the module-level data it may change in place or rebind (`global`): names the
    file binds by assignment (`CACHE = []`), and its functions and classes where an attribute or item of
    them is stored into (a builtin, an import or a def merely called is no state)."""
    found = {}
    for k in changed:
        facts, out = rules.helpers[id(rules.functions[k][1])][0], set()
        for u in facts.units:
            stored = {
                r
                for p in u.parts
                for n in ast.walk(p)
                if isinstance(n, (ast.Attribute, ast.Subscript)) and isinstance(n.ctx, ast.Store)
                for r in roots(n.value)
            }
            for n in (u.mutates | (u.binds & facts.declared)) - facts.locals - facts.params:
                kind, value = rules.kind(n, facts)
                if kind == "literal" and immutable(value) and n not in facts.declared:
                    continue  # `f(NAME)` with NAME = "x" or (1, 2): nothing changes that object in place
                kinds = {b.kind for b in rules.bindings.get(n, [])}
                if "import" not in kinds and (kinds - {"def", "class"} or (kinds & {"def", "class"} and n in stored)):
                    out.add(n)
        found[k] = frozenset(out)
    return found


def _feeds_unchanged_gadget(rules: FileRules, changed: set[int], tainted: set[str], state: frozenset) -> list[str]:
    """Gadgets in unchanged functions and module code must take no value a changed function computes
    (none it returns, none it left in a module-level object), except those whose names the boot script's
    name guard judges by value at run time (getattr, setattr, delattr, import_module)."""
    reasons = []
    for k, sites in rules.site_mentions.items():
        if k not in changed and any(
            not at_run and (m & tainted or (outliving and m & state)) for m, outliving, at_run in sites
        ):
            where = rules.functions[k][0] if k >= 0 else "module code"
            reasons.append(f"in {where} (unchanged): a gadget takes a value from a changed function")
    return reasons


@_locked
def screen(before: str, after: str, bodies: bool = True) -> list[str]:
    """Why a changed file is refused ([] when it is acceptable): see the module docstring. `bodies=False`
    (a task whose changed function runs only in the call jail, graph_planner/jail.py): rule 1 alone, the
    structure; what a body does cannot reach the test process there."""
    added = added_breaks(before, after)
    if added:
        return [f"adds {', '.join(added)}, which other tools read as a line break and Python does not"]
    try:
        raw = after.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate (review 22)
        return ["holds a lone surrogate, which no UTF-8 file can hold"]
    coding = _coding(raw)
    if coding != _coding(before.encode("utf-8")):
        return ["changes the source-encoding declaration (Python would run other text than the check reads)"]
    try:
        new_tree = parse_bounded(raw)  # bytes: decoded as the interpreter will decode the file
        text = raw.decode(coding or "utf-8")
        old_text = before.encode("utf-8").decode(coding or "utf-8")
    except (SyntaxError, ValueError, LookupError) as e:
        return [f"syntax error on line {getattr(e, 'lineno', '?')}: {getattr(e, 'msg', e)}"]
    try:
        old_tree = ast.parse(before.encode("utf-8"))
    except (SyntaxError, ValueError):
        return ["the file does not parse at the base commit, so no change to it can be checked"]
    old_fns, new_fns = outer_functions(old_tree), outer_functions(new_tree)
    if _skeleton(old_tree, [f for _, f in old_fns]) != _skeleton(new_tree, [f for _, f in new_fns]):
        return [
            "changes code outside function bodies (imports, classes, functions, signatures, decorators or "
            "module statements): a patch may change only the bodies of existing functions"
        ]
    lines = source_lines(old_text), source_lines(text)
    changed = [(k, q, o) for k, ((q, o), (_, n)) in enumerate(zip(old_fns, new_fns)) if _changed(o, n, *lines)]
    if not changed or not bodies:
        return []
    rules = _rules(text)  # its tree is the new file's, parsed from the same text: the same functions
    old_scopes, _ = function_scopes(old_text)
    chains, callables = rules.uses_with({k: old.body for k, _, old in changed})
    tainted = _tainted(rules, {q for _, q, _ in changed})
    state = _state(rules, {k for k, *_ in changed})
    judge = Judge(rules, chains, callables, tainted)
    reasons = hook_reasons(rules, [qual for _, qual, _ in changed])
    for k, qual, old in changed:
        # what the other changed functions leave in module data (its own changes: its slices, in order)
        judge.state = frozenset().union(*(v for j, v in state.items() if j != k))
        o, n = _facts(judge, old, old_scopes, qual), _facts(judge, rules.functions[k][1], rules.scopes, qual)
        kept = _generators(old) == _generators(rules.functions[k][1])
        reasons += _check_function(judge, o, n, f"in {qual.split('.')[-1]}", kept)
    return reasons + _feeds_unchanged_gadget(
        rules, {k for k, *_ in changed}, tainted, frozenset().union(*state.values())
    )
