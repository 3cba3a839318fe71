"""Rule 10 of the patch check (graph_planner/patch_writes.py): a patch adds no write into an object the
function did not create, unless the unpatched function already wrote that way into the same receiver path.

Review 8 (2026-11-30) forged passes with one added store beside a kept bug, each into an object an
end-of-test digest cannot judge: an lru-cached dict (M1), a dict a getter hands out behind an unstable or
oversized global (M2, M7), put back before the test ended (M8) or consumed by the package (M9), a pytest
fixture's dict (M5), `request.module.pytest.approx` (M11), a dispatch table's lambda (M12). Each route is
refused here beside the gold fix and honest fixes that write into what they made."""

from __future__ import annotations

import pytest

from graph_planner.patch_check import screen
from graph_planner.patch_writes import fresh_names, writes

BASE = """
import collections
import functools
import heapq
import operator
from operator import setitem as put

PROFILES = {"default": {"abs_tol": 1e-9}}
COMPARE = {"default": {"close": lambda a, b: abs(a - b) <= 1e-9}, "rough": {"close": lambda a, b: True}}


@functools.lru_cache(maxsize=None)
def limits():
    return {"abs_tol": 1e-9}


def isclose(a, b):
    return abs(a - b) <= limits()["abs_tol"]


class Box:
    def __init__(self, items):
        self.items = list(items)
        self.seen = {}

    def put(self, key, value):
        self.seen[key] = value
        return value


def spread(values, options=None, request=None):
    return max(values) + min(values)
"""
BUGGY_FILE = BASE.lstrip("\n")
BUGGY = "    return max(values) + min(values)\n"
HEAD = "def spread(values, options=None, request=None):\n"
GOLD_FILE = BUGGY_FILE.replace(BUGGY, "    return max(values) - min(values)\n")

FORGES = {
    "M1 an lru-cached dict": 'limits()["abs_tol"] = 1e300',
    "M1b its update": "limits().update(abs_tol=1e300)",
    "M2/M7/M8 a getter's dict": 'PROFILES.get("default")["abs_tol"] = 1e300',
    "M8 widened then put back": 'PROFILES.get("default")["abs_tol"] = 1e300 if values else 1e-9',
    "M9 a one-shot override": 'PROFILES.get("default").setdefault("abs_tol", 1e300)',
    "M5 a fixture's dict": 'options["abs_tol"] = 1e300',
    "M5 a fixture's dict, augmented": 'options |= {"abs_tol": 1e300}',
    "M11 pytest's approx": "request.module.pytest.approx = max",
    "M12 a dispatch table's lambda": 'COMPARE.get("default")["close"] = COMPARE.get("rough")["close"]',
    "a bound mutator handed on": 'list(map(PROFILES.get("default").update, [{"abs_tol": 1e300}]))',
    "a mutator named by a string": 'getattr(PROFILES.get("default"), "update")(abs_tol=1e300)',
    "operator's setitem": 'operator.setitem(PROFILES.get("default"), "abs_tol", 1e300)',
    "heapq on a parameter": "heapq.heappush(values, 0)",
    "a comprehension target": "[d.update(abs_tol=1e300) for d in PROFILES.values()]",
    "a loop target": 'for d in PROFILES.values():\n    d["abs_tol"] = 1e300',
    "a local bound to a getter": 'd = PROFILES.get("default")\nd["abs_tol"] = 1e300',
    "a local bound fresh, then not": 'd = {}\nd = PROFILES.get("default")\nd["abs_tol"] = 1e300',
    "a global named like a comprehension's fresh local": '[PROFILES for PROFILES in [{}]]\nPROFILES["default"] = {}',
    "a walrus in a comprehension": '[(d := PROFILES.get("default")) for _ in "x"]\nd["abs_tol"] = 1e300',
    "an item of a fresh dict": 'd = {"p": PROFILES.get("default")}\nd["p"]["abs_tol"] = 1e300',
    "next() of a parameter": "next(options)",
    # review 9 (N8, N9): an augmented store into an item of a fresh copy runs the shared item's in-place operator
    "an item of a fresh copy, |=": 'd = dict(PROFILES)\nd["default"] |= {"abs_tol": 1e300}',
    "an item of a fresh list, |=": 'box = [PROFILES.get("default")]\nbox[0] |= {"abs_tol": 1e300}',
    "an attribute of a fresh instance, += a list": "b = Box([])\nb.items = COMPARE.get('x', [])\nb.items += [1e300]",
    # review 9 (N10, N17): an in-place function handed on as a value, or called under another name
    "setitem handed to map": 'list(map(operator.setitem, [PROFILES.get("default")], ["abs_tol"], [1e300]))',
    "ior handed to reduce": 'functools.reduce(operator.ior, [PROFILES.get("default"), {"abs_tol": 1e300}])',
    "setitem imported under another name": 'put(PROFILES.get("default"), "abs_tol", 1e300)',
    "setitem bound to a local name": 'set_ = operator.setitem\nset_(PROFILES.get("default"), "abs_tol", 1e300)',
}


def _patch(body: str, text: str = BUGGY_FILE) -> str:
    lines = "".join(f"    {line}\n" for line in body.splitlines())
    return text.replace(HEAD, HEAD + lines)


def test_gold_fix_passes():
    assert screen(BUGGY_FILE, GOLD_FILE) == []


@pytest.mark.parametrize("name", sorted(FORGES))
def test_forge_is_refused_by_rule_10(name):
    """The bug left running, one write added: refused, and rule 10 says why (the rule 9 hole of a global
    named like a comprehension's target included: it treats every name bound anywhere as a local)."""
    reasons = screen(BUGGY_FILE, _patch(FORGES[name]))
    assert any("writes into" in r for r in reasons), reasons


