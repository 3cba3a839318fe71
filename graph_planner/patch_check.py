"""The patch check: a patch may change the bodies of functions that already exist, and nothing else.

Built from an allow-list, not a deny-list. A changed file is accepted only when

* Python would execute the text the check reads: no source-encoding declaration is added or changed
  (a `coding:` line makes Python decode the same bytes into other text), and the check parses the
  encoded bytes as Python reads them;
* everything outside function bodies is unchanged: imports, classes, module statements, decorators,
  signatures (compared as syntax trees with every outermost function body blanked; a default that is a
  literal may change, as a fix of a wrong default must), so no class, function, method, import or
  module-level statement can be added;
* inside each changed function, the new body
  - adds no statement of a kind the old body did not have as often: import, global, nonlocal, class,
    def, lambda, match, yield, await;
  - reads only names it binds itself, names the old body already read, names the file defines, safe
    builtins (`SAFE_BUILTINS`), and names imported from modules that give no process, import-system,
    file or introspection power (`CAPABILITY_MODULES`);
  - reaches no dunder attribute or string (`__globals__`, "__class__") and no frame, code or traceback
    attribute (`f_globals`, `gi_frame`, `tb_frame`, `co_code`...) the old body did not already use.

What it cannot judge is meaning: a patch inside these rules can still be wrong, and the tests decide.
"""

from __future__ import annotations

import ast
import builtins
import re
from collections import Counter

# Builtins a repair may introduce: values, containers, iteration, arithmetic, exceptions. Not eval /
# exec / compile / open / __import__ / globals / locals / vars / getattr / setattr / delattr / type /
# object / memoryview / breakpoint / input / exit: a body may keep those only where it already had them.
SAFE_BUILTINS = frozenset(
    {
        "abs",
        "all",
        "any",
        "ascii",
        "bin",
        "bool",
        "bytearray",
        "bytes",
        "callable",
        "chr",
        "complex",
        "dict",
        "divmod",
        "enumerate",
        "filter",
        "float",
        "format",
        "frozenset",
        "hash",
        "hex",
        "int",
        "isinstance",
        "issubclass",
        "iter",
        "len",
        "list",
        "map",
        "max",
        "min",
        "next",
        "oct",
        "ord",
        "pow",
        "print",
        "range",
        "repr",
        "reversed",
        "round",
        "set",
        "slice",
        "sorted",
        "str",
        "sum",
        "super",
        "tuple",
        "zip",
        "NotImplemented",
        "Ellipsis",
        "True",
        "False",
        "None",
    }
    | {n for n, v in vars(builtins).items() if isinstance(v, type) and issubclass(v, BaseException)}
)

# Modules whose names give a body power over processes, files, the import system, the interpreter or
# the test runner; a name imported from one may appear in a body only where it already did.
CAPABILITY_MODULES = frozenset(
    {
        "os",
        "sys",
        "subprocess",
        "builtins",
        "importlib",
        "ctypes",
        "signal",
        "gc",
        "inspect",
        "atexit",
        "threading",
        "_thread",
        "multiprocessing",
        "concurrent",
        "asyncio",
        "socket",
        "select",
        "selectors",
        "pytest",
        "_pytest",
        "unittest",
        "shutil",
        "pathlib",
        "io",
        "tempfile",
        "glob",
        "fnmatch",
        "types",
        "marshal",
        "pickle",
        "shelve",
        "code",
        "codeop",
        "runpy",
        "traceback",
        "linecache",
        "site",
        "sysconfig",
        "pkgutil",
        "zipimport",
        "zipfile",
        "tarfile",
        "mmap",
        "resource",
        "faulthandler",
        "tracemalloc",
        "weakref",
        "fcntl",
        "pty",
        "posix",
        "dis",
        "ast",
        "copyreg",
        "__main__",
        "http",
        "urllib",
    }
)

