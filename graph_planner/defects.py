"""Proposals for three more defects a function's own code shows, each pointing at the statement it lacks.

A removed statement often leaves a trace a linter would flag, and the trace says what to put back and where:

  maybe unbound   a local read on a path where nothing bound it (pylint's "possibly-used-before-assignment"):
                  one branch of an `if` chain binds it and another does not, so the branch that does not lost
                  its assignment. It is bound again at the end of each such branch, where a binding sibling
                  binds it and in the gaps before the read, with what the function assigns to that name
                  elsewhere, as is or with one module name swapped for a sibling of the same stem (``padfn =
                  _padleft`` -> ``padfn = _padboth``), then what the sibling gives its other names (``date =
                  now - value`` where the sibling has ``delta = now - value``) and the module's short strings;
  never filled    a local created empty (``[]``, ``set()``, ``defaultdict(int)``) and read later, but never
                  added to, so the statement that filled it is gone: ``v.append(x)`` / ``v.add(x)`` /
                  ``v[x] += 1`` with x a loop variable or local, in each lone `pass` and loop gap after it;
  emptied branch  a branch of an `if` chain emptied to `pass`: the statement its siblings, the `if` just
                  before a lone one, or the code after the chain run, as is, with a string's word turned to its
                  opposite (``"tomorrow"`` -> ``"yesterday"``) or with one function name swapped for a sibling
                  of the same stem (``return _modern_slugify(...)`` -> ``return _legacy_slugify(...)``), and
                  under a ``callable(p)`` test, a call of `p` with the function's other parameters.

Removed idioms (a guard, a default) are graph_planner.idioms'; names left unused, graph_planner.leftovers'.

Every text is planact's enumeration from the task's source (provenance ``menu``), judged like any candidate.
"""

from __future__ import annotations

import ast
import copy
import os
import re
from collections import Counter

from graph_planner.definite import binds, definite, exprs, stores, unsafe_read
from graph_planner.pyparse import parse
from graph_planner.unbound import name_pieces, places_around, related

MAX_PER_DEFECT = 60  # proposals per defect found: the values are few and exact, the places fewer
# descriptions of the proposals a defect of the function's own code points at (not the unbound-name grammar's
# long tail, not the guards): few a function, each likely where it appears
POINTED = ("bind `", "fill `", "emptied branch: ", "call unused `", "delegate ")
# calls that read a container and never add to it: passing it to one of these leaves it empty
READERS = frozenset(
    "len list tuple set dict sorted reversed iter sum any all enumerate zip map filter min max bool str repr".split()
)
EMPTY = {"[]": "list", "list()": "list", "set()": "set", "defaultdict(int)": "count", "Counter()": "count"}
EMPTY |= {"collections.defaultdict(int)": "count", "collections.Counter()": "count"}
FILL = {"list": "{v}.append({x})", "set": "{v}.add({x})", "count": "{v}[{x}] += 1"}


def pointed(description: str) -> bool:
    """Whether a proposal's description says a defect of the function's own code points at it."""
    return description.startswith(POINTED)


def _branches(stmt: ast.If) -> list[list[ast.stmt]]:
    """The bodies of an `if`/`elif`/`else` chain, in order (an empty `else` left out)."""
    out = [stmt.body]
    while len(stmt.orelse) == 1 and isinstance(stmt.orelse[0], ast.If):
        stmt = stmt.orelse[0]
        out.append(stmt.body)
    return out + ([stmt.orelse] if stmt.orelse else [])


def _end(branch: list[ast.stmt], lines: list[str]) -> tuple[int, str, ast.stmt | None]:
    """Where a statement goes at the end of `branch`: (line index, indent, a lone `pass` it replaces)."""
    indent = lines[branch[0].lineno - 1][: branch[0].col_offset]
    if len(branch) == 1 and isinstance(branch[0], ast.Pass):
        return branch[0].lineno - 1, indent, branch[0]
    return branch[-1].end_lineno, indent, None


TYPES = ("int", "float", "str", "bytes", "bool", "complex", "list", "tuple", "dict", "set")


def _swaps(value: ast.AST, siblings: list[str]) -> list[str]:
    """`value` with one module name it reads (a function or class) replaced by another of the same stem
    (``_padleft`` -> ``_padboth``), or one builtin type by another (``return bytes`` -> ``return float``)."""
    out = []
    for n in ast.walk(value):
        if not (isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)):
            continue
        kin = [s for s in siblings if related(s, n.id)] if n.id in siblings else TYPES if n.id in TYPES else []
        kin = sorted(kin, key=lambda s: _likeness(s, n.id))
        for s in kin:
            if s != n.id:
                old, n.id = n.id, s
                out.append(ast.unparse(value))
                n.id = old
    return out


