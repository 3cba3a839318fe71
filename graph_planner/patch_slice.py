"""Data-flow slices, for the patch check's gadget rule (graph_planner/patch_check.py).

A slice is backward and flow-sensitive: the statements that may bind or change the names a gadget's
inputs read (assignment, an attribute or item store, a method-call receiver, a call argument), those
before it or in a loop around it, with the headers of their blocks, again for the names those read.
"""

from __future__ import annotations

import ast

from graph_planner.patch_units import Facts, Unit


def roots(node: ast.AST) -> set[str]:
    """The names whose objects an attribute / subscript / call chain may reach: `x` in `x.a[1].b`; every
    name a base that is no plain name reads (`(a or b).append(...)`, `[a][0][-1] = ...` change a or b)."""
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call, ast.Starred)):
        node = node.func if isinstance(node, ast.Call) else node.value
    if isinstance(node, ast.Name):
        return {node.id}
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _pattern_names(node: ast.AST) -> set[str]:
    """Names a match pattern captures (`case (_, name)`, `case [*rest]`, `case {**rest}`)."""
    out = set()
    for n in ast.walk(node):
        if isinstance(n, (ast.MatchAs, ast.MatchStar)) and n.name:
            out.add(n.name)
        elif isinstance(n, ast.MatchMapping) and n.rest:
            out.add(n.rest)
    return out


def _call_may_change(call: ast.Call) -> set[str]:
    """Names whose object a call may change: the receiver of a method, every argument (the callee may)."""
    out = set()
    if isinstance(call.func, ast.Attribute):
        out |= roots(call.func.value)
    elif not isinstance(call.func, ast.Name):  # `fns[0](x)` may be a bound method of anything it reads
        out |= roots(call.func)
    return out.union(*(roots(a) for a in [*call.args, *(k.value for k in call.keywords)]))


def binds(parts: list[ast.AST]) -> set[str]:
    """Names a statement may bind or change: assignment and loop targets, the base of an attribute or
    item store, the receiver of a method call and every argument of a call (the callee may change it)."""
    out = set()
    for part in parts:
        out |= _pattern_names(part)
        for n in ast.walk(part):
            if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load):
                out.add(n.id)
            elif isinstance(n, (ast.Attribute, ast.Subscript)) and not isinstance(n.ctx, ast.Load):
                out |= roots(n.value)
            elif isinstance(n, ast.Call):
                out |= _call_may_change(n)
            elif isinstance(n, ast.alias):
                out.add((n.asname or n.name).split(".")[0])
            elif isinstance(n, (ast.Global, ast.Nonlocal)):
                out |= set(n.names)
    return out


def mutates(parts: list[ast.AST]) -> set[str]:
    """Names whose object a statement may change in place (not rebind): the base of an attribute or item
    store, the target of an augmented assignment, the receiver of a method call, every argument of a call."""
    out = set()
    for part in parts:
        for n in ast.walk(part):
            if isinstance(n, (ast.Attribute, ast.Subscript)) and not isinstance(n.ctx, ast.Load):
                out |= roots(n.value)
            elif isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name):
                out.add(n.target.id)  # `alias += [x]` extends the list alias shares with others
            elif isinstance(n, ast.Call):
                out |= _call_may_change(n)
    return out


def names_outside(unit: Unit, inside: list[ast.AST]) -> set[str]:
    """Names a unit mentions outside the given sub-expressions of it."""
    skip, out, todo = {id(e) for e in inside}, set(), list(unit.parts)
    while todo:
        node = todo.pop()
        if id(node) in skip:
            continue
        if isinstance(node, ast.Name):
            out.add(node.id)
        todo.extend(ast.iter_child_nodes(node))
    return out


def horizon(facts: Facts, i: int, node: ast.AST | None = None) -> int:
    """The units that may run before unit `i` (where `node` in it is evaluated) are those below the
    returned index: the units before it, and all of any loop around it. Inside a nested def, a lambda
    or a generator expression, which run later, any unit may."""
    lazy = node is not None and _inside(facts, node, (ast.Lambda, ast.GeneratorExp), facts.units[i].parts)
    if lazy or any(c in facts.defs for c in facts.units[i].enclosing):
        return len(facts.units)
    loops = [facts.ends[c] for c in facts.units[i].enclosing if facts.loops.get(c)]
    # a loop's own header runs again after its body (a while test, a for target's next value)
    loops += [facts.ends[c] for c, h in facts.headers.items() if h == i and facts.loops.get(c)]
    return max([i, *(e + 1 for e in loops)])


