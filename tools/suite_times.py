"""Where the suite's time goes: per-file seconds from the JUnit reports `make test` writes.

  python tools/suite_times.py runs/tests-phase1.xml runs/tests-phase2.xml

Each test's time is its setup + call + teardown (pytest's JUnit default), so a module fixture counts
against its file's first test. Phase 1 runs on 2 workers, so its wall time is about half its test
seconds; a file's total is what `tests/conftest.py` SLOW_FILES holds, by file name (the suite collects the longest
files first so no worker runs a long one alone at the end).
"""

from __future__ import annotations

import argparse
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path


def test_seconds(report: Path) -> dict[str, float]:
    """Test id (path/to/test_file.py[::Class]::name) -> seconds, from one JUnit XML report."""
    out = {}
    for case in ET.parse(report).iter("testcase"):
        # classname is the dotted module path, then a class for class-based tests; the path is kept whole
        # because tests/unit and tests/integration hold files of the same name
        parts = case.get("classname", "").split(".")
        k = next((i for i, p in enumerate(parts) if p.startswith("test_")), len(parts) - 1)
        test_id = "::".join(["/".join(parts[: k + 1]) + ".py", *parts[k + 1 :], case.get("name", "")])
        out[test_id] = float(case.get("time") or 0.0)
    return out


def file_seconds(tests: dict[str, float]) -> dict[str, float]:
    """File name -> the summed seconds of its tests, longest first."""
    totals: dict[str, float] = defaultdict(float)
    for test_id, s in tests.items():
        totals[test_id.split("::")[0]] += s
    return dict(sorted(totals.items(), key=lambda kv: -kv[1]))


def main(argv: list[str] | None = None) -> int:
    """Print the slowest files and tests of each report, and each report's total test seconds."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("reports", nargs="+", type=Path)
    ap.add_argument("--top", type=int, default=20, help="files and tests to list per report")
    args = ap.parse_args(argv)
    for report in args.reports:
        if not report.exists():
            print(f"{report}: missing (make test writes it)", file=sys.stderr)
            return 1
        tests = test_seconds(report)
        files = file_seconds(tests)
        print(f"{report}: {len(tests)} tests, {sum(tests.values()):.0f} test-seconds in {len(files)} files")
        for name, s in list(files.items())[: args.top]:
            print(f"  {s:7.1f} s  {name}")
        print("  slowest tests:")
        for name, s in sorted(tests.items(), key=lambda kv: -kv[1])[: args.top]:
            print(f"  {s:7.1f} s  {name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