def _likeness(a: str, b: str) -> tuple[int, int, int]:
    """A sort key, most alike first: a longer common prefix, then as many word pieces, then as long."""
    prefix = len(os.path.commonprefix([a, b]))
    return -prefix, abs(len(name_pieces(a)) - len(name_pieces(b))), abs(len(a) - len(b))


def _mirrors(stmt: ast.AST) -> list[str]:
    """`stmt` with the operands of one `+` swapped: sibling branches are often mirrors (``text + blank`` at the
    top, ``blank + text`` at the bottom)."""
    out, stmt = [], copy.deepcopy(stmt)
    for n in ast.walk(stmt):
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Add):
            n.left, n.right = n.right, n.left
            out.append(ast.unparse(stmt))
            n.left, n.right = n.right, n.left
    return out


OPPOSITES = dict(
    p
    for a, b in (
        ("left", "right"),
        ("top", "bottom"),
        ("start", "end"),
        ("begin", "end"),
        ("first", "last"),
        ("min", "max"),
        ("head", "tail"),
        ("prefix", "suffix"),
        ("upper", "lower"),
        ("before", "after"),
        ("above", "below"),
        ("leading", "trailing"),
        ("open", "close"),
        ("inner", "outer"),
        ("next", "previous"),
        ("tomorrow", "yesterday"),
        ("future", "past"),
        ("positive", "negative"),
        ("input", "output"),
        ("read", "write"),
        ("enable", "disable"),
        ("show", "hide"),
        ("forward", "backward"),
        ("increase", "decrease"),
        ("add", "remove"),
        ("push", "pop"),
        ("success", "failure"),
    )
    for p in ((a, b), (b, a))
)


def _opposites(stmt: ast.AST) -> list[str]:
    """`stmt` with one string constant's word replaced by its opposite: the branch for "yesterday" says what
    the branch for "tomorrow" says, in the other direction."""
    out, stmt = [], copy.deepcopy(stmt)
    for n in ast.walk(stmt):
        if isinstance(n, ast.Constant) and isinstance(n.value, str):
            old = n.value
            for w in _dedup(re.findall(r"[a-z]+", old.lower())):
                if w in OPPOSITES:
                    n.value = re.sub(rf"\b{w}\b", OPPOSITES[w], old)
                    if n.value != old:
                        out.append(ast.unparse(stmt))
            n.value = old
    return out


def _words(node: ast.AST) -> set[str]:
    return set(re.findall(r"[a-z]+", ast.unparse(node).lower()))


def _opposed(a: ast.AST, b: ast.AST) -> bool:
    """Whether two branch tests name opposite words (``align == "left"`` and ``align == "right"``)."""
    words = _words(b)
    return any(OPPOSITES.get(w) in words for w in _words(a))


def _dedup(items: list) -> list:
    seen, out = set(), []
    for item in items:
        if item not in seen:
            seen.add(item)
            out.append(item)
    return out


def _bind_places(chain: ast.If, branch: list[ast.stmt], name: str, lines: list[str]) -> list[tuple]:
    """Where a branch lacking `name`'s binding gets it: at the end, and at the position a binding sibling binds it
    (``date = ...`` first in one branch is first in the other)."""
    out = [_end(branch, lines)]
    for other in _branches(chain):
        k = next((k for k, s in enumerate(other) if definite([s], name)), None)
        if other is not branch and k is not None and k < len(branch) and not isinstance(branch[k], ast.Pass):
            out.append((branch[k].lineno - 1, lines[branch[k].lineno - 1][: branch[k].col_offset], None))
    return _dedup(out)


def _is_str(value: ast.expr) -> bool:
    return isinstance(value, ast.Constant) and isinstance(value.value, str)


def _short_strings(mod: ast.Module, most: int = 8) -> list[str]:
    """The module's strings of at most 3 characters, most used first (separators, signs, units)."""
    seen = Counter(ast.unparse(n) for n in ast.walk(mod) if _is_str(n) and len(n.value) <= 3)
    return [text for text, _ in seen.most_common(most)]


