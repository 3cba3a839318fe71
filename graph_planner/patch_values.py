"""What a value can hand on, for the patch check's state rules (graph_planner/patch_state.py: rule 7's imported
objects, graph_planner/patch_own.py: rule 9's own module data): which expressions may be, or hold, an
object they read, and which give a fresh value built from it (a number, a string, a key's item)."""

from __future__ import annotations

import ast

from graph_planner.patch_units import Facts

# Builtins whose result is a number, a bool, a string or a range: none of their arguments' objects.
SCALARS = frozenset("range len abs round ord chr hash id isinstance issubclass callable divmod any all format".split())


def immutable(value: ast.AST) -> bool:
    """A module-level value no code changes in place: a constant, a tuple of such, or a string built from
    a string constant (`r"(%s)" % "|".join(MONTHS)`, an f-string)."""
    if isinstance(value, ast.Tuple):
        return all(immutable(v) for v in value.elts)
    if isinstance(value, ast.BinOp) and isinstance(value.op, (ast.Mod, ast.Add)):
        return isinstance(value.left, ast.Constant) and isinstance(value.left.value, str)
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr == "join":
        return isinstance(value.func.value, ast.Constant) and isinstance(value.func.value.value, str)
    return isinstance(value, (ast.Constant, ast.JoinedStr))


# Operators whose builtin result holds neither operand nor its items (`"%s" % (T,)`, `n // N`, `1 << N`).
_FRESH_OPS = (ast.Mod, ast.FloorDiv, ast.Div, ast.Pow, ast.LShift, ast.RShift, ast.MatMult)
_DISPLAYS = (ast.List, ast.Tuple, ast.Set, ast.Dict, ast.ListComp, ast.SetComp, ast.DictComp, ast.Constant)


def inert(e: ast.AST) -> set[int]:
    """Ids of the nodes of `e` whose object the value of `e` cannot be or hold: a subscript's key
    (`table[KEY]` is an item of table), a comparison's operands (a bool), an operand of `%`, `//`, `<<`...,
    the right side of `-`, and the count of a repeated display (`[0] * SIZE`)."""
    out: set[int] = set()
    for n in ast.walk(e):
        parts = []
        if isinstance(n, ast.Subscript):
            parts = [n.slice]
        elif isinstance(n, ast.Compare):
            parts = [n.left, *n.comparators]
        elif isinstance(n, ast.BinOp) and isinstance(n.op, _FRESH_OPS):
            parts = [n.left, n.right]
        elif isinstance(n, ast.BinOp) and isinstance(n.op, ast.Sub):
            parts = [n.right]
        elif isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mult):
            parts = [b for a, b in ((n.left, n.right), (n.right, n.left)) if isinstance(a, _DISPLAYS)]
        out |= {id(x) for p in parts for x in ast.walk(p)}
    return out


def bindings(nodes: list[ast.AST], facts: Facts) -> list[tuple[list[ast.AST], ast.AST]]:
    """(targets, value) of every binding: assignments, walrus, for and comprehension targets, with-as (a
    loop's header is a unit of its own: its target is found through its parent)."""
    out = []
    for n in nodes:
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            top = n
            while isinstance(facts.parent(top), (ast.Tuple, ast.List, ast.Starred)):
                top = facts.parent(top)
            loop = facts.parent(top)
            if isinstance(loop, (ast.For, ast.AsyncFor, ast.comprehension)) and loop.target is top:
                out.append(([n], loop.iter))
    for a in nodes:
        if isinstance(a, (ast.Assign, ast.NamedExpr, ast.AnnAssign, ast.AugAssign)) and a.value is not None:
            out.append((a.targets if isinstance(a, ast.Assign) else [a.target], a.value))
        elif isinstance(a, (ast.For, ast.AsyncFor, ast.comprehension)):
            out.append(([a.target], a.iter))
        elif isinstance(a, ast.withitem) and a.optional_vars is not None:
            out.append(([a.optional_vars], a.context_expr))
    return out


def fresh_augmented(facts: Facts, value: ast.AST) -> bool:
    """`value` is the right side of `x -= v`, `x %= v`, `x *= v`...: x gets none of v's objects (`+=`, `|=`,
    `&=` and `^=` may bring its items in: `parts += [TABLE]`)."""
    p = facts.parent(value)
    return isinstance(p, ast.AugAssign) and p.value is value and not isinstance(p.op, _GATHERING)


_GATHERING = (ast.Add, ast.BitOr, ast.BitAnd, ast.BitXor)


def fresh_locals(facts: Facts) -> set[str]:
    """Locals bound only to displays, comprehensions, constants and f-strings: never a class, so
    `parts.append(x)` on one is a bound method's call, not `dict.update(x, ...)`'s form."""
    nodes = [n for u in facts.units for part in u.parts for n in ast.walk(part)]
    kinds = (*_DISPLAYS, ast.JoinedStr, ast.GeneratorExp)
    values: dict[str, list[ast.AST]] = {}
    for targets, value in bindings(nodes, facts):
        for t in targets:
            for x in ast.walk(t):
                if isinstance(x, ast.Name):
                    # a tuple target unpacks the value: its parts are not the value itself
                    values.setdefault(x.id, []).append(value if t is x else None)
    return {
        name
        for name, vs in values.items()
        if name in facts.locals and name not in facts.params and all(isinstance(v, kinds) for v in vs)
    }
