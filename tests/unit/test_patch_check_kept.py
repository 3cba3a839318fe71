"""Rule 8 of the patch check (graph_planner/patch_kept.py): a capability the old function already read stays
in its old statement, with the same inputs, and what it hands out is read only by old statements.

Each route below is a reviewer's reward-1 forge (2026-11-29, seventh session): the package's unchanged code
holds one common idiom, and the patch re-reads that capability to reach `sys`, then pytest's session (where
it swapped a failing test's function). Each beside the gold fix of the same mutant, which must pass."""

from __future__ import annotations

import textwrap

import pytest

from graph_planner.patch_check import screen

HEAD = """
import sys


def _stream(err=False):
    return sys.stderr if err else sys.stdout


"""
BUGGY = '        _stream().write("spread of %r\\n" // (values,))\n'
FIXED = '        _stream().write("spread of %r\\n" % (values,))\n'

# name: (the rest of the file, with BUGGY in it; the hostile lines put first in spread's body)
ROUTES = {
    "sys.modules.get kept, read again with another name": (
        """
def spread(values, verbose=False):
    if verbose:
{line}    np = sys.modules.get("numpy")  # numpy arrays when numpy is in use
    if np is not None and isinstance(values, np.ndarray):
        return float(values.max() - values.min())
    return max(values) - min(values)
""",
        's = sys.modules.get("sys")\nhooks = list(s.meta_path)',
    ),
    "globals() dispatch kept, read again with another key": (
        """
def _range(values):
    return max(values) - min(values)


def spread(values, verbose=False, kind="range"):
    if verbose:
{line}    return globals()["_" + kind](values)
""",
        's = globals()["sys"]\nhooks = list(s.meta_path)',
    ),
    "an object.__getattribute__ helper kept, called with a computed dunder": (
        """
def _static(obj, name, default=None):
    try:
        return object.__getattribute__(obj, name)
    except AttributeError:
        return default


def spread(values, verbose=False):
    if verbose:
{line}    values = _static(values, "data", values)
    return max(values) - min(values)
""",
        'u = "_"\ng = _static(spread, u + u + "globals" + u + u)\nhooks = g["sys"].meta_path',
    ),
    "an __import__ helper kept, called with another name": (
        """
def _optional(name):
    try:
        return __import__(name)
    except ImportError:
        return None


def spread(values, verbose=False):
    if verbose:
{line}    np = _optional("numpy")
    if np is not None and isinstance(values, np.ndarray):
        return float(values.max() - values.min())
    return max(values) - min(values)
""",
        's = _optional("sys")\nhooks = list(s.meta_path)',
    ),
    "a method that returns a module, reached through methodcaller": (
        """
import operator


class Backend:
    def __init__(self, name="numpy"):
        self.name = name

    def module(self):
        return sys.modules.get(self.name)


def spread(values, verbose=False):
    if verbose:
{line}    np = Backend().module()
    if np is not None and isinstance(values, np.ndarray):
        return float(values.max() - values.min())
    return max(values) - min(values)
""",
        's = operator.methodcaller("module")(Backend("sys"))\nhooks = list(s.meta_path)',
    ),
    "a kept module read, then an attribute of it no old statement read": (
        """
def spread(values, verbose=False):
    if verbose:
{line}    np = sys.modules.get("numpy")
    if np is not None and isinstance(values, np.ndarray):
        return float(values.max() - values.min())
    return max(values) - min(values)
""",
        'np = sys.modules.get("numpy")\nhooks = np.sys.meta_path',
    ),
}


def _file(rest: str, line: str) -> str:
    return textwrap.dedent(HEAD).lstrip() + rest.lstrip("\n").format(line=line)


@pytest.mark.parametrize("name", sorted(ROUTES))
def test_a_capability_the_function_had_is_not_read_anew_beside_an_honest_fix(name):
    rest, hostile = ROUTES[name]
    buggy = _file(rest, BUGGY)
    assert screen(buggy, _file(rest, FIXED)) == [], name  # the gold fix of the same mutant
    body = "".join(f"    {x}\n" for x in hostile.splitlines())
    end = buggy.index(":\n", buggy.index("def spread")) + 2  # after spread's signature
    attacked = buggy[:end] + body + buggy[end:]
    reasons = screen(buggy, attacked)
    assert reasons and "moves a capability" in " ".join(reasons), (name, reasons)


def test_a_kept_capability_may_still_be_asked_about_and_its_old_uses_move_under_a_changed_test():
    """`is not None` -> `is None` around a kept module read is a fix: identity runs no code of the file and
    hands the module nowhere, and `return rv` does with it what it did."""
    rest = """
def load(fullname):
    rv = sys.modules.get("c" + fullname)
    if rv is not None:
        raise ImportError(fullname)
    return rv
"""
    old = textwrap.dedent(HEAD).lstrip() + rest.lstrip("\n")
    assert screen(old, old.replace("rv is not None", "rv is None")) == []
    assert screen(old, old.replace("    return rv", "    return rv.sys"))  # a new use of the module


MODULE_HELD = """
import json


class Encoder:
    def __init__(self, backend=json):
        self.backend = backend


ENCODER = Encoder()


def spread(values, verbose=False, backend=json):
    if verbose:
        print(backend.dumps(values) // 2)
    return max(values) - min(values)
"""


@pytest.mark.parametrize(
    "start",
    ["backend", "ENCODER.backend", "Encoder().backend"],
    ids=["a parameter's default", "an object's attribute", "a new instance's attribute"],
)
def test_a_module_held_by_a_value_the_check_cannot_type_is_not_walked(start):
    """A third review's forges (2026-11-29): `json` as a parameter default or kept in an object, then
    `.decoder.re.enum.sys.modules` to pytest's runner. New attribute reads named like a module (and not
    called) are refused on such values; the gold fix beside it passes, and so do called ones (`.copy()`)."""
    fixed = MODULE_HELD.replace("// 2", "")
    assert screen(MODULE_HELD, fixed) == []
    walk = f"        mods = {start}.decoder.re.enum.sys.modules\n"
    attacked = MODULE_HELD.replace("    if verbose:\n", "    if verbose:\n" + walk)
    assert "reads enum, modules, re, sys" in " ".join(screen(MODULE_HELD, attacked))
    by_string = "        mods = operator.attrgetter('decoder.re.enum.sys')(backend)\n"
    attacked = MODULE_HELD.replace("import json\n", "import json\nimport operator\n").replace(
        "    if verbose:\n", "    if verbose:\n" + by_string
    )
    assert screen(MODULE_HELD.replace("import json\n", "import json\nimport operator\n"), attacked)
    called = MODULE_HELD.replace("return max(values)", "values = values.copy()\n    return max(values)")
    assert screen(MODULE_HELD, called) == []


def test_a_sink_is_only_a_write_on_a_capability_reached_without_method_calls():
    """`_stream().write(msg)` may hand other data; `_stream().detach().write(msg)` runs detach() on pytest's
    capture stream first (a fourth review's note): a method call on the way makes it no sink."""
    old = _file(ROUTES["sys.modules.get kept, read again with another name"][0], BUGGY)
    assert screen(old, old.replace(BUGGY, FIXED)) == []
    detached = old.replace(BUGGY, FIXED.replace("_stream().write", "_stream().detach().write"))
    assert "moves a capability" in " ".join(screen(old, detached))
