"""Rule 10 of the patch check after review 9 (2026-11-30): what a name may hold, not how it is spelled.

Review 9 forged passes past rule 10 with the bug left running: an old write's path reached through a
parameter rebound to a shared dict (N3), an attribute of a fresh record re-pointed at shared state (N11,
N13c), `p = 0; p += obj` holding the shared `obj` its `__radd__` returns (N12), a library object's own
mutators (`Queue.put`, `ContextVar.set`, and a helper that only calls one: N15, N18), and an `__init__` that
shadows the class attribute a held object's comparison reads (N7). Each is refused here. Beside them, fixes
of common shapes that build a container and fill it pass (review 9's false refusals), and so do the gold
fixes of the shipped corpus whose shape the new rules touch (a binding the mutant removed put back)."""

from __future__ import annotations

import pytest

from graph_planner.patch_check import screen

BASE = """
import contextvars
import datetime
import functools
import queue
from collections import defaultdict

PENDING = queue.Queue()
_TOL = contextvars.ContextVar("abs_tol", default=1e-9)
_PENDING = {"overrides": {}}


@functools.lru_cache(maxsize=None)
def limits():
    return {"abs_tol": 1e-9}


def set_tolerance(value):
    _TOL.set(value)


def _empty():
    return []


class Box:
    pass


class Profile:
    def __init__(self, abs_tol=1e-9):
        self.abs_tol = abs_tol

    def __radd__(self, other):
        return self


@functools.lru_cache(maxsize=None)
def profile():
    return Profile()


class Meter:
    tol = 1e-9

    def __init__(self, values):
        self.width = max(values) + min(values)


class Offset(datetime.tzinfo):
    def __init__(self, minutes):
        self.name = str(minutes)


def spread(values, out=None):
    if out is not None:
        out["spread"] = len(values)
    return max(values) + min(values)
"""
BUGGY_FILE = BASE.lstrip("\n")
BUGGY = "    return max(values) + min(values)\n"
HEAD = "def spread(values, out=None):\n"

FORGES = {
    "N3 the written parameter rebound to a shared dict": 'given = out\nout = limits()\nout["abs_tol"] = 1e300\nout = given',
    "N3 through a local that feeds it": 'alias = limits()\nout = alias\nout["abs_tol"] = 1e300',
    "N11 an attribute re-pointed at shared state": 'box = Box()\nbox.data = {}\nbox.data = _PENDING["overrides"]\nbox.data["abs_tol"] = 1e300',
    "N11b its update": 'box = Box()\nbox.data = {}\nbox.data = _PENDING["overrides"]\nbox.data.update(abs_tol=1e300)',
    "an attribute set through setattr": 'box = Box()\nbox.data = {}\nsetattr(box, "data", limits())\nbox.data["abs_tol"] = 1e300',
    "N12 __radd__ hands back the shared object": "p = 0\np += profile()\np.abs_tol = 1e300",
    "N15 Queue.put": "PENDING.put(1e300)",
    "N15b Queue.put_nowait": "PENDING.put_nowait(1e300)",
    "Queue.put handed on": "list(map(PENDING.put, [1e300]))",
    "Queue.put through a local": "q = PENDING\nq.put(1e300)",
    "N18 ContextVar.set, put back within the call": "_TOL.set(1e300 if values else 1e-9)",
}


def _patch(body: str) -> str:
    return BUGGY_FILE.replace(HEAD, HEAD + "".join(f"    {line}\n" for line in body.splitlines()))


@pytest.mark.parametrize("name", sorted(FORGES))
def test_forge_is_refused_by_rule_10(name):
    reasons = screen(BUGGY_FILE, _patch(FORGES[name]))
    assert any("writes into" in r for r in reasons), reasons


def test_a_helper_that_only_calls_a_library_mutator_is_impure():
    """N18b: `set_tolerance` only calls `_TOL.set`; a new call of it is refused like the call itself."""
    reasons = screen(BUGGY_FILE, _patch("set_tolerance(1e300 if values else 1e-9)"))
    assert any("set_tolerance" in r and "impure helper" in r for r in reasons), reasons


def test_init_may_not_shadow_a_class_attribute_but_may_add_a_new_one():
    """N7: `tol` is a class attribute `close` reads; a new `self.tol` in `__init__` is refused. A new
    attribute the class lacks (a base from a pure standard module resolved: tzinfo has no `minutes`) passes."""
    bug = "        self.width = max(values) + min(values)\n"
    shadow = BUGGY_FILE.replace(bug, bug + "        self.tol = 1e300\n")
    assert any("writes into self.tol" in r for r in screen(BUGGY_FILE, shadow))
    added = BUGGY_FILE.replace(bug, bug + "        self.count = len(values)\n")
    assert screen(BUGGY_FILE, added) == []
    base = "        self.name = str(minutes)\n"
    assert screen(BUGGY_FILE, BUGGY_FILE.replace(base, base + "        self.minutes = minutes\n")) == []
    assert any(
        "self.tzname" in r for r in screen(BUGGY_FILE, BUGGY_FILE.replace(base, base + "        self.tzname = 1\n"))
    )


