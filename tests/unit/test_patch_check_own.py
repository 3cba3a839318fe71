"""Rule 9 of the patch check (graph_planner/patch_own.py): a changed function changes the file's own module
state only with statements its old version had, their inputs computed as before.

Forge F4 (2026-11-30): the package's `isclose` reads a module-level tolerance, the tests compare with it, and
a patch that only widens it scores with the bug in place. Each route to that store is refused beside an
honest control that passes: the gold fix, an unchanged memo-cache store in a fixed function, an old
statement kept."""

from __future__ import annotations

import pytest

from graph_planner.patch_check import screen

BASE = """
import bisect
import heapq
import operator

SETTINGS = {"abs_tol": 1e-9}
TOLS = [1e-9]
_cache = {}
_calls = 0


def isclose(a, b):
    return abs(a - b) <= SETTINGS["abs_tol"]


def set_option(key, value):
    SETTINGS[key] = value


def settings():
    return SETTINGS


def clamp(x, lo, hi):
    return max(lo, min(x, hi))


def spread(values):
    global _calls
    _calls += 1
    key = tuple(values)
    if key not in _cache:
        _cache[key] = max(values) - min(values)
    return _cache[key] + 1
"""
BUGGY = "    return _cache[key] + 1\n"
FIXED = "    return _cache[key]\n"
BUGGY_FILE = BASE.lstrip("\n")
GOLD_FILE = BUGGY_FILE.replace(BUGGY, FIXED)

ROUTES = {
    "a direct item store": 'SETTINGS["abs_tol"] = 1e300',
    "through a local alias": 's = SETTINGS\ns["abs_tol"] = 1e300',
    "through an expression handing it on": '(SETTINGS or {})["abs_tol"] = 1e300',
    "an in-place method": "SETTINGS.update(abs_tol=1e300)",
    "setdefault after a pop": 'SETTINGS.pop("abs_tol")\nSETTINGS.setdefault("abs_tol", 1e300)',
    "an in-place method handed on as a value": 'list(map(SETTINGS.update, [{"abs_tol": 1e300}]))',
    "dict.update on it": "dict.update(SETTINGS, abs_tol=1e300)",
    "operator.setitem on it": 'operator.setitem(SETTINGS, "abs_tol", 1e300)',
    "what a getter of the file returns": 'settings()["abs_tol"] = 1e300',
    "a new call of a helper that stores": 'set_option("abs_tol", 1e300)',
    "augmenting a declared global anew": "_calls -= 10",
    "an old store of a memo cache, made twice": "_cache[key] = max(values) - min(values)",
    # review 7 (2026-11-30): initialised again in place; the standard library's in-place functions
    "__init__ on the live dict": "SETTINGS.__init__(abs_tol=1e300)",
    "dict.__init__ on it": "dict.__init__(SETTINGS, abs_tol=1e300)",
    "bisect.insort into a module list": "bisect.insort(TOLS, 1e300)",
    "heapq.heappush onto a module list": "heapq.heappush(TOLS, 1e300)",
}


def _attacked(hostile: str) -> str:
    """The gold fix with the hostile lines put just before the return: the bug itself is not what counts."""
    body = "".join(f"    {x}\n" for x in hostile.splitlines())
    return GOLD_FILE.replace(FIXED, body + FIXED)


def test_the_gold_fix_keeps_the_old_stores_and_passes():
    """The memo-cache store and the `global` counter are old statements with the same inputs."""
    assert screen(BUGGY_FILE, GOLD_FILE) == []


@pytest.mark.parametrize("name", sorted(ROUTES))
def test_a_change_to_the_files_own_module_state_is_refused(name):
    reasons = " ".join(screen(BUGGY_FILE, _attacked(ROUTES[name])))
    assert "the file's module state" in reasons or "impure helper" in reasons, (name, reasons)


def test_a_new_call_of_a_storing_helper_is_an_impure_helper_and_a_pure_one_still_passes():
    """set_option stores into SETTINGS: as new code it breaks rule 9, so it is impure and a body calls it
    only where its old version did; clamp changes nothing and may be called anew."""
    assert "set_option (a gadget or impure helper" in " ".join(screen(BUGGY_FILE, _attacked('set_option("a", 1)')))
    assert screen(BUGGY_FILE, _attacked("values = [clamp(v, 0, 9) for v in values]")) == []


def test_locals_and_copies_of_module_data_may_change():
    """A fresh copy (`dict(SETTINGS)`), a local dict and reads of module data change nothing other code reads."""
    honest = (
        'opts = dict(SETTINGS)\nopts["abs_tol"] = 1e300\nseen = {}\nseen[key] = isclose(1, 1)\n'
        "tols = list(TOLS)\nbisect.insort(tols, 1.0)\nheapq.heappush(tols, 2.0)"
    )
    assert screen(BUGGY_FILE, _attacked(honest)) == []


def test_an_old_store_moves_only_with_the_same_inputs():
    """The memo store kept but fed another value (the key rebound before it) is a new store."""
    moved = BUGGY_FILE.replace("    key = tuple(values)\n", "    key = tuple(values)\n    key = ()\n")
    assert "the file's module state" in " ".join(screen(BUGGY_FILE, moved))


def test_a_setter_the_task_targets_may_be_fixed_in_its_other_statements():
    """A function whose old version stores into module data: a fix elsewhere in it passes; a new value
    for the stored item is a new statement."""
    old = BUGGY_FILE.replace("    SETTINGS[key] = value\n", "    SETTINGS[key] = value\n    return value - 1\n")
    assert screen(old, old.replace("return value - 1", "return value")) == []
    assert "the file's module state" in " ".join(screen(old, old.replace("= value\n", "= value * 1e300\n")))


@pytest.mark.parametrize(
    "honest",
    [
        'chars = []\nchars.append(SETTINGS["abs_tol"])',  # a bound append on a fresh list, not dict.update's form
        "text = '%s'\ntext %= (SETTINGS,)",  # `%` builds a new string
        "row = [0] * len(SETTINGS)\nrow[0] = 1",  # the count of a repeated display
        'seen = {}\nseen[SETTINGS["abs_tol"]] = values[len(SETTINGS) - 1]',
    ],
    ids=["append to a fresh list", "string formatting", "a repeated display", "a key and a copy"],
)
def test_module_data_read_into_locals_changes_nothing(honest):
    """Idioms of real fixes (parse, boltons, text-unidecode, runar) the first cut of the rule refused."""
    assert screen(BUGGY_FILE, _attacked(honest)) == [], honest


def test_a_local_that_may_hold_module_data_still_counts():
    """The same forms where the local may hold the module's own object: an item of it, `+=` of a list of it."""
    for hostile in [
        'pair = [values, SETTINGS]\npair[1]["abs_tol"] = 1e300',
        'box = []\nbox += [SETTINGS]\nbox[0]["k"] = 1',
    ]:
        assert "the file's module state" in " ".join(screen(BUGGY_FILE, _attacked(hostile))), hostile
