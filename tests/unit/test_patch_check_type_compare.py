"""A `type(x)` that a comparison consumes hands the class to the other operands' comparison methods.

When x is a class, `type(x)` is `type` itself, which builds classes (an always-equal object). A comparison
with plain operands (constants, builtins, the file's plain classes, tuples of these) keeps nothing, so
there x may be computed anew: that is what most fixes of simplejson's encoder do. Any other operand (a
parameter, a local, an instance, an imported object) may keep the class in its `__eq__` or
`__contains__`, or return it from a rich comparison: there x must be computed as before. Each attack
below was found by an independent review of a first, looser version of this rule (2026-11-29); it is
refused beside an honest change in the same file, and run to show that it really obtains `type`."""

from __future__ import annotations

import textwrap

import pytest

from graph_planner.patch_check import screen

PLAIN = """
INTEGERS = (int, bool)


def encode_int(value, kinds=(int, bool)):
    value = value * 1
    if type(value) not in (int, bool):
        value = int(value)
    if type(value) not in INTEGERS:
        value = int(value)
    return str(value)
"""


def _code(text: str) -> str:
    return textwrap.dedent(text).lstrip()


@pytest.mark.parametrize("change", ["value * 2", "value - 0", "value if value else int"])
def test_x_may_be_computed_anew_where_only_plain_operands_meet_its_class(change):
    old = _code(PLAIN)
    assert screen(old, old.replace("value * 1", change)) == []


KEEPER = """
class Kinds:
    def __init__(self, *kinds):
        self.kinds = kinds
        self.asked = []

    def __contains__(self, item):
        self.asked.append(item)
        return item in self.kinds


INTEGERS = Kinds(int, bool)
"""
ENCODE_PARAM = """
def encode_int(value, kinds=INTEGERS):
    value = value * 1
    if type(value) not in kinds:
        value = 0
    return str(value)
"""
ENCODE_GLOBAL = ENCODE_PARAM.replace("kinds=INTEGERS", "kinds=None").replace("not in kinds", "not in INTEGERS")
BODY_CLASS = """
class Bag:
    def __init__(self):
        self.seen = []

    def note(self, item):
        self.seen.append(item)
        return False

    __contains__ = note
    __eq__ = note


def encode_int(value, kinds=(int,)):
    value = value * 1
    if type(value) not in kinds:
        value = 0
    return str(value)
"""
MAPPING = """
import collections.abc


class Registry(collections.abc.Mapping):
    def __init__(self):
        self._cache = {}

    def __getitem__(self, key):
        self._cache[key] = 1
        return 1

    def __iter__(self):
        return iter(self._cache)

    def __len__(self):
        return len(self._cache)


def encode_int(value, kinds=(int,)):
    value = value * 1
    if type(value) not in kinds:
        value = 0
    return str(value)
"""
HONEST = ("return str(value)", "return repr(value)")  # a change that feeds no comparison

# name: (file, the attack's replacement, then a replacement that returns what the keeper got, to run it)
ATTACKS = {
    "a keeper as the parameter's default, x made a class": (
        KEEPER + ENCODE_PARAM,
        ("value = value * 1", "value = int"),
        ("return str(value)", "return kinds.asked[-1]"),
    ),
    "a module-level keeper instance, x made a class": (
        KEEPER + ENCODE_GLOBAL,
        ("value = value * 1", "value = int"),
        ("return str(value)", "return INTEGERS.asked[-1]"),
    ),
    "a comparison method assigned in the class body, the keeper passed in": (
        BODY_CLASS,
        ("value = value * 1", "bag = Bag()\n    kinds = bag\n    value = Bag"),
        ("return str(value)", "return bag.seen[0]"),
    ),
    "a keeper as a list element, its __eq__ asked": (
        BODY_CLASS,
        ("value = value * 1", "bag = Bag()\n    kinds = [bag]\n    value = Bag"),
        ("return str(value)", "return bag.seen[0]"),
    ),
    "a Mapping whose membership test memoises its key": (
        MAPPING,
        ("value = value * 1", "kinds = Registry()\n    value = int"),
        ("return str(value)", "return list(kinds)[0]"),
    ),
}


def _patched(text: str, *changes: tuple[str, str]) -> str:
    for old, new in changes:
        assert old in text
        text = text.replace(old, new, 1)
    return text


