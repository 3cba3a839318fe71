"""Do two builds of a corpus hold the same tasks? Compares two corpus folders split by split:

  python tools/same_corpus.py runs/corpus-large /tmp/corpus-large-again

A task is the same when its instance id, base commit, gold patch and FAIL_TO_PASS / PASS_TO_PASS lists are
equal (the problem statement is left out: it quotes pytest's output, whose timings differ run to run).
Prints the counts per split and every difference; exits 1 when the builds differ.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

SPLITS = ("train", "heldout", "unseen_2025", "real")
KEYS = ("base_commit", "patch", "FAIL_TO_PASS", "PASS_TO_PASS")


def tasks(folder: Path, split: str) -> dict[str, dict]:
    """instance_id -> the compared fields of each task of one split (empty when the split file is absent)."""
    path = folder / f"{split}.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []
    return {r["instance_id"]: {k: r.get(k) for k in KEYS} for r in rows}


def differences(a: Path, b: Path) -> tuple[dict[str, int], list[str]]:
    """Tasks per split in `a`, and one line per task that is missing from one build or differs."""
    counts, diffs = {}, []
    for split in SPLITS:
        ta, tb = tasks(a, split), tasks(b, split)
        counts[split] = len(ta)
        diffs += [f"{split}: {i} only in {a}" for i in sorted(ta.keys() - tb.keys())]
        diffs += [f"{split}: {i} only in {b}" for i in sorted(tb.keys() - ta.keys())]
        for i in sorted(ta.keys() & tb.keys()):
            diffs += [f"{split}: {i} differs in {k}" for k in KEYS if ta[i][k] != tb[i][k]]
    return counts, diffs


def main(argv: list[str] | None = None) -> int:
    """Print the comparison of two corpus folders; 0 when they hold the same tasks."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("a", type=Path)
    ap.add_argument("b", type=Path)
    args = ap.parse_args(argv)
    counts, diffs = differences(args.a, args.b)
    print("\n".join(diffs))
    verdict = "differ" if diffs else "identical"
    print(f"{verdict}: " + ", ".join(f"{n} {s}" for s, n in counts.items()) + f" ({len(diffs)} differences)")
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