HONEST = {
    "unpacked displays": "low, high = [], []\nlow.append(min(values))\nhigh.append(max(values))\nreturn high[0] - low[0]",
    "a walrus of sorted()": "if (ordered := sorted(values)):\n    ordered.reverse()\nreturn ordered[0] - ordered[-1]",
    "a conditional display": "acc = [] if values else [0]\nacc.extend(values)\nreturn max(acc) - min(acc)",
    "a helper returning a new list": "acc = _empty()\nacc.extend(values)\nreturn max(acc) - min(acc)",
    "dict.fromkeys": "seen = dict.fromkeys(values, 0)\nseen[max(values)] = 1\nreturn max(seen) - min(seen)",
    "setdefault(k, []).append": "groups = {}\nfor v in values:\n    groups.setdefault('all', []).append(v)\n"
    "return max(groups['all']) - min(groups['all'])",
    "defaultdict(list)": "groups = defaultdict(list)\nfor v in values:\n    groups[0].append(v)\n"
    "return max(groups[0]) - min(groups[0])",
    "rows of a table": "rows = [[v, v] for v in values]\nrows[0][1] = rows[0][0]\n"
    "return max(r[1] for r in rows) - min(r[0] for r in rows)",
    "a list of lists": "runs = [[]]\nfor v in sorted(values):\n    runs[-1].append(v)\nreturn runs[-1][-1] - runs[-1][0]",
    "a nested display": "stats = {'low': {}, 'high': {}}\nstats['low']['v'] = min(values)\n"
    "stats['high']['v'] = max(values)\nreturn stats['high']['v'] - stats['low']['v']",
    "a running total": "total = 0\nfor v in values:\n    total += v\nreturn max(values) - min(values) + total - total",
    "an attribute filled after a fresh store": "box = Box()\nbox.items = []\nbox.items.append(max(values))\n"
    "return box.items[0] - min(values)",
}


@pytest.mark.parametrize("name", sorted(HONEST))
def test_honest_fix_building_and_filling_a_container_passes(name):
    body = "".join(f"    {line}\n" for line in HONEST[name].splitlines())
    assert screen(BUGGY_FILE, BUGGY_FILE.replace(BUGGY, body)) == []


@pytest.mark.parametrize(
    "body",
    [
        "groups = {}\ngroups.update(p=limits())\ngroups['p']['abs_tol'] = 1e300",
        "groups = {}\nfill = groups\nfill['p'] = limits()\ngroups['p']['abs_tol'] = 1e300",
        "runs = [[]]\nruns[0:1] = [limits()]\nruns[0]['abs_tol'] = 1e300",
    ],
)
def test_an_item_of_a_container_that_may_get_a_shared_item_is_not_fresh(body):
    """Filled by `update`, through another name or by a slice store, a container's items may be shared: a
    store into one counts."""
    assert any("writes into" in r for r in screen(BUGGY_FILE, _patch(body)))


def test_an_old_write_keeps_its_permission_when_the_binding_put_back_is_fresh_or_the_same_object():
    """A remove-statement mutant's gold fix puts back the binding of the name the old body writes into
    (`result = {}`, `seq = iter(seq)`, `numparses = [True] * n`): that name was unbound in the mutant, or the
    new binding holds what it held."""
    old = "def f(items, n):\n    for k in items:\n        result[k] = n\n    return result\n"
    assert screen(old, old.replace("    for k", "    result = {}\n    for k")) == []
    assert screen(old, old.replace("    for k", "    result = [None] * n\n    for k")) == []
    seq = "def second(seq):\n    next(seq)\n    return next(seq)\n"
    assert screen(seq, seq.replace("    next(seq)\n", "    seq = iter(seq)\n    next(seq)\n")) == []


def test_an_old_write_keeps_its_permission_through_the_same_value_spelled_otherwise():
    """Real fixes of release history: boltons' `cur_list, n = self.lists[i], len(self)` became
    `cur_list = self.lists[i]`; pathspec's `pattern = pattern.strip()` gained a branch binding
    `pattern.lstrip()`, and `segs = pattern.split("/")` is written into either way."""
    old = "def f(self, i):\n    cur, n = self.lists[i], len(self)\n    del cur[-n:]\n"
    assert screen(old, old.replace("cur, n = self.lists[i], len(self)", "cur = self.lists[i]\n    n = 2")) == []
    old = "def g(p):\n    p = p.strip()\n    segs = p.split('/')\n    del segs[0]\n    return segs\n"
    new = old.replace(
        "    p = p.strip()\n", "    if p.endswith(' '):\n        p = p.lstrip()\n    else:\n        p = p.strip()\n"
    )
    assert screen(old, new) == []
