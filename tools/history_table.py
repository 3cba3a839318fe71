"""Every release pair a `--history` build tried, as a Markdown table: its yield, why changes were dropped, its time.

    python tools/history_table.py runs/corpus-real/history_report.json > pairs.md
    python tools/history_table.py runs/corpus-real/reports            # each pair's own report, however built

One row per pair (changes tried, tasks kept, API-only changes skipped, the two commonest reasons a change
was dropped, or why the pair was unusable; build seconds and seconds per kept task), then a totals line.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path


def rows(report: dict) -> list[str]:
    """The table's lines for a history report (history_report.json)."""
    out = [
        "| pair | tried | kept | API only | commonest reasons dropped | build s | s per task |",
        "|---|---|---|---|---|---|---|",
    ]
    totals: Counter = Counter()
    reasons: Counter = Counter()
    for p in sorted(report["pairs"], key=lambda p: p["pair"]):
        dropped = Counter(p.get("dropped", {}))
        reasons.update(dropped)
        top = "; ".join(f"{why} ({n})" for why, n in dropped.most_common(2)) or "-"
        if p.get("unusable"):
            top = f"unusable: {p['unusable']}"
        per_task = f"{p['s_per_task']:.1f}" if p.get("kept") else "-"
        out.append(
            f"| {p['pair']} | {p.get('tried', 0)} | {p.get('kept', 0)} | {p.get('skipped_api', 0)} | {top} | "
            f"{p.get('build_s', 0):.0f} | {per_task} |"
        )
        totals.update({k: p.get(k, 0) for k in ("tried", "kept", "skipped_api", "build_s")})
    kept = totals["kept"]
    out.append(
        f"| **{len(report['pairs'])} pairs** | {totals['tried']} | **{kept}** | {totals['skipped_api']} | "
        + "; ".join(f"{why} ({n})" for why, n in reasons.most_common(3))
        + f" | {totals['build_s']:.0f} | {totals['build_s'] / max(kept, 1):.1f} |"
    )
    return out


def main() -> None:
    """Print the table of the report named on the command line."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("report", type=Path, help="history_report.json of a --history build, or its reports/ folder")
    args = ap.parse_args()
    if args.report.is_dir():  # one build may hold pairs built by several commands: read each pair's report
        report = {"pairs": [json.loads(p.read_text()) for p in sorted(args.report.glob("*.json"))]}
    else:
        report = json.loads(args.report.read_text())
    print("\n".join(rows(report)))


if __name__ == "__main__":
    main()