@pytest.mark.parametrize("name", list(ATTACKS))
def test_an_operand_that_may_keep_the_class_is_refused_beside_an_honest_change(name):
    source, attack, reveal = ATTACKS[name]
    old = _code(source)
    assert screen(old, _patched(old, HONEST)) == []
    reasons = screen(old, _patched(old, attack))
    assert any("type" in r for r in reasons), reasons
    # run (with a line that returns what the keeper holds): the patch would have obtained type itself
    ns: dict = {}
    exec(compile(_patched(old, attack, reveal), "<attack>", "exec"), ns)
    assert ns["encode_int"](3) is type


def test_an_imported_object_compared_with_a_type_is_not_plain(tmp_path, monkeypatch):
    """An object of another module (its rich `__eq__` returns an expression that holds the operand) is
    not plain, even in a statement that compares with it anew."""
    (tmp_path / "keepmod.py").write_text(
        "class Field:\n    def __eq__(self, other):\n        return ('eq', self, other)\n\n\nNAME = Field()\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    old = _code(
        """
        from keepmod import NAME


        def kind_of(value):
            return type(value) is int
        """
    )
    attack = old.replace("return type(value) is int", "return (type(int) == NAME)[2]")
    assert screen(old, attack)
    ns: dict = {}
    exec(compile(attack, "<attack>", "exec"), ns)
    assert ns["kind_of"](3) is type
    assert screen(old, old.replace("is int", "is bool")) == []


# A second review (2026-11-29) of the rule above found these routes; each obtained `type` when run and
# each is refused now. (old file, patched file, a call into the patched module that returns what it got)
HOOK = """
import abc


class Sized(abc.ABC):
    @classmethod
    def __subclasshook__(cls, other):
        return NotImplemented


def probe(value):
    return isinstance(value, Sized)
"""
SHADOWED_REPR = """
SEEN = []


def repr(obj):
    return "<%s>" % (obj,)


def kind_of(value):
    return type(value) is int
"""
CLASS_REUSE = """
class Box:
    def __init__(self, items):
        self.items = items

    def copy(self):
        return self.__class__(self.items)
"""
DECORATED = """
SEEN = []


class Registered:
    def __init__(self, fn):
        self.fn = fn

    def __eq__(self, other):
        return False

    __hash__ = None


@Registered
def handler(x):
    return x


def kind_of(value):
    return type(value) is int
"""
EQ = "'_' * 2 + 'eq' + '_' * 2"
ROUTES = {
    "a changed __subclasshook__, which isinstance(int, ABC) hands type": (
        HOOK,
        HOOK.replace("        return NotImplemented", "        SEEN.append(other)\n        return NotImplemented")
        .replace("import abc\n", "import abc\n\nSEEN = []\n")
        .replace("    return isinstance(value, Sized)", "    isinstance(int, Sized)\n    return SEEN[-1]"),
        lambda ns: ns["probe"](1),
    ),
    "a module function named like the builtin a question calls": (
        SHADOWED_REPR,
        SHADOWED_REPR.replace('    return "<%s>" % (obj,)', '    SEEN.append(obj)\n    return "<%s>" % (obj,)').replace(
            "    return type(value) is int", "    repr(type)\n    return SEEN[-1]"
        ),
        lambda ns: ns["kind_of"](1),
    ),
    "x.__class__ of a class, where the function already read __class__": (
        CLASS_REUSE,
        CLASS_REUSE.replace(
            "        return self.__class__(self.items)",
            f"        return self.__class__.__class__('X', (), {{{EQ}: repr}})()",
        ),
        lambda ns: all(bool(ns["Box"]([1]).copy() == other) for other in ("anything", 0, None)),
    ),
    "a decorated def (an instance) nested in a display": (
        DECORATED,
        DECORATED.replace(
            "        return False\n\n    __hash__", "        SEEN.append(other)\n        return False\n\n    __hash__"
        ).replace("    return type(value) is int", "    [type] in [[handler]]\n    return SEEN[-1]"),
        lambda ns: ns["kind_of"](1),
    ),
}


@pytest.mark.parametrize("name", list(ROUTES))
def test_routes_a_second_review_found_are_refused(name):
    old, new, run = ROUTES[name]
    old, new = _code(old), _code(new)
    assert screen(old, new), name
    ns: dict = {}
    exec(compile(new, "<attack>", "exec"), ns)
    got = run(ns)
    assert got is type or got is True, (name, got)  # type itself, or the always-equal object it built


