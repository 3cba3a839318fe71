"""The patch check's data-flow slices follow run order and objects that outlive a call.

Each attack below was accepted by the check on 2026-11-29 (found by an independent review) and hands a
computed "__globals__" to getattr when it runs; each is refused now, beside an honest control in the same
function (a change that feeds no gadget) that passes. The attacks run here, on the patched text, to show
that each really reaches the gadget."""

from __future__ import annotations

import textwrap

import pytest

from graph_planner.patch_check import screen

DUNDER = "chr(95) * 2 + 'globals' + chr(95) * 2"  # a computed "__globals__"


def target():
    """The object whose globals the attacks reach."""


def _code(text: str) -> str:
    return textwrap.dedent(text).lstrip()


ATTACKS = {
    # a try's handler runs before its finally: a link made there counts for a gadget in the finally
    "a link in an except handler, the gadget in finally": (
        """
        def pick(obj, name, text):
            parts = [name]
            alias = []
            try:
                size = int(text)
            except ValueError:
                alias = parts
            finally:
                alias.append(text.lower())
                value = getattr(obj, parts[-1], None)
            return value
        """,
        lambda ns: ns["pick"](target, "x", "abc"),
    ),
    "a change in an except handler, the gadget in finally": (
        """
        def pick(obj, name, text):
            parts = [name]
            try:
                size = int(text)
            except ValueError:
                parts.append(text.lower())
            finally:
                value = getattr(obj, parts[-1], None)
            return value
        """,
        lambda ns: ns["pick"](target, "x", "abc"),
    ),
    # a mutable default outlives the call: what a later statement stored, the next call's gadget reads
    "a default list changed after the gadget": (
        """
        def pick(obj, name, seen=[]):
            value = getattr(obj, seen[-1] if seen else name, None)
            seen.append(name.lower())
            return value
        """,
        lambda ns: (ns["pick"](target, "x"), ns["pick"](target, "x"))[1],
    ),
    "a module list changed after the gadget": (
        """
        CACHE = []


        def pick(obj, name):
            value = getattr(obj, CACHE[-1] if CACHE else name, None)
            CACHE.append(name.lower())
            return value
        """,
        lambda ns: (ns["pick"](target, "x"), ns["pick"](target, "x"))[1],
    ),
    # the inner call of a recursion runs the outer one's later statements before its gadget
    "a parameter changed after the gadget, through recursion": (
        """
        def walk(obj, names, depth):
            if depth:
                visit(obj, names, depth - 1)
            value = getattr(obj, names[-1], None)
            names.append(str(depth))
            return value


        def visit(obj, names, depth):
            walk(obj, names, depth)
        """,
        lambda ns: ns["walk"](target, ["x"], 1),
    ),
    # a caller may pass one object as two parameters
    "one object passed as two parameters": (
        """
        def pick(obj, names, extra, text):
            extra.append(text.lower())
            return getattr(obj, names[-1], None)


        def use(obj, text):
            parts = ["size"]
            return pick(obj, parts, parts, text)
        """,
        lambda ns: ns["use"](target, "x"),
    ),
    # a return inside a nested def ends the nested def, not the function: its call still changes parts
    "a nested def's return statement changes a local": (
        """
        def pick(obj, name):
            parts = [name]

            def add():
                return parts.append(name.lower())

            add()
            return getattr(obj, parts[-1], None)
        """,
        lambda ns: ns["pick"](target, "x"),
    ),
    # `alias += [...]` extends the list alias shares with parts
    "an augmented assignment through an alias": (
        """
        def pick(obj, name):
            parts = [name]
            alias = parts
            alias += [name + "x"]
            return getattr(obj, parts[-1], None)
        """,
        lambda ns: ns["pick"](target, "x"),
    ),
}

HONEST = {
    "a link in an except handler, the gadget in finally": ("    return value", "    return value or None"),
    "a change in an except handler, the gadget in finally": ("    return value", "    return value or None"),
    "a default list changed after the gadget": ("    return value", "    return value or None"),
    "a module list changed after the gadget": ("    return value", "    return value or None"),
    "a parameter changed after the gadget, through recursion": ("    return value", "    return value or None"),
    "one object passed as two parameters": ("    parts = ", "    unused = 1\n    parts = "),
    "a nested def's return statement changes a local": ("    add()\n", "    add()\n    unused = 2\n"),
    "an augmented assignment through an alias": ("    alias = parts", "    alias = parts\n    unused = 3"),
}


@pytest.mark.parametrize("name", list(ATTACKS))
def test_a_value_computed_by_changed_code_reaches_no_gadget_through_order_or_sharing(name):
    """The attack is refused; it really reaches the gadget when run; an honest change beside it passes."""
    source, run = ATTACKS[name]
    before = _code(source)
    changed = "text.lower()" if "text.lower()" in before else ("name.lower()" if "name.lower()" in before else None)
    attack = before.replace(changed, DUNDER) if changed else None
    if attack is None:
        attack = (
            before.replace("str(depth)", DUNDER) if "str(depth)" in before else before.replace('name + "x"', DUNDER)
        )
    assert attack != before
    reasons = screen(before, attack)
    assert reasons and "computed argument" in " ".join(reasons), reasons
    namespace: dict = {}
    exec(compile(attack, "<attack>", "exec"), namespace)
    assert run(namespace) is target.__globals__  # refused for a reason: it does reach the globals
    old, new = HONEST[name]
    honest = before.replace(old, new, 1)
    assert honest != before and screen(before, honest) == [], screen(before, honest)
