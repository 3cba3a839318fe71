"""The per-pair table of a release-history build (tools/history_table.py)."""

from __future__ import annotations

from tools.history_table import rows


def test_every_pair_is_a_row_with_its_yield_reasons_and_time_and_the_totals_add_up():
    report = {
        "pairs": [
            {
                "pair": "b-1-2",
                "tried": 4,
                "kept": 2,
                "skipped_api": 1,
                "dropped": {"x": 2},
                "build_s": 20.0,
                "s_per_task": 10.0,
            },
            {
                "pair": "a-1-2",
                "tried": 0,
                "kept": 0,
                "skipped_api": 0,
                "dropped": {},
                "build_s": 5.0,
                "unusable": "the newer release's tests do not run",
            },
        ]
    }
    lines = rows(report)
    assert lines[2].startswith("| a-1-2 |") and "unusable: the newer release's tests do not run" in lines[2]
    assert lines[3] == "| b-1-2 | 4 | 2 | 1 | x (2) | 20 | 10.0 |"
    assert lines[-1].startswith("| **2 pairs** | 4 | **2** | 1 |") and lines[-1].endswith("| 25 | 12.5 |")