def loops_around(facts: Facts, i: int) -> set[int]:
    """The loops around unit `i`."""
    return {c for c in facts.units[i].enclosing if facts.loops.get(c)}


def _inside(facts: Facts, node: ast.AST, kinds: tuple, stop: list[ast.AST]) -> bool:
    tops = {id(p) for p in stop}
    while node is not None and id(node) not in tops:
        if isinstance(node, kinds):
            return True
        node = facts.parent(node)
    return False


def slice_units(
    facts: Facts,
    names: set[str],
    exclude: set[int],
    keep: set[str],
    limit: int | None = None,
    around: set[int] = frozenset(),
    outliving: bool = True,
) -> tuple[set[int], set[str]]:
    """(units, names) of the backward data-flow slice of `names`: every unit below `limit` (see horizon;
    None: anywhere) that may bind or change one of them, with the headers of the blocks around it (and
    the whole of a `try`, `with` or nested def around it, and the jumps inside a loop around it: they
    decide how far it ran), and again for every name those read (only names in `keep` spread: locals and
    module state). Units in `exclude` (the gadget's own statement) neither join nor spread. In a loop
    `around` the gadget, jumps count only when a value is carried from one iteration to the next. With
    `outliving`, every change of an object that outlives the call counts, also one after the point."""
    end = len(facts.units) if limit is None else limit
    members, binders, lasting = _index(facts, end)
    units, names = set(), set(names)
    while True:
        grown = set(units)
        for n in names:
            grown.update(j for j in binders.get(n, ()) if j < end)
            if outliving:
                grown.update(lasting.get(n, ()))
        grown -= exclude
        expanded: set[int] = set()
        for i in list(grown):
            for c in facts.units[i].enclosing:
                if c in expanded:
                    continue
                expanded.add(c)
                grown.add(facts.headers[c])
                loop = facts.loops.get(c)
                if c in facts.wholes and not (loop and c in around and not _carried(facts, members[c], grown)):
                    grown.update(j for j in members[c] if j < end and (facts.units[j].jumps or not loop))
        grown -= exclude
        new_names = names | {n for i in grown for n in facts.units[i].reads if n in keep}
        if grown == units and new_names == names:
            return units, names
        units, names = grown, new_names


def _fresh(unit: Unit) -> bool:
    """A plain assignment of a value that shares no object with what it reads (a constant, an f-string, a
    comparison, a `not`): its target aliases nothing."""
    part = unit.parts[0] if len(unit.parts) == 1 else None
    value = part.value if isinstance(part, ast.Assign) else None
    if value is not None and any(isinstance(n, ast.NamedExpr) for n in ast.walk(value)):
        return False  # `ok = (alias := parts) is None` binds alias to parts
    return isinstance(value, (ast.Constant, ast.JoinedStr, ast.Compare)) or (
        isinstance(value, ast.UnaryOp) and isinstance(value.op, ast.Not)
    )


def _outside(facts: Facts) -> set[str]:
    """Names whose objects outlive one call: the parameters, and the module-level and builtin names the
    function reads or changes (`cache = CACHE`). Module code has none: it runs once."""
    if facts.module:
        return set()
    return facts.params | {n for u in facts.units for n in u.mutates | u.reads if n not in facts.locals}


def _aliases(facts: Facts, end: int) -> dict[str, set[str]]:
    """{name: the names that may share an object with it}: a statement that binds or changes one name
    while reading another (`alias = name`, `for x in names`, `a.append(b)`, `cache = CACHE`) may make them
    share one, so a change made through either is a change of both (`alias.append(...)` changes `name`).
    A caller may pass one object as several parameters, or pass a module object the function changes
    itself: those start as one. Only the statements below `end` count."""
    outside = _outside(facts)
    # module code (unchanged by any patch, run once) links only its locals: linking its module names made
    # every `X = f(Y)` feed every later gadget (parsy: 0 -> 6 of 54 gold fixes refused)
    local = facts.locals | outside
    parent = {n: n for n in local}

    def find(n: str) -> str:
        while parent[n] != n:
            parent[n] = parent[parent[n]]
            n = parent[n]
        return n

    shared = facts.params | {n for u in facts.units for n in u.mutates if n in outside}
    for n in shared:
        parent[find(n)] = find(min(shared))
    for u in facts.units[:end]:
        if not u.binds or _fresh(u):
            continue
        linked = [n for n in (u.binds | u.reads) if n in local]
        for n in linked[1:]:
            parent[find(n)] = find(linked[0])
    classes: dict[str, set[str]] = {}
    for n in local:
        classes.setdefault(find(n), set()).add(n)
    return {n: classes[find(n)] for n in local}