def _maybe_unbound(fn, lines, mod, siblings, local_names, blocks, fits) -> list[tuple]:
    params = {a.arg for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs}
    params |= {a.arg for a in (fn.args.vararg, fn.args.kwarg) if a is not None}
    declared = {n for s in ast.walk(fn) if isinstance(s, (ast.Global, ast.Nonlocal)) for n in s.names}
    out = []
    for name in sorted(local_names - params - declared):
        hit = unsafe_read(fn.body, name)
        if hit is None:
            continue
        body, i = hit
        own = [n.value for n in ast.walk(fn) if isinstance(n, ast.Assign) and any(stores(t, name) for t in n.targets)]
        if not own:
            continue  # bound nowhere: graph_planner.unbound's case
        swaps = [s for v in own for s in _swaps(copy.deepcopy(v), siblings)]
        # a branch binds what its siblings do not, most often: a sibling name the function never reads comes first
        used = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name)}
        fresh = [v for v in swaps if {n.id for n in ast.walk(parse(v, mode="eval")) if isinstance(n, ast.Name)} - used]
        # the end of each branch of a chain before the read that binds `name` in some branches and not in this one
        chains = [s for s in body[:i] if isinstance(s, ast.If) and not binds(s, name)]
        chains = [c for c in chains if any(definite(o, name) for o in _branches(c))]
        lacking = [(c, b) for c in chains for b in _branches(c) if not definite(b, name)]
        ends = [p for c, b in lacking for p in _bind_places(c, b, name, lines)]
        # branches are often symmetric: what a binding sibling gives another name (``date = value; delta = now -
        # value`` beside ``delta = value``), and another short string where the sibling binds one (``""``/``"-"``)
        others = [
            ast.unparse(a.value)
            for c in chains
            for b in _branches(c)
            if definite(b, name)
            for a in b
            if isinstance(a, ast.Assign) and not any(stores(t, name) for t in a.targets)
        ]
        strings = _short_strings(mod) if any(_is_str(v) for v in own) else []
        values = _dedup(fresh + [ast.unparse(v) for v in own] + swaps + others + strings)
        values = [v for v in values if fits(v)]
        places = ends + [(at, indent, None) for at, indent in places_around(blocks, body[i].lineno, lines)]
        for at, indent, lone in _dedup(places):
            for v in values:
                why = f"bind `{name}` on the path that lacks it at line {at + 1}: {v}"
                out.append((at, indent, f"{name} = {v}\n", lone, why))
    return out[: MAX_PER_DEFECT * 4]


def _kind(value: ast.expr) -> str | None:
    """'list', 'set' or 'count' for an empty container expression, else None."""
    return EMPTY.get(ast.unparse(value))


def _filled(fn: ast.AST, name: str) -> bool:
    """Whether anything may add to `name`: a method call on it, an item stored, `+=`, or a call that is passed
    it (other than a builtin that only reads)."""
    for n in ast.walk(fn):
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == name:
            return True
        if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name) and n.value.id == name:
            if not isinstance(n.ctx, ast.Load):
                return True
        if isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name) and n.target.id == name:
            return True
        if isinstance(n, ast.Call) and any(isinstance(a, ast.Name) and a.id == name for a in n.args):
            if not (isinstance(n.func, ast.Name) and n.func.id in READERS):
                return True
    return False


def loop_targets(fn: ast.AST, line: int) -> list[str]:
    """Names the loops around `line` bind, innermost first."""
    loops = [n for n in ast.walk(fn) if isinstance(n, (ast.For, ast.AsyncFor)) and n.lineno < line <= n.end_lineno]
    loops.sort(key=lambda n: -n.lineno)
    return [t.id for n in loops for t in ast.walk(n.target) if isinstance(t, ast.Name)]


def _made_before(fn: ast.AST, line: int) -> list[str]:
    """Names assigned inside the innermost loop around `line` before it, nearest first: what a loop body
    builds is what it adds (``upper = ...; out.append(upper)``)."""
    loops = [n for n in ast.walk(fn) if isinstance(n, (ast.For, ast.AsyncFor)) and n.lineno < line <= n.end_lineno]
    if not loops:
        return []
    loop = max(loops, key=lambda n: n.lineno)
    made = [
        (s.lineno, t.id)
        for s in ast.walk(loop)
        if isinstance(s, ast.Assign) and s.lineno < line
        for t in ast.walk(s.targets[0])
        if isinstance(t, ast.Name)
    ]
    return [name for _, name in sorted(made, key=lambda m: -m[0])]


