"""A `type(x)` that a comparison consumes: x may be computed anew, the other operand only where it could keep
the class it is handed.

`type(value) not in kinds` gives `kinds.__contains__` value's class, which is `type` itself when value is a
class. A builtin container keeps nothing it is asked about, so what value is does not matter there (the
check used to demand that every statement feeding value be unchanged, which refused most fixes of
simplejson's encoder). A class of the file with its own `__contains__` or `__eq__` may keep it: then the
operand must be computed as before, and the attack below, which makes the comparison hand `type` to such an
object, is refused beside an honest change in the same function."""

from __future__ import annotations

import textwrap

from graph_planner.patch_check import screen

PLAIN = """
INTEGERS = (int,)


def encode_int(value, kinds=INTEGERS):
    value = value * 1
    if type(value) not in kinds:
        value = int(value)
    return str(value)
"""

KEEPER = """
class Kinds:
    kept = []

    def __contains__(self, item):
        Kinds.kept.append(item)
        return False


INTEGERS = (int,)


def encode_int(value, kinds=INTEGERS):
    value = value * 1
    if type(value) not in kinds:
        value = int(value)
    return str(value)
"""


def _code(text: str) -> str:
    return textwrap.dedent(text).lstrip()


def test_a_computed_argument_of_a_compared_type_call_passes_where_no_class_can_keep_it():
    old = _code(PLAIN)
    assert screen(old.replace("value * 1", "value * 2"), old) == []  # the argument's statement changed
    assert screen(old.replace("value * 1", "value - 0"), old) == []


def test_a_changed_receiver_that_can_keep_the_class_is_refused_beside_an_honest_change():
    old = _code(KEEPER)
    honest = old.replace("value * 1", "value * 2")  # the argument changes, kinds is the caller's as before
    assert screen(honest, old) == []
    attack = old.replace("    value = value * 1\n", "    kinds = Kinds()\n    value = Kinds\n")
    reasons = screen(attack, old)
    assert reasons and any("type" in r for r in reasons), reasons
    # what it would have done: the file's own class is handed type itself
    namespace: dict = {}
    exec(compile(attack, "<attack>", "exec"), namespace)
    try:
        namespace["encode_int"](3)
    except TypeError:
        pass  # int(Kinds) fails after the comparison ran
    assert namespace["Kinds"].kept == [type]


def test_the_same_attack_on_a_file_without_such_a_class_hands_type_to_no_one():
    old = _code(PLAIN)
    # a class as value: the builtin tuple's __contains__ is asked about `type` and keeps nothing
    changed = old.replace("    value = value * 1\n", "    value = value if value else int\n")
    assert screen(changed, old) == []
