"""The boot script's shared caches for failure reports (planact_boot._share_source_trees): an agent reads
the failing tests' tracebacks, so a run must print exactly what pytest alone prints, only cheaper."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

PLUGIN = Path(__file__).resolve().parents[2] / "graph_planner" / "corpus" / "plugin"
RUN = """
import sys
sys.path.insert(0, {plugin!r})
import pytest
import planact_boot
if {shared}:
    planact_boot._share_source_trees()
sys.path.pop(0)
sys.exit(pytest.main(sys.argv[1:]))
"""


def _package(root: Path) -> None:
    """A module whose bugs raise inside nested calls (tracebacks through its frames), and its tests."""
    (root / "calc.py").write_text(
        textwrap.dedent(
            '''
            def scale(x, k):
                """Multiply, through two frames."""
                return _times(x, k)


            def _times(x, k):
                total = 0
                for _ in range(k):
                    total += x
                return total + offset  # the bug: a name never bound


            class Table:
                def __init__(self, rows):
                    self.rows = rows

                def width(self):
                    return max(
                        len(r)
                        for r in self.rows
                    ) + pad  # the bug again
            '''
        )
    )
    tests = ["from calc import Table, scale\n\nimport pytest\n"]
    tests += [f"\ndef test_scale_{i}():\n    assert scale({i}, 3) == {3 * i}\n" for i in range(12)]
    tests += [
        "\n@pytest.mark.parametrize('n', range(6))\ndef test_width(n):\n"
        "    t = Table(['x' * n, 'y'])\n    assert t.width() == max(n, 1)\n",
        "\ndef test_fine():\n    assert Table([]).rows == []\n",
        # the module rewritten on disk mid-run (longer now): later reports read it again, as pytest alone does
        "\ndef test_rewritten():\n    import calc, linecache, pathlib\n    p = pathlib.Path(calc.__file__)\n"
        "    p.write_text('# moved\\n' * 5 + p.read_text())\n    linecache.checkcache()\n    assert scale(1, 1) == 1\n",
        "\ndef test_after_the_rewrite():\n    assert Table(['ab']).width() == 2\n",
    ]
    (root / "test_calc.py").write_text("".join(tests))


def _report(root: Path, shared: bool) -> tuple[int, str]:
    _package(root)  # afresh: a test rewrites the module
    code = RUN.format(plugin=str(PLUGIN), shared=shared)
    args = ["-q", "-rf", "--tb=short", "-p", "no:cacheprovider", "-o", "addopts="]
    out = subprocess.run([sys.executable, "-c", code, *args], cwd=root, capture_output=True, text=True, timeout=120)
    return out.returncode, re.sub(r"in [0-9.]+s", "in Xs", out.stdout)


def test_failure_reports_are_the_text_pytest_alone_prints(tmp_path):
    rc, plain = _report(tmp_path, shared=False)
    rc_shared, shared = _report(tmp_path, shared=True)
    assert rc == rc_shared == 1
    assert (
        "20 failed, 1 passed" in plain and plain.count("# the bug") >= 18 and "# moved" in plain
    )  # the module's lines are shown
    assert shared == plain