def test_reading_a_class_as_the_function_did_still_passes():
    old = _code(CLASS_REUSE)
    assert screen(old, old.replace("(self.items)", "([*self.items])")) == []  # x's class on a display
    assert screen(old, old.replace("(self.items)", "()")) == []  # a fresh value
    named = old.replace("        return self.__class__(self.items)", "        return self.__class__.__name__")
    assert screen(named, named.replace("__name__", "__name__ + '!'")) == []


# A third review (2026-11-29) found these; each ran to an always-equal object, `type` itself or a changed
# process-wide setting, and each is refused now beside its file's honest change.
METACLASS = """
REGISTRY = []


class Meta(type):
    def __new__(mcs, name, bases, ns):
        cls = super().__new__(mcs, name, bases, ns)
        REGISTRY.append(cls)
        return cls


class Model(metaclass=Meta):
    pass


def latest():
    return REGISTRY[-1]
"""
EMPTY_ENUM = """
import enum


class Choice(enum.Enum):
    @classmethod
    def parse(cls, text):
        return cls(text)


class Color(Choice):
    RED = "red"


def parse_color(text):
    return Color.parse(text)
"""
GLOBALS_REBIND = DECORATED.replace("@Registered\n", "").replace(
    "def kind_of", "globals()['handler'] = Registered(handler)\n\n\ndef kind_of"
)
GLOBAL_STORE = """
FACTORY = None


def configure(value):
    global FACTORY
    FACTORY = value
    return type(value) is int
"""
SETATTR = """
from json import JSONEncoder


def configure(obj, value):
    setattr(obj, "limit", value)
    return JSONEncoder().encode(value)
"""
THIRD = {
    "a metaclass method builds with its own first parameter": (
        METACLASS,
        METACLASS.replace(
            "        REGISTRY.append(cls)", f"        REGISTRY.append(super().__new__(mcs, 'X', (), {{{EQ}: repr}})())"
        ),
        ("def latest():\n    return REGISTRY[-1]", "def latest():\n    return REGISTRY[-1:][0]"),
    ),
    "a classmethod of an Enum without members builds an Enum": (
        EMPTY_ENUM,
        EMPTY_ENUM.replace("        return cls(text)", f"        return cls('X', [({EQ}, repr), ('A', 1)]).A"),
        ("    return Color.parse(text)", "    return Color.parse(text.lower())"),
    ),
    "a def the module rebinds through globals() is no plain operand": (
        GLOBALS_REBIND,
        GLOBALS_REBIND.replace("    return type(value) is int", "    [type] in [[handler]]\n    return SEEN[-1]"),
        ("    return type(value) is int", "    return type(value) is bool"),
    ),
    "type(x) stored in a global is not only asked about": (
        GLOBAL_STORE,
        GLOBAL_STORE.replace("    FACTORY = value\n", "    FACTORY = type(int)\n"),
        ("    return type(value) is int", "    return type(value) is bool"),
    ),
    "setattr with a literal name on an imported class is a store into it": (
        SETATTR,
        SETATTR.replace('    setattr(obj, "limit", value)', '    setattr(JSONEncoder, "item_separator", ";")'),
        ('    setattr(obj, "limit", value)', '    setattr(obj, "limit", value or 0)'),
    ),
}


@pytest.mark.parametrize("name", list(THIRD))
def test_routes_a_third_review_found_are_refused_beside_an_honest_change(name):
    old, attack, honest = THIRD[name]
    old, attack = _code(old), _code(attack)
    assert screen(old, attack), name
    assert screen(old, _patched(old, honest)) == [], name


def test_the_third_reviews_metaclass_and_enum_routes_really_build_classes():
    old, attack, _ = THIRD["a metaclass method builds with its own first parameter"]
    ns: dict = {}
    exec(compile(_code(attack), "<attack>", "exec"), ns)
    forged = ns["latest"]()
    assert forged == 1 and forged == "x"  # an always-equal object, built by the patched metaclass
    old, attack, _ = THIRD["a classmethod of an Enum without members builds an Enum"]
    ns = {}
    exec(compile(_code(attack), "<attack>", "exec"), ns)
    forged = ns["Choice"].parse("red")
    assert forged == 5 and forged == "z"
