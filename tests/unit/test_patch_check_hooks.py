"""Functions the interpreter hands a class's class, and state of imported libraries.

A fourth independent review (2026-11-29) found that Python itself hands `type` or a class builder to code
a patch may change: a helper that an unchanged `__subclasshook__` passes its argument to, a descriptor's
`__set_name__` / `__get__` whose owner is a metaclass or an Enum without members, a mixin's
`__init_subclass__` under such an Enum. It also changed process-wide library state through item stores,
in-place methods and class decorators. Each route ran to an always-equal object or a changed library; each
is refused here, beside an honest change in the same file."""

from __future__ import annotations

import textwrap

import pytest

from graph_planner.patch_check import screen

EQ = "'_' * 2 + 'eq' + '_' * 2"  # a computed "__eq__"


def _code(text: str) -> str:
    return textwrap.dedent(text).lstrip()


HOOK_HELPER = """
import abc

SEEN = []


def _check(C):
    return NotImplemented


class Sized(abc.ABC):
    @classmethod
    def __subclasshook__(cls, C):
        return _check(C)


def probe(value):
    return isinstance(value, Sized)
"""
OWNER = """
import enum

FORGED = []


class Desc:
    def __init__(self, default):
        self.default = default

    def __set_name__(self, owner, name):
        self.name = name

    def __get__(self, obj, owner=None):
        return self.default


class Choice(enum.Enum):
    label = Desc("x")


class Color(Choice):
    RED = "red"


def parse_color(text):
    return Color(text)
"""
MIXIN = """
import enum

FORGED = []


class LabelMixin:
    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)


class Choice(LabelMixin, enum.Enum):
    pass


class Color(Choice):
    RED = "red"


def parse_color(text):
    return Color(text)
"""
LIBRARY = """
import copy
import dataclasses
import html
import html.entities
import json
import logging
import operator

LOG = logging.getLogger(__name__)


def unescape(s):
    return html.unescape(s)
"""
UNESCAPE = "    return html.unescape(s)"

# name: (file, attack (old, new), honest (old, new))
ROUTES = {
    "a helper an unchanged __subclasshook__ hands its argument": (
        HOOK_HELPER,
        (
            "def _check(C):\n    return NotImplemented",
            f"def _check(C):\n    SEEN.append(C('X', (), {{{EQ}: repr}})())\n    return NotImplemented",
        ),
        ("    return isinstance(value, Sized)", "    return isinstance(value, (Sized,))"),
    ),
    "__set_name__ of a descriptor in an Enum without members": (
        OWNER,
        (
            "        self.name = name",
            f"        self.name = name\n        FORGED.append(owner('Y', [({EQ}, repr), ('A', 1)]).A)",
        ),
        ("    return Color(text)", "    return Color(text.lower())"),
    ),
    "__init_subclass__ of a mixin under an Enum without members": (
        MIXIN,
        (
            "        super().__init_subclass__(**kw)",
            "        super().__init_subclass__(**kw)\n        FORGED.append(cls)",
        ),
        ("    return Color(text)", "    return Color(text.lower())"),
    ),
    "an item store into a library's table": (
        LIBRARY,
        (UNESCAPE, "    html.entities.html5['amp;'] = 'Z'\n" + UNESCAPE),
        (UNESCAPE, "    return html.unescape(s or '')"),
    ),
    "an in-place method on a library's table": (
        LIBRARY,
        (UNESCAPE, "    html.entities.html5.clear()\n" + UNESCAPE),
        (UNESCAPE, "    return html.unescape(s.strip())"),
    ),
    "operator.delitem on a library's table, through a local": (
        LIBRARY,
        (UNESCAPE, "    table = html.entities.html5\n    operator.delitem(table, 'amp;')\n" + UNESCAPE),
        (UNESCAPE, "    return html.unescape(s) + ''"),
    ),
    "copy's pickling dispatch table": (
        LIBRARY,
        (UNESCAPE, "    copy.dispatch_table[int] = repr\n" + UNESCAPE),
        (UNESCAPE, "    return html.unescape(str(s))"),
    ),
    "a class decorator applied anew to a library class": (
        LIBRARY,
        (UNESCAPE, "    dataclasses.dataclass(frozen=True)(json.JSONEncoder)\n" + UNESCAPE),
        (UNESCAPE, "    return html.unescape(s)[:]"),
    ),
}


def _patched(text: str, change: tuple[str, str]) -> str:
    old, new = change
    assert old in text
    return text.replace(old, new, 1)


@pytest.mark.parametrize("name", list(ROUTES))
def test_a_fourth_reviews_route_is_refused_beside_an_honest_change(name):
    source, attack, honest = ROUTES[name]
    old = _code(source)
    assert screen(old, _patched(old, attack)), name
    assert screen(old, _patched(old, honest)) == [], name


def test_the_hook_helper_route_really_builds_an_always_equal_object():
    source, attack, _ = ROUTES["a helper an unchanged __subclasshook__ hands its argument"]
    ns: dict = {"__name__": "hooked"}
    exec(compile(_patched(_code(source), attack), "<attack>", "exec"), ns)
    ns["probe"](int)  # isinstance(int, Sized) hands the hook int's class: type itself
    forged = ns["SEEN"][-1]
    assert forged == 5 and forged == "anything"


# A fifth review (same day): the library's table changed through a builtin's unbound method, an in-place
# operator function, or its bound method handed on as a value.
FIFTH = {
    "dict.update unbound on a library table": "    dict.update(html.entities.html5, {'amp;': 'Z'})\n",
    "operator.ior on a library table": "    operator.ior(html.entities.html5, {'amp;': 'Z'})\n",
    "the table's bound update handed to map": "    list(map(html.entities.html5.update, [{'amp;': 'Z'}]))\n",
    "the table's bound update saved in a local": "    put = html.entities.html5.update\n    put({'amp;': 'Z'})\n",
    "methodcaller naming an in-place method": "    operator.methodcaller('update', {'amp;': 'Z'})(html.entities.html5)\n",
    "a for target holding the table": "    for tab in [html.entities.html5]:\n        tab['amp;'] = 'Z'\n",
    "a tuple unpacking holding the table": "    tab, = html.entities.html5,\n    tab['amp;'] = 'Z'\n",
    "an or expression holding the table": "    tab = None or html.entities.html5\n    tab['amp;'] = 'Z'\n",
    "a display indexed": "    [html.entities.html5][0]['amp;'] = 'Z'\n",
    "a walrus": "    (tab := html.entities.html5)['amp;'] = 'Z'\n",
    "an in-place operator on a local holding the table": "    tab = html.entities.html5\n    tab |= {'amp;': 'Z'}\n",
    "the root logger reached through a call": "    logging.getLogger().disabled = True\n",
    "a module-level logger's manager": "    LOG.manager.disable = 100\n",
}


@pytest.mark.parametrize("name", list(FIFTH))
def test_library_state_changed_through_methods_handed_on_is_refused(name):
    old = _code(LIBRARY)
    assert screen(old, _patched(old, (UNESCAPE, FIFTH[name] + UNESCAPE))), name
    # a copy of the table is the body's own
    copy = "    table = dict(html.entities.html5)\n    table.update({})\n"
    assert screen(old, _patched(old, (UNESCAPE, copy + UNESCAPE))) == []
    # a library call's result may be a shared object (a cached one, a logger): a store into it is rule 10's
    parsed = "    parsed = json.loads('{}')\n    parsed['k'] = 1\n"
    assert "writes into parsed" in " ".join(screen(old, _patched(old, (UNESCAPE, parsed + UNESCAPE))))
