"""The module state digest without a sandbox: what it sees of a package's state (the review-7 routes' stores),
what it leaves alone (code, hash order, libraries' inner state), that it runs none of the package's code, and
the host's comparison of two runs' digests (graph_planner/state_digest.py)."""

from __future__ import annotations

import importlib
import sys
import textwrap

import pytest

from graph_planner.corpus.plugin.planact_digest import state_digest
from graph_planner.state_digest import FAILED, differs, mismatches, reference, unstable

PKG = """
import logging
from array import array
from collections import ChainMap
from contextvars import ContextVar

PROFILES = {"default": {"abs_tol": 1e-9}, "loose": {"abs_tol": 1e-3}}
TOLS = [1e-9, 1e-6]
NAMES = {"alpha", "beta", "gamma"}
LOG = logging.getLogger("dgpkg")


def profile(name="default"):
    return PROFILES.get(name)


def setting(key, value=None, _store={"abs_tol": 1e-9}):
    if value is not None:
        _store[key] = value
    return _store[key]


def _make():
    cell = {"abs_tol": 1e-9}

    def get():
        return cell

    return get


_settings = _make()


class Limits:
    abs_tol = 1e-9

    @classmethod
    def configure(cls, value):
        cls.abs_tol = value


class Options:
    def __init__(self):
        self.extra = {"abs_tol": 1e-9}


class Slotted:
    __slots__ = ("tol",)

    def __init__(self):
        self.tol = 1e-9


OPTIONS = Options()
SLOTTED = Slotted()
ARRAY = array("d", [1e-9])
LAYERS = ChainMap({"abs_tol": 1e-9})
CONTEXT = ContextVar("dgpkg", default={"abs_tol": 1e-9})


def isclose(a, b):
    return abs(a - b) <= PROFILES["default"]["abs_tol"]
"""


@pytest.fixture()
def pkg(tmp_path, monkeypatch):
    """A fresh package `dgpkg` under tmp_path, imported; and the digest function of tmp_path."""
    (tmp_path / "dgpkg").mkdir()
    (tmp_path / "dgpkg" / "__init__.py").write_text(textwrap.dedent(PKG))
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("dgpkg")
    yield module, state_digest(str(tmp_path))
    sys.modules.pop("dgpkg", None)


def _changed(before: dict, after: dict) -> set[str]:
    return {k.split("\t")[1] for k in before.keys() | after.keys() if before.get(k) != after.get(k)}


def test_only_the_repositorys_own_modules_and_their_data_globals_are_digested(pkg):
    module, digest = pkg
    now = digest()
    assert {k.split("\t")[0] for k in now} == {"dgpkg"}  # no stdlib, site-packages or planact module
    names = {k.split("\t")[1] for k in now}
    assert {"PROFILES", "TOLS", "isclose", "Limits", "OPTIONS"} <= names
    assert "logging" not in names and "__name__" not in names  # submodules and module machinery
    assert digest() == now  # the same state digests the same


@pytest.mark.parametrize(
    "change, key",
    [
        (lambda m: m.profile().__setitem__("abs_tol", 1e300), "PROFILES"),  # A: a getter hands the inner dict out
        (lambda m: [p.__setitem__("abs_tol", 1e300) for p in m.PROFILES.values()], "PROFILES"),  # B
        (lambda m: m.setting("abs_tol", 1e300), "setting"),  # H: a helper's own mutable default
        (lambda m: m._settings().__setitem__("abs_tol", 1e300), "_settings"),  # I: a closure cell
        (lambda m: m.Limits.configure(1e300), "Limits"),  # G: a class attribute through cls
        (lambda m: m.OPTIONS.extra.__setitem__("abs_tol", 1e300), "OPTIONS"),  # D: an instance's dict
        (lambda m: setattr(m.SLOTTED, "tol", 1e300), "SLOTTED"),  # a slot
        (lambda m: m.TOLS.__init__([1e300]), "TOLS"),  # F: __init__ on a live list
        (lambda m: m.TOLS.append(1e300), "TOLS"),  # J: an in-place library call
        (lambda m: setattr(m, "isclose", max), "isclose"),  # L: a global rebound (the test module's, there)
        (lambda m: setattr(m.isclose, "abs_tol", 1.0), "isclose"),  # a function attribute
        (lambda m: m.ARRAY.__setitem__(0, 1e300), "ARRAY"),  # review 8's M4: the stdlib's data containers
        (lambda m: m.LAYERS.maps[0].__setitem__("abs_tol", 1e300), "LAYERS"),
        (lambda m: m.CONTEXT.get().__setitem__("abs_tol", 1e300), "CONTEXT"),  # M6: a ContextVar's value
    ],
)
def test_a_state_change_through_any_route_changes_the_globals_digest(pkg, change, key):
    module, digest = pkg
    before = digest()
    change(module)
    assert _changed(before, digest()) == {key}