# Statement and expression kinds a body may not gain.
_COUNTED = (
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
_DUNDER = re.compile(r"^__\w+__$")
_INTROSPECTION = re.compile(r"^(f|gi|cr|ag|tb|co)_\w+$")
_BENIGN_DUNDERS = frozenset({"__init__", "__name__", "__qualname__", "__doc__"})
_CODING = re.compile(rb"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)")
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


def _coding(source: bytes) -> str | None:
    """The encoding a PEP 263 declaration on the first two lines names, or None."""
    for line in source.splitlines()[:2]:
        m = _CODING.match(line)
        if m:
            return m.group(1).decode("ascii", "replace").lower().replace("_", "-")
        if line.strip() and not line.lstrip().startswith(b"#"):
            break
    return None


def _outer_functions(tree: ast.AST) -> list[ast.AST]:
    """Functions not nested in another function, in source order (methods included)."""
    out, todo = [], [tree]
    while todo:
        node = todo.pop(0)
        for child in ast.iter_child_nodes(node):
            if isinstance(child, _FUNCTIONS):
                out.append(child)
            else:
                todo.append(child)
    return sorted(out, key=lambda f: (f.lineno, f.col_offset))


def _literal(node: ast.AST | None) -> bool:
    """A default value that carries no code: a constant, or a negated one."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        node = node.operand
    return isinstance(node, ast.Constant)


def _skeleton(tree: ast.Module, functions: list[ast.AST]) -> str:
    """The module with every outermost function body replaced by `pass` and its literal defaults by None
    (a fix may change `size=2` back to `size=1`), as a dump; the tree is restored afterwards."""
    saved = [(fn.body, fn.args.defaults, fn.args.kw_defaults) for fn in functions]
    try:
        for fn in functions:
            fn.body = [ast.Pass()]
            fn.args.defaults = [ast.Constant(None) if _literal(d) else d for d in fn.args.defaults]
            fn.args.kw_defaults = [ast.Constant(None) if _literal(d) else d for d in fn.args.kw_defaults]
        return ast.dump(tree, include_attributes=False)
    finally:
        for fn, (body, defaults, kw) in zip(functions, saved):
            fn.body, fn.args.defaults, fn.args.kw_defaults = body, defaults, kw


def _body(fn: ast.AST) -> ast.Module:
    return ast.Module(body=list(fn.body), type_ignores=[])


def _bound(fn: ast.AST) -> set[str]:
    """Names the function binds itself: parameters, assignment, loop, with, except and comprehension targets."""
    names = {
        a.arg
        for a in [
            *fn.args.posonlyargs,
            *fn.args.args,
            *fn.args.kwonlyargs,
            *filter(None, [fn.args.vararg, fn.args.kwarg]),
        ]
    }
    for node in ast.walk(_body(fn)):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
            names.add(node.name)
    return names


def _module_names(tree: ast.Module) -> tuple[set[str], dict[str, str]]:
    """(names the file defines by def / class / assignment, imported name -> top-level module)."""
    defined, imported = set(), {}
    for node in ast.walk(tree):
        if isinstance(node, (*_FUNCTIONS, ast.ClassDef)):
            defined.add(node.name)
        elif isinstance(node, ast.Import):
            for a in node.names:
                imported[a.asname or a.name.split(".")[0]] = a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom):
            top = "." if node.level else (node.module or "").split(".")[0]
            for a in node.names:
                imported[a.asname or a.name] = top
    for node in tree.body:  # module-level assignments only: a function's locals are not the file's
        for target in ast.walk(node) if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)) else []:
            if isinstance(target, ast.Name) and isinstance(target.ctx, ast.Store):
                defined.add(target.id)
    return defined - set(imported), imported


def _uses(fn: ast.AST) -> tuple[set[str], set[str], set[str], Counter]:
    """(names read, attributes, string constants, counted node kinds) of a function body."""
    names, attrs, strings, kinds = set(), set(), set(), Counter()
    for node in ast.walk(_body(fn)):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            names.add(node.id)
        elif isinstance(node, ast.Attribute):
            attrs.add(node.attr)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            strings.add(node.value)
        if isinstance(node, _COUNTED):
            kinds[type(node).__name__] += 1
    return names, attrs, strings, kinds


def _only_type_of(fn: ast.AST) -> bool:
    """Every use of `type` in the body is a one-argument call, `type(x)`."""
    calls = [
        n
        for n in ast.walk(_body(fn))
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "type"
    ]
    uses = [n for n in ast.walk(_body(fn)) if isinstance(n, ast.Name) and n.id == "type"]
    return len(uses) == len(calls) and all(len(c.args) == 1 and not c.keywords for c in calls)


def _check_function(old: ast.AST, new: ast.AST, defined: set[str], imported: dict[str, str]) -> list[str]:
    o_names, o_attrs, o_strings, o_kinds = _uses(old)
    n_names, n_attrs, n_strings, n_kinds = _uses(new)
    where = f"in {new.name}"
    reasons = []
    gained = sorted(k for k in n_kinds if n_kinds[k] > o_kinds[k])
    if gained:
        reasons.append(f"{where}: adds {', '.join(gained)} (a patch changes statements, not structure)")
    allowed = _bound(new) | o_names | SAFE_BUILTINS
    if _only_type_of(new):
        allowed.add("type")  # type(x) asks a value's type; only type(name, bases, dict) builds a class
    bad_names = []
    for name in sorted(n_names - allowed):
        if name in defined:
            continue
        if name in imported and imported[name] not in CAPABILITY_MODULES:
            continue
        bad_names.append(name)
    if bad_names:
        reasons.append(
            f"{where}: reads {', '.join(bad_names)}, which the function did not use (process, file, "
            "import-system or introspection names, or names the file does not define)"
        )
    bad_attrs = sorted(
        a for a in n_attrs - o_attrs if (_DUNDER.match(a) and a not in _BENIGN_DUNDERS) or _INTROSPECTION.match(a)
    )
    bad_attrs += sorted(s for s in n_strings - o_strings if _DUNDER.match(s) and s not in _BENIGN_DUNDERS)
    if bad_attrs:
        reasons.append(f"{where}: reaches {', '.join(bad_attrs)} (dunder or frame/code attributes)")
    return reasons


def screen(before: str, after: str) -> list[str]:
    """Why a changed file is refused ([] when it is acceptable): see the module docstring."""
    raw = after.encode("utf-8")
    if _coding(raw) != _coding(before.encode("utf-8")):
        return ["changes the source-encoding declaration (Python would run other text than the check reads)"]
    try:
        new_tree = ast.parse(raw)  # bytes: decoded as the interpreter will decode the file
    except (SyntaxError, ValueError) as e:
        return [f"syntax error on line {getattr(e, 'lineno', '?')}: {getattr(e, 'msg', e)}"]
    try:
        old_tree = ast.parse(before.encode("utf-8"))
    except (SyntaxError, ValueError):
        return ["the file does not parse at the base commit, so no change to it can be checked"]
    old_fns, new_fns = _outer_functions(old_tree), _outer_functions(new_tree)
    if _skeleton(old_tree, old_fns) != _skeleton(new_tree, new_fns):
        return [
            "changes code outside function bodies (imports, classes, functions, signatures, decorators or "
            "module statements): a patch may change only the bodies of existing functions"
        ]
    defined, imported = _module_names(old_tree)
    reasons = []
    for old, new in zip(old_fns, new_fns):
        if ast.dump(_body(old)) != ast.dump(_body(new)):
            reasons += _check_function(old, new, defined, imported)
    return reasons


def _span(fn: ast.AST) -> tuple[int, int]:
    """(first line, last line) of a function: its first decorator's line, or its `def` line, to its end."""
    return min([fn.lineno, *(d.lineno for d in fn.decorator_list)]), fn.end_lineno


def _qualnames(tree: ast.Module) -> dict[int, str]:
    """id(function node) -> dotted name (`Class.method`) of every outermost function (methods included)."""
    names, todo = {}, [(tree, "")]
    while todo:
        node, prefix = todo.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, _FUNCTIONS):
                names[id(child)] = prefix + child.name
            elif isinstance(child, ast.ClassDef):
                todo.append((child, f"{prefix}{child.name}."))
            else:
                todo.append((child, prefix))
    return names


def changed_functions(before: str, after: str) -> list[tuple[str, tuple[int, int], tuple[int, int]]]:
    """(dotted name, lines in `before`, lines in `after`) of every outermost function whose body changed;
    meaningful for a patch `screen` accepted (same functions, in the same order)."""
    old_tree, new_tree = ast.parse(before.encode("utf-8")), ast.parse(after.encode("utf-8"))
    names = _qualnames(new_tree)
    return [
        (names.get(id(new), new.name), _span(old), _span(new))
        for old, new in zip(_outer_functions(old_tree), _outer_functions(new_tree))
        if ast.dump(_body(old)) != ast.dump(_body(new))
    ]
