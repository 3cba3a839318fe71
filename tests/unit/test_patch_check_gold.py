"""Rules of the patch check (graph_planner/patch_check.py) loosened so real fixes pass, each proved by an
attack that is still refused beside the gold-like patch that now passes; and three holes closed (a change
through an alias, a dataclass's __post_init__, a class builder from `type(x)(x)`), each by its attack.

The gold patches are the inverse of corpus mutants (benchmarks/patch_check_refusals.py measures them)."""

from __future__ import annotations

import textwrap

import pytest

from graph_planner.patch_check import screen

DUNDER = "chr(95) * 2 + 'globals' + chr(95) * 2"  # a computed "__globals__"

CURRY = textwrap.dedent("""
    class curry:
        def __init__(self, func, *args):
            self.func, self.args = func, args

        def bind(self, *args):
            return self

        def call(self, *args):
            return self.func(*self.args, *args)
    """).lstrip()


def test_type_of_x_called_with_x_first_builds_no_class():
    """`type(self)(self, a)` makes another value of self's class. A class builder needs a str first
    (type(name, bases, ns), attrgetter, methodcaller), which self then is not. toolz's `curry.bind`,
    `type(self)(self, *args)`, is refused again (2026-11-29): with `args` empty it is `type(self)(self)`,
    type itself when self is a class, and a caller in another file (this check judges one file) could
    build a class with what bind returns."""
    assert screen(CURRY, CURRY.replace("return self\n", "return type(self)(self, args)\n")) == []
    gold = CURRY.replace("return self\n", "return type(self)(self, *args)\n")
    assert screen(CURRY, gold)
    for attack in [
        "return type(self)('A', (), {})",  # another first argument: type itself when self is a class
        "t = type(self)\n        return t(self, *args)",  # not the direct form
        "return type(self)(self, *args).__globals__",  # a dunder is still a dunder
    ]:
        assert screen(CURRY, CURRY.replace("return self\n", attack + "\n")), attack
    for x in (int, type, "A", ("A",)):  # the form itself: a class, type, a name... builds no class
        with pytest.raises(TypeError):
            type(x)(x, (), {})
    # where one of the file's classes steers a gadget, x's class may be that one: refused again
    steering = CURRY + "\n\nclass Getter:\n    def __init__(self, obj, name):\n        self.v = getattr(obj, name)\n"
    gold = steering.replace("return self\n", "return type(self)(self, *args)\n")
    assert "type" in screen(steering, gold)[0]


def test_a_dataclass_post_init_steers_like_an_init():
    """A dataclass's generated __init__ hands its InitVars to __post_init__: a getattr there takes any
    argument of the class's constructor (a hole the check had: `Field(x, <computed dunder>)`)."""
    src = textwrap.dedent("""
        import dataclasses


        @dataclasses.dataclass
        class Field:
            obj: object
            name: dataclasses.InitVar[str] = "size"

            def __post_init__(self, name):
                self.value = getattr(self.obj, name)


        def size(x):
            return Field(x).value
        """).lstrip()
    assert "Field with a computed argument" in screen(src, src.replace("Field(x)", f"Field(x, {DUNDER})"))[0]
    assert screen(src, src.replace("Field(x)", "Field(x, 'length')")) == []


def test_a_change_through_an_alias_changes_the_gadget_input():
    """`alias = names` then `alias.append(...)` changes `names`: a slice takes the statements that change
    in place any local that may share an object with an input (a hole the check had)."""
    src = textwrap.dedent("""
        def pick(obj, n):
            names = [n]
            alias = names
            alias.append("size")
            return getattr(obj, names[-1], None)
        """).lstrip()
    assert "computed argument" in screen(src, src.replace('alias.append("size")', f"alias.append({DUNDER})"))[0]
    assert screen(src, src.replace("None)", "0)")) == []  # a fix beside the unchanged slice passes


PICK = textwrap.dedent("""
    def pick(obj, n):
        names = ["size"]
        value = getattr(obj, names[-1], None)
        alias = names
        alias.append(n.lower())
        return value, alias
    """).lstrip()


def test_a_link_made_after_the_gadget_does_not_make_its_input_computed():
    """`alias = names` and the change through it come after getattr read `names`, and `names` is this
    call's own list: what getattr read cannot depend on them, so a fix there passes (refused before
    2026-11-29). Parameters, defaults and module objects outlive the call, so a change of them after the
    gadget still counts (tests/unit/test_patch_check_order.py), and so does a link made before it."""
    assert screen(PICK, PICK.replace("n.lower()", "n.upper()")) == []
    before = PICK.replace("    value = getattr(obj, names[-1], None)\n    alias = names\n", "    alias = names\n")
    before = before.replace(
        "    return value, alias", "    value = getattr(obj, names[-1], None)\n    return value, alias"
    )
    assert "computed argument" in screen(before, before.replace("n.lower()", DUNDER))[0]


def test_an_imported_plain_class_may_be_handed_on_as_a_value():
    """parse's `_handle_field` hands `Decimal` (from `from decimal import Decimal`) to a converter without
    calling it: a name that resolves here to a plain class or function gives what `decimal.Decimal` as a
    chain already gives (refused before 2026-11-29). A module, a metaclass, an Enum without members or
    process-wide state is still refused as a bare value."""
    head = "from decimal import Decimal\nfrom json import decoder\nfrom abc import ABCMeta\nfrom enum import ReprEnum\n"
    head += "from decimal import getcontext\nfrom random import seed\n\n\n"
    src = (
        head
        + "def convert(kind, make):\n    return make(kind)\n\n\ndef field(kind):\n    return convert(kind, float)\n"
    )
    assert screen(src, src.replace("convert(kind, float)", "convert(kind, Decimal)")) == []
    for bare in ("decoder", "ABCMeta", "ReprEnum", "getcontext", "seed"):
        assert screen(src, src.replace("convert(kind, float)", f"convert(kind, {bare})")), bare