def test_code_hash_order_and_libraries_inner_state_leave_it_alone(pkg):
    module, digest = pkg
    before = digest()
    module.isclose.__code__ = (lambda a, b: a == b).__code__  # a fix changes code, not state
    module.NAMES.clear()
    module.NAMES.update(["gamma", "alpha", "beta"])  # another insertion (and hash) order
    module.PROFILES["default"] = module.PROFILES.pop("default")  # dict order
    module.LOG.setLevel(logging_level := 40)  # a library object's inner state: not what a test compares
    module.LOG.isEnabledFor(logging_level)  # (fills the logger's level cache)
    assert _changed(before, digest()) == set()


def test_no_code_of_the_package_runs_and_cycles_end(tmp_path, monkeypatch):
    # every hook a walker might call raises: the digest reads the builtin types' C methods and the dicts only
    (tmp_path / "hostile.py").write_text(
        textwrap.dedent(
            """
            class Boom(dict):
                def __iter__(self):
                    raise AssertionError("iterated")

                def items(self):
                    raise AssertionError("items")

                def __eq__(self, other):
                    raise AssertionError("compared")

                __hash__ = None

            class Odd:
                @property
                def __dict__(self):
                    raise AssertionError("read __dict__")

                def __repr__(self):
                    raise AssertionError("repr")

                def __getattribute__(self, name):
                    raise AssertionError("getattr " + name)

            class Many(list):
                def __iter__(self):
                    raise AssertionError("iterated")

            BOOM = Boom(a=1)
            ODD = Odd()
            MANY = Many(["x"] * 100)
            LOOP = {"self": None}
            LOOP["self"] = LOOP
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.import_module("hostile")
    try:
        now = state_digest(str(tmp_path))()
        assert {k.split("\t")[1] for k in now} >= {"BOOM", "ODD", "MANY", "LOOP"}
    finally:
        sys.modules.pop("hostile", None)


def test_a_long_list_of_strings_is_one_c_call_and_still_sees_an_item(tmp_path, monkeypatch):
    (tmp_path / "tables.py").write_text("TABLE = ['x%d' % i for i in range(70000)]\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    tables = importlib.import_module("tables")
    try:
        digest = state_digest(str(tmp_path))
        before = digest()
        tables.TABLE[65000] = "forged"
        assert _changed(before, digest()) == {"TABLE"}
    finally:
        sys.modules.pop("tables", None)


# The host's side: per-test deltas (key -> hash, None = gone) in run order.
K, T, LAZY = "pkg\tPROFILES", "tests.test_x\tisclose", "pkg.lazy\tTABLE"


def test_a_huge_int_digests_and_the_copys_path_is_the_same_state_in_every_copy(tmp_path, monkeypatch):
    # review 8: a 20,000-digit int made the digest raise (decimal conversion), and a test module's path to its
    # fixtures differed between two sandbox slots' copies, refusing a correct fix judged against the other's gold
    digests = []
    for copy in ("slot-a", "slot-b"):
        (tmp_path / copy / "dgpath").mkdir(parents=True)
        text = "import os\nHERE = os.path.join(os.path.dirname(__file__), 'fixtures')\nBIG = 1 << 20000\n"
        (tmp_path / copy / "dgpath" / "__init__.py").write_text(text)
        monkeypatch.syspath_prepend(str(tmp_path / copy))
        importlib.import_module("dgpath")
        digests.append(state_digest(str(tmp_path / copy))())
        sys.modules.pop("dgpath")
    assert {"dgpath\tHERE", "dgpath\tBIG"} <= digests[0].keys() and FAILED not in digests[0]
    assert digests[0] == digests[1]


GOLD = [("t1", {K: "a", T: "f"}), ("t2", {}), ("t3", {})]


def test_the_same_state_after_every_test_is_no_mismatch():
    assert mismatches(GOLD, [("t1", {K: "a", T: "f"}), ("t2", {}), ("t3", {})]) == []


def test_a_state_changed_at_a_test_differs_from_there_on():
    forged = [("t1", {K: "a", T: "f"}), ("t2", {K: "wide"}), ("t3", {})]
    assert mismatches(GOLD, forged) == [("t2", [K]), ("t3", [K])]
    assert "after t2 differs" in differs(reference(GOLD, GOLD), forged) and "pkg.PROFILES" in differs(
        reference(GOLD, GOLD), forged
    )
    # changed at a test and put back before the next: still seen after the test that changed it
    assert mismatches(GOLD, [("t1", {K: "a", T: "f"}), ("t2", {T: "max"}), ("t3", {T: "f"})]) == [("t2", [T])]


def test_a_digest_that_raised_is_a_difference_however_the_rest_looks():
    # review 8: a failed digest drops every key, and modules only one run holds are not compared: without the
    # failure itself counting, a patch that makes the digest raise turns the comparison off
    failed = [("t1", {K: "a", T: "f"}), ("t2", {FAILED: "ValueError", K: None, T: None}), ("t3", {})]
    assert mismatches(GOLD, failed)[0] == ("t2", [FAILED])
    assert "after t2 differs" in differs(reference(GOLD, GOLD), failed)


def test_keys_that_vary_between_the_gold_fixs_own_runs_are_not_compared():
    first = [("t1", {K: "a", "pkg\tTMP": "/tmp/1"}), ("t2", {})]
    again = [("t1", {K: "a", "pkg\tTMP": "/tmp/2"}), ("t2", {})]
    assert unstable(first, again) == ["pkg\tTMP"]
    ref = reference(first, again)
    assert differs(ref, [("t1", {K: "a", "pkg\tTMP": "/tmp/3"}), ("t2", {})]) == ""
    assert differs(ref, [("t1", {K: "b", "pkg\tTMP": "/tmp/3"}), ("t2", {})]) != ""


def test_a_module_imported_at_another_test_is_compared_from_where_both_have_it():
    gold = [("t1", {K: "a"}), ("t2", {LAZY: "x"}), ("t3", {})]
    assert mismatches(gold, [("t1", {K: "a", LAZY: "x"}), ("t2", {}), ("t3", {})]) == []
    assert mismatches(gold, [("t1", {K: "a", LAZY: "y"}), ("t2", {}), ("t3", {})]) == [("t2", [LAZY]), ("t3", [LAZY])]
    # a new global in a module both hold (a test module's builtin shadowed) is a difference
    assert mismatches(gold, [("t1", {K: "a", "pkg\tround": "max"}), ("t2", {LAZY: "x"}), ("t3", {})]) != []


def test_runs_of_other_tests_or_orders_differ_and_no_reference_judges_nothing():
    assert mismatches(GOLD, [("t2", {}), ("t1", {K: "a", T: "f"}), ("t3", {})])[0][0].startswith("<order>")
    assert "another order" in differs(reference(GOLD, GOLD), GOLD[:2])
    assert reference(GOLD, GOLD[:2]).get("none") and differs({"none": "gold failed"}, []) == ""


def test_the_boot_script_reports_each_passed_calls_changes_before_teardown(tmp_path):
    """The plugin's rows, through the real boot script (a plain subprocess): the first passed call carries every
    key, a later one only what changed, taken before teardown (a monkeypatch undone there is still seen), and
    a failed call none."""
    import os

    from graph_planner.corpus.testrun import _DIGEST, name_guard_config

    from .boot_runner import run_boot

    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text(
        "TOL = {'abs': 1e-9}\n\n\ndef isclose(a, b):\n    return abs(a - b) <= TOL['abs']\n"
    )
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_pkg.py").write_text(
        "import pkg\n\n\ndef test_a():\n    assert pkg.isclose(1, 1)\n\n\n"
        "def test_patched(monkeypatch):\n    monkeypatch.setitem(pkg.TOL, 'abs', 1.0)\n    assert pkg.isclose(1, 1.5)\n\n\n"
        "def test_fails():\n    pkg.TOL['abs'] = 2.0\n    assert False\n\n\ndef test_after():\n    assert pkg.isclose(1, 1)\n"
    )
    key = b"k" * 16
    read, write = os.pipe()
    cfg = {
        "channel": write,
        "move_to": 200,
        "key": key.hex(),
        "watch": [],
        "allowed": {},
        "record": False,
        "names": name_guard_config(),
        "args": ["-q", "-p", "no:cacheprovider", f"--rootdir={tmp_path}", "tests/test_pkg.py"],
        "digest": str(_DIGEST),
    }
    _, report = run_boot(tmp_path, cfg, key, read, write)
    assert not report.problem
    rows = dict(report.digests)
    assert [t.split("::")[1] for t, _ in report.digests] == ["test_a", "test_patched", "test_after"]  # not test_fails
    first = rows["tests/test_pkg.py::test_a"]
    assert "pkg\tTOL\tsabs" in first and "test_pkg\ttest_a" in first and "pkg\tisclose" in first
    # the setitem, seen before its undo (a small dict item by item); the test's fixture values beside it
    assert set(rows["tests/test_pkg.py::test_patched"]) == {"pkg\tTOL\tsabs", "<fixture>\tmonkeypatch"}
    # after: undone by the monkeypatch, then set to 2.0 by the failed test; the digest shows where it is now
    assert rows["tests/test_pkg.py::test_after"]["pkg\tTOL\tsabs"] not in (first["pkg\tTOL\tsabs"], None)
    assert report.digest_s > 0


def test_review_8_unstable_entry_lambdas_and_fixture_values(tmp_path, monkeypatch):
    """M2: an unstable entry (a time stamp) leaves its siblings compared; M12: two lambdas of one module differ;
    M5: a module-scoped fixture's dict, which no module global reaches, is digested from the test's values."""
    (tmp_path / "dgr8.py").write_text(
        textwrap.dedent(
            """
            PROFILES = {"default": {"abs_tol": 1e-9}, "loaded": 1.0}
            COMPARE = {"default": {"close": lambda a, b: abs(a - b) <= 1e-9}, "rough": {"close": lambda a, b: True}}
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("dgr8")
    try:
        digest = state_digest(str(tmp_path))
        options = {"abs_tol": 1e-9}
        first = digest({"options": options})
        module.PROFILES["loaded"] = 2.0  # the gold fix's second run: another time stamp
        again = digest({"options": options})
        skip = unstable([("t", first)], [("t", again)])
        assert skip == ["dgr8\tPROFILES\tsloaded"]
        module.PROFILES["default"]["abs_tol"] = 1e300
        module.COMPARE["default"]["close"] = module.COMPARE["rough"]["close"]
        options["abs_tol"] = 1e300
        forged = digest({"options": options})
        keys = {k for _, ks in mismatches([("t", first)], [("t", forged)], frozenset(skip)) for k in ks}
        assert {"dgr8\tPROFILES\tsdefault\tsabs_tol", "dgr8\tCOMPARE\tsdefault\tsclose"} <= keys
        assert "<fixture>\toptions\tsabs_tol" in keys
    finally:
        sys.modules.pop("dgr8", None)
