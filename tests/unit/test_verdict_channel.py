"""The verdict's host side without a sandbox: signed report lines, the rules a believed report meets, and
the boot script's guard run directly (a plain subprocess) on a two-function package."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from pathlib import Path

from graph_planner.corpus.channel import UNSIGNED, read_channel, tampering
from graph_planner.corpus.testrun import GUARD_EXIT, NAMES, name_guard_config

from .boot_runner import run_boot

KEY = b"k" * 16


def _lines(rows: list[dict], key: bytes = KEY, start: int = 0) -> str:
    out = []
    for i, row in enumerate(rows, start):
        text = json.dumps(row, separators=(",", ":"))
        out.append(hmac.new(key, f"{i}:{text}".encode(), hashlib.sha256).hexdigest()[:32] + " " + text)
    return "\n".join(out) + "\n"


PASS = [{"id": "t::a", "when": w, "outcome": "passed", "s": 0.1} for w in ("setup", "call", "teardown")]
END_OK = {"end": 0, "failed": 0, "collected": 1}


def test_signed_lines_are_read_and_anything_else_is_a_forgery():
    report = read_channel(_lines([*PASS, END_OK]), KEY)
    assert report.outcomes == {"t::a": "passed"} and not report.problem and tampering(report, 0, {}) == ""
    # a line signed with another key, a replayed line, a line out of sequence: the report is not the plugin's
    forged = _lines([*PASS, END_OK], key=b"x" * 16)
    assert read_channel(forged, KEY).problem == UNSIGNED and read_channel(forged, KEY).outcomes == {}
    replayed = _lines(PASS) + _lines(PASS[1:2])
    assert read_channel(replayed, KEY).problem == UNSIGNED
    plain = _lines(PASS) + json.dumps(END_OK) + "\n"
    assert read_channel(plain, KEY).problem == UNSIGNED and read_channel(plain, KEY).end is None


def test_exit_status_must_be_zero_exactly_when_every_phase_passed():
    report = read_channel(_lines([*PASS, END_OK]), KEY)
    assert "exit status" in tampering(report, 1, {})  # the process said failure, the lines say pass
    failing = read_channel(_lines([*PASS[:1], {**PASS[1], "outcome": "failed"}, END_OK]), KEY)
    assert "exit status" in tampering(failing, 0, {})  # pytest reported 0 with a failure in its lines
    no_end = read_channel(_lines(PASS), KEY)
    assert "end" in tampering(no_end, 0, {})
    wrong_count = read_channel(_lines([*PASS[:1], {**PASS[1], "outcome": "failed"}, {**END_OK, "end": 1}]), KEY)
    assert "failure count" in tampering(wrong_count, 1, {})


def test_a_canary_reported_otherwise_voids_the_confirming_run():
    rows = [*PASS, {"id": "c::test_f", "when": "call", "outcome": "passed", "s": 0}, {**END_OK, "collected": 2}]
    assert "must-fail" in tampering(read_channel(_lines(rows), KEY), 0, {"c::test_f": "failed"})


PKG = "def add(a, b):\n    return a + b\n\n\ndef peek(a, b):\n    OPEN\n    return a + b\n"
TESTS = "from pkg import add, peek\n\n\ndef test_add():\n    assert add(1, 2) == 3\n\n\ndef test_peek():\n    assert peek(1, 2) == 3\n"


def _boot(
    tmp_path: Path,
    body: str,
    watch_line: int,
    allowed: dict | None = None,
    record: bool = False,
    pkg: str = PKG,
    tests: str = TESTS,
):
    """Run the boot script on a package whose `peek` has `body`, watching the function at `watch_line`."""
    (tmp_path / "pkg").mkdir(exist_ok=True)
    (tmp_path / "pkg" / "__init__.py").write_text(pkg.replace("OPEN", body))
    (tmp_path / "tests").mkdir(exist_ok=True)
    (tmp_path / "tests" / "test_pkg.py").write_text(tests)
    read, write = os.pipe()
    path = str(tmp_path / "pkg" / "__init__.py")
    cfg = {
        "channel": write,
        "move_to": 200,
        "key": KEY.hex(),
        "watch": [[path, watch_line, watch_line + 2, "peek"]],
        "allowed": allowed or {},
        "record": record,
        "names": name_guard_config(),
        "args": ["-q", "-p", "no:cacheprovider", f"--rootdir={tmp_path}", "tests/test_pkg.py"],
    }
    return run_boot(tmp_path, cfg, KEY, read, write)


def test_the_guard_stops_only_what_the_changed_function_sets_off(tmp_path):
    opener = "open(__file__).close()"
    rc, report = _boot(tmp_path, opener, watch_line=5)  # peek (lines 5-7) opens a file: stopped
    assert (
        rc == GUARD_EXIT
        and report.guard == ("open", "peek")
        and report.outcomes.get("tests/test_pkg.py::test_add") == "passed"
    )
    rc, report = _boot(tmp_path, opener, watch_line=1)  # only add is watched: peek's open is not the patch's
    assert rc == 0 and report.guard is None and set(report.outcomes.values()) == {"passed"}
    rc, report = _boot(tmp_path, opener, watch_line=5, record=True)  # the clean run records instead
    assert rc == 0 and report.record == {"peek": ["open"], NAMES: []}
    rc, report = _boot(tmp_path, opener, watch_line=5, allowed={"peek": ["open"]})  # what the clean code did
    assert rc == 0 and report.guard is None
    # a library's lazy import (and the imported module's own start-up) is not the patch's doing
    rc, report = _boot(tmp_path, "__import__('colorsys')", watch_line=5)
    assert rc == 0 and report.guard is None
    # reading a code object itself is stopped; a library that reads it for its own purposes is not
    rc, report = _boot(tmp_path, "add.__code__", watch_line=5)
    assert rc == GUARD_EXIT and report.guard == ("object.__getattr__", "peek")
    # inspect, imported by the module (an import a changed function makes of a capability module is the name
    # guard's: see test_a_helpers_import_of_a_capability_module_is_judged_by_name)
    rc, report = _boot(tmp_path, "inspect.signature(add)", watch_line=6, pkg="import inspect\n" + PKG)
    assert rc == 0 and report.guard is None
    rc, report = _boot(tmp_path, "__import__('inspect').signature(add)", watch_line=5)
    assert rc == GUARD_EXIT and report.guard == ("pkg/__init__.py|peek|__import__|inspect|NoneType", "<names>")
    rc, report = _boot(tmp_path, "pass", watch_line=5)  # honest control
    assert rc == 0 and report.guard is None and not report.problem


# A changed function stores a name in object state; an unchanged function hands it to getattr. The patch
# check cannot follow that flow (objects' state); the name guard judges the name when getattr receives it.
BOX = (
    "class Box:\n    def __init__(self):\n        self.name = 'size'\n        self.size = self._size = 3\n\n\n"
    "def label(box):\n    OPEN\n    return box\n\n\ndef read(box):\n    return getattr(box, box.name)\n"
)
BOX_TESTS = "from pkg import Box, label, read\n\n\ndef test_read():\n    assert read(label(Box())) == 3\n"


def test_the_name_guard_judges_a_computed_name_where_getattr_receives_it(tmp_path):
    run = lambda body, **kw: _boot(tmp_path, body, watch_line=7, pkg=BOX, tests=BOX_TESTS, **kw)  # noqa: E731
    rc, report = run("box.name = 'size'")  # honest control: a plain public name is nothing to judge
    assert rc == 0 and report.guard is None and set(report.outcomes.values()) == {"passed"}
    rc, report = run("box.name = '_size'", record=True)  # the clean code's run records the private name
    key = "pkg/__init__.py|read|getattr|_size|Box"
    assert rc == 0 and report.record[NAMES] == [key]
    rc, report = run("box.name = '_size'", allowed={NAMES: [key]})  # what the clean code did: allowed
    assert rc == 0 and report.guard is None and set(report.outcomes.values()) == {"passed"}
    for attack in ("box.name = '_' + '_dict__'", "box.name = chr(95) * 2 + 'class__'", "box.name = 'mro'"):
        rc, report = run(attack, allowed={NAMES: [key]})  # the run ends before getattr returns
        assert rc == GUARD_EXIT and report.guard[1] == NAMES and "|read|getattr|" in report.guard[0], attack
    # the same name on an object of another class is another key (a module's __dict__ is not an instance's)
    other = "box = type('Other', (), {'_size': 3, 'name': '_size'})()"
    rc, report = run(other, allowed={NAMES: [key]})
    assert rc == GUARD_EXIT and report.guard[0].endswith("|_size|Other")


# Code under test rebinds what json.dumps looks up on every call: the string encoder (and, by removing the
# C encoder, the pure-Python path that reads it). The boot script's signer took its C functions before the
# package was imported, so the signed report still says what pytest saw.
REWRITE = (
    "import json.encoder\n    json.encoder.c_make_encoder = None\n"
    "    json.encoder.encode_basestring_ascii = "
    "lambda s: '\"passed\"' if s == 'failed' else json.encoder.py_encode_basestring_ascii(s)\n    pass"
)
FAILING = TESTS.replace("peek(1, 2) == 3", "peek(1, 2) == 4")


def test_rebinding_the_json_encoder_in_the_process_does_not_change_a_signed_line(tmp_path):
    rc, report = _boot(tmp_path, REWRITE, watch_line=1, tests=FAILING)
    assert not report.problem and report.outcomes["tests/test_pkg.py::test_peek"] == "failed", report
    assert report.outcomes["tests/test_pkg.py::test_add"] == "passed" and rc == 1
    rc, report = _boot(tmp_path, "pass", watch_line=1, tests=FAILING)  # control: the same verdict unpatched
    assert report.outcomes["tests/test_pkg.py::test_peek"] == "failed" and rc == 1