HONEST = {
    "a fresh dict": 'd = {}\nd["lo"] = min(values)\nreturn max(values) - d["lo"]',
    "a builtin copy": "v = list(values)\nv.sort()\nreturn v[-1] - v[0]",
    "a comprehension": "v = [x for x in values]\nv.reverse()\nreturn max(v) - min(v)",
    "an augmented fresh counter": "n = 0\nfor x in values:\n    n += 1\nreturn max(values) - min(values)",
    "kwargs-like fresh set": "seen = set()\nseen.add(1)\nreturn max(values) - min(values)",
    "a collections container": "c = collections.Counter(values)\nc.update([1])\nreturn max(values) - min(values)",
    "a number added to an item": 'd = {"lo": 0}\nd["lo"] += min(values)\nreturn max(values) - d["lo"]',
}


@pytest.mark.parametrize("name", sorted(HONEST))
def test_honest_fix_writing_into_what_it_made_passes(name):
    body = "".join(f"    {line}\n" for line in HONEST[name].splitlines())
    assert screen(BUGGY_FILE, BUGGY_FILE.replace(BUGGY, body)) == []


def test_old_write_on_the_same_path_may_change():
    """`self.seen[key] = value` in the old method: a new value, or another key, on the same path passes."""
    old = BUGGY_FILE.replace("        self.seen[key] = value\n", "        self.seen[key] = value + 1\n")
    assert screen(old, BUGGY_FILE) == []
    assert screen(old, BUGGY_FILE.replace("self.seen[key] = value\n", "self.seen.update({key: value})\n")) == []


def test_new_path_or_kind_is_refused():
    assert screen(BUGGY_FILE, BUGGY_FILE.replace("self.seen[key] = value\n", "self.items[key] = value\n"))
    assert screen(BUGGY_FILE, BUGGY_FILE.replace("self.seen[key] = value\n", "self.seen.clear()\n"))


def test_attribute_made_fresh_at_top_level_then_filled():
    """`self.items = list(items)` then `self.items.append(...)` writes into what the method made; inside a
    branch the fresh store may not have run, so the write counts."""
    filled = "        self.items = list(items)\n        self.items.append(0)\n"
    assert screen(BUGGY_FILE, BUGGY_FILE.replace("        self.items = list(items)\n", filled)) == []
    branch = "        if items:\n            self.items = []\n        self.items.append(0)\n"
    assert screen(BUGGY_FILE, BUGGY_FILE.replace("        self.items = list(items)\n", branch))


def test_fresh_names_follow_python_scoping():
    """A name is fresh only where it is local to the function itself and every binding is fresh."""
    import ast

    from graph_planner.patch_check import _facts, _rules
    from graph_planner.patch_policy import Judge

    text = _patch("d = {}\nkw = dict(a=1)\n[PROFILES for PROFILES in [{}]]\nn = PROFILES\nfor e in [{}]:\n    pass")
    rules = _rules(text)
    fn = next(f for q, f in rules.functions if q == "spread")
    facts = _facts(Judge(rules, set(), set(), set()), fn, rules.scopes, "spread")
    fresh = fresh_names(rules, facts)
    assert {"d", "kw"} <= fresh and not {"PROFILES", "n", "e", "options", "values"} & fresh
    assert ("set", "PROFILES") not in writes(rules, facts)
    assert isinstance(fn, ast.FunctionDef)


def test_init_may_store_into_the_object_it_builds_other_methods_may_not():
    """`self.x = v` in `__init__` writes into the object under construction; in another method `self` may be a
    module-level instance the tests compare with (widened and put back within one call)."""
    init = BUGGY_FILE.replace("        self.seen = {}\n", "        self.seen = {}\n        self.limit = 3\n")
    assert screen(BUGGY_FILE, init) == []
    put = BUGGY_FILE.replace(
        "        self.seen[key] = value\n", "        self.seen[key] = value\n        self.limit = 3\n"
    )
    assert any("writes into self.limit" in r for r in screen(BUGGY_FILE, put))


def test_next_of_an_iterator_the_function_made():
    made = "    it = iter(values)\n    first = next(it)\n    return max(values) - min(values) + first - first\n"
    assert screen(BUGGY_FILE, BUGGY_FILE.replace(BUGGY, made)) == []


def test_a_store_into_a_fresh_instance_whose_class_runs_code_on_store_counts():
    """`Box()` is fresh, but a property setter (or `__setattr__`) of its class runs on the store: it may write
    into module state, so the store is a write into an object the function does not control."""
    setter = (
        "class Gate:\n    @property\n    def tol(self):\n        return 0\n\n"
        "    @tol.setter\n    def tol(self, v):\n        PROFILES['default']['abs_tol'] = v\n\n\n"
    )
    text = BUGGY_FILE.replace("class Box:", setter + "class Box:")
    assert any("writes into g.tol" in r for r in screen(text, _patch("g = Gate()\ng.tol = 1e300", text)))


def test_a_new_call_of_a_function_or_method_that_writes_is_refused():
    """Helpers are judged as new code (HELPERS): one that writes into an object it did not create (`Box.put`
    stores into `self.seen`) is impure, so a body calls it only where the old one did; a widen-then-restore
    through it (review 7's D, M8's form) would leave the end-of-test digest nothing to see."""
    reasons = screen(BUGGY_FILE, _patch('Box([]).put("abs_tol", 1e300 if values else 1e-9)'))
    assert any("impure helper" in r for r in reasons), reasons