def _never_filled(fn, lines, local_names, blocks, fits) -> list[tuple]:
    made = {}
    for n in ast.walk(fn):
        if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name):
            made.setdefault(n.targets[0].id, []).append(n)
    out = []
    for name, assigns in sorted(made.items()):
        kinds = {_kind(a.value) for a in assigns}
        if len(kinds) != 1 or None in kinds or _filled(fn, name):
            continue
        after = max(a.end_lineno for a in assigns)
        reads = [n.lineno for n in ast.walk(fn) if isinstance(n, ast.Name) and n.id == name and n.lineno > after]
        if not reads:
            continue
        (kind,) = kinds
        places = []
        for body, _top in blocks:
            if body[0].lineno <= after or body[0].lineno > max(reads) or not loop_targets(fn, body[0].lineno):
                continue  # a container is filled in a loop after it is made: a gap elsewhere is a guess too far
            end = _end(body, lines)
            # a lone `pass` is replaced (first: an emptied block); elsewhere every gap of the loop's block
            places += [end] if end[2] is not None else [(s.lineno - 1, end[1], None) for s in body] + [end]
        places.sort(key=lambda p: p[2] is None)
        for at, indent, lone in places:
            line = at + 1
            xs = _dedup(_made_before(fn, line) + loop_targets(fn, line) + sorted(local_names - {name}))
            for x in [x for x in xs if fits(x)][:MAX_PER_DEFECT]:
                text = FILL[kind].format(v=name, x=x)
                why = f"fill `{name}`, created empty and never added to, at line {line}: {text}"
                out.append((at, indent, text + "\n", lone, why))
    return out[: MAX_PER_DEFECT * 4]


def parameters(fn: ast.AST, keep_self: bool = False) -> list[str]:
    """The function's positional parameters, in order (`self` and `cls` left out unless `keep_self`)."""
    return [a.arg for a in fn.args.posonlyargs + fn.args.args if keep_self or a.arg not in ("self", "cls")]


def _emptied_branches(fn, lines, siblings, blocks, fits) -> list[tuple]:
    out = []
    chains = [s for body, _ in blocks for s in body if isinstance(s, ast.If)]
    parent = {id(s): (body, i) for body, _ in blocks for i, s in enumerate(body)}
    for chain in chains:
        branches, stmt, tests = _branches(chain), chain, [chain.test]
        while len(stmt.orelse) == 1 and isinstance(stmt.orelse[0], ast.If):
            stmt = stmt.orelse[0]
            tests.append(stmt.test)
        body, i = parent.get(id(chain), ([], -1))
        after = body[i + 1 : i + 2]
        # a lone `if` after another (`if days == 1: ...` then `if days == -1: ...`) is that one's sibling too
        before = [body[i - 1].body[-1]] if i > 0 and isinstance(body[i - 1], ast.If) and len(branches) == 1 else []
        for k, branch in enumerate(branches):
            if not (len(branch) == 1 and isinstance(branch[0], ast.Pass)):
                continue
            test = tests[k] if k < len(tests) else None
            # a sibling whose test names the opposite (`"top"` for `"bottom"`) is the likeliest mirror: first,
            # mirrored first
            facing = [j for j in range(len(tests)) if j != k and test is not None and _opposed(test, tests[j])]
            if not facing and test is not None and _words(test) & OPPOSITES.keys() and len(branches) > len(tests):
                facing = [len(branches) - 1]  # the `else` is the other side ("bottom" tested, "top" the default)
            donors = [branches[j][-1] for j in facing]
            texts = [t for d in donors if isinstance(d, (ast.Return, ast.Expr, ast.Assign)) for t in _mirrors(d)]
            donors += [o[-1] for j, o in enumerate(branches) if o is not branch and j not in facing] + before + after
            if isinstance(test, ast.Call) and ast.unparse(test.func) == "callable" and test.args:
                p = ast.unparse(test.args[0])
                args = ", ".join(a for a in parameters(fn) if a != p)
                texts += [f"return {p}({args})", f"{p}({args})"]
            for d in donors:
                if isinstance(d, (ast.Return, ast.Expr, ast.Assign)):
                    texts += [ast.unparse(d), *_opposites(d), *_swaps(copy.deepcopy(d), siblings), *_mirrors(d)]
            at, indent, lone = _end(branch, lines)
            for text in _dedup(texts)[:MAX_PER_DEFECT]:
                if all(fits(ast.unparse(e)) for e in exprs(parse(text).body[0])):
                    why = f"emptied branch: `pass` -> `{text.splitlines()[0]}` at line {at + 1}"
                    out.append((at, indent, text + "\n", lone, why))
    return out


def defect_insertions(
    fn: ast.AST, lines: list[str], mod: ast.Module, local_names: set[str], blocks: list, fits
) -> list[tuple[int, str, str, ast.stmt | None, str]]:
    """(line index, indent, statement, lone `pass` it replaces or None, description) for each defect above."""
    siblings = sorted(n.name for n in mod.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)))
    return (
        _maybe_unbound(fn, lines, mod, siblings, local_names, blocks, fits)
        + _never_filled(fn, lines, local_names, blocks, fits)
        + _emptied_branches(fn, lines, siblings, blocks, fits)
    )
