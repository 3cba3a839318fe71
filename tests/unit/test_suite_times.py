"""tools/suite_times.py: per-file test seconds from a JUnit report pytest itself wrote."""

from __future__ import annotations

import subprocess
import sys

from tests.unit.tool_module import load_tool


def test_per_file_seconds_from_a_real_pytest_junit_report(tmp_path, capsys):
    pkg = tmp_path / "suite"
    pkg.mkdir()
    (pkg / "test_slow.py").write_text(
        "import time, pytest\n"
        "@pytest.fixture(scope='module')\n"
        "def warm():\n    time.sleep(0.4)\n"
        "def test_a(warm):\n    time.sleep(0.2)\n"
        "class TestGroup:\n    def test_b(self, warm):\n        pass\n"
    )
    (pkg / "test_fast.py").write_text("def test_c():\n    pass\n")
    (pkg / "other").mkdir()  # a file of the same name elsewhere (tests/unit and tests/integration have such)
    (pkg / "other" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "other" / "test_fast.py").write_text("def test_c():\n    pass\n")
    report = tmp_path / "report.xml"
    subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(pkg), f"--junitxml={report}"],
        check=True,
        capture_output=True,
        cwd=tmp_path,
    )
    tool = load_tool("suite_times")
    tests = tool.test_seconds(report)
    assert set(tests) == {
        "suite/test_slow.py::test_a",
        "suite/test_slow.py::TestGroup::test_b",
        "suite/test_fast.py::test_c",
        "suite/other/test_fast.py::test_c",
    }
    files = tool.file_seconds(tests)
    assert list(files)[0] == "suite/test_slow.py"  # longest first
    assert files["suite/test_slow.py"] >= 0.6  # the module fixture's setup counts against the file's first test
    assert tool.main([str(report), "--top", "1"]) == 0
    out = capsys.readouterr().out
    assert "4 tests" in out and "test_slow.py" in out
    assert tool.main([str(tmp_path / "absent.xml")]) == 1