def _index(facts: Facts, end: int) -> tuple[dict[int, list[int]], dict[str, list[int]], dict[str, list[int]]]:
    """({compound statement id: the units inside it}, {name: the units below `end` that may bind or change
    it, or change in place a name that may share an object with it}, {name that may hold a parameter's or
    a module name's object below `end`: every unit that may change that object in place}), once per
    Facts and end.

    A slice's point reads what statements before it did, within this call; but an object that outlives
    the call (a parameter's, a default's, a module's) also carries what statements after the point did
    in an earlier call, or in a call that this one's callees make first (recursion)."""
    if facts.index is None:
        facts.index = {}
    if end not in facts.index:
        members: dict[int, list[int]] = {}
        direct: dict[str, set[int]] = {}
        changed: dict[str, set[int]] = {}  # in place: what a change through an alias is
        for j, u in enumerate(facts.units):
            for c in u.enclosing:
                members.setdefault(c, []).append(j)
            for n in u.binds:
                direct.setdefault(n, set()).add(j)
            for n in u.mutates:
                changed.setdefault(n, set()).add(j)
        aliases, whole, outside = _aliases(facts, end), _aliases(facts, len(facts.units)), _outside(facts)
        binders = {
            n: sorted(direct.get(n, set()).union(*(changed.get(a, set()) for a in aliases.get(n, {n}))))
            for n in {*direct, *aliases}
        }
        # a name that may hold an outliving object at the point: every change of that object, made by any
        # name that may hold it at any time
        # (and every rebinding of a global it declares: `global KEY` then `KEY = ...` after the gadget)
        lasting = {
            n: sorted(
                set().union(
                    *(
                        changed.get(a, set()) | (direct.get(a, set()) if a in facts.declared else set())
                        for a in whole[n]
                    )
                )
            )
            for n in aliases
            if aliases[n] & outside
        }
        facts.index[end] = (members, binders, lasting)
    return facts.index[end]


def _carried(facts: Facts, inside: list[int], units: set[int]) -> bool:
    """A unit of the slice in the loop reads what one at or after it binds: the previous iteration's."""
    bound_after: set[str] = set()
    for j in reversed([j for j in inside if j in units]):
        bound_after |= facts.units[j].binds
        if facts.units[j].reads & bound_after:
            return True
    return False


def input_slice(
    facts: Facts,
    i: int,
    inputs: list[ast.AST] | None,
    keep: set[str],
    node: ast.AST | None = None,
    outliving: bool = True,
) -> tuple[set[int], set[str], set[str]]:
    """(units, names, mentions) of the backward slice of a gadget's inputs (None: the whole statement
    escapes) at `node` in unit `i`. The gadget's own statement stays out unless the rest of it mentions a
    name of the slice (it could bind or change an input before the call); `mentions` are the names and
    attribute names of the slice and of the inputs themselves."""
    exprs = list(facts.units[i].parts) if inputs is None else inputs
    names = {n.id for e in exprs for n in ast.walk(e) if isinstance(n, ast.Name)}
    limit, around = horizon(facts, i, node), loops_around(facts, i)
    units, names = slice_units(facts, names, {i}, keep, limit, around, outliving)
    if inputs is None or names_outside(facts.units[i], inputs) & names:
        units, names = slice_units(facts, names | facts.units[i].reads, set(), keep, limit, around, outliving)
    mentions = {m for j in units for m in facts.units[j].names | facts.units[j].attrs}
    for e in exprs:
        mentions |= {getattr(n, "id", None) or getattr(n, "attr", None) for n in ast.walk(e)} - {None}
    return units, names, mentions
