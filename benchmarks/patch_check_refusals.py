"""Gold patches the patch check refuses: how many real fixes a rule costs, now and before.

For every package of a corpus config, every mutant the corpus builder could make
(graph_planner/corpus/mutate.py, every function of every non-test source file, the config's kinds) is
turned into its gold patch (base = the mutated file, after = the original file) and screened by the
current check (graph_planner/patch_check.py) and, in the same run, by the check of commit BASELINE read
from git (skipped with a message when git or the commit is not there). Prints per package and in total
the refusal rate of each, then the current check's refusals by category (which rule refuses) and the
gold patches only the current check refuses, so a rule that is too strict shows. Mutants are all
candidates, not only the validated tasks a build keeps (a build tries the covered ones, at most
`max_tried` per package), so rates here are over a larger set.

    python benchmarks/patch_check_refusals.py                       # both corpus configs (fetches sdists)
    python benchmarks/patch_check_refusals.py --config configs/repair-corpus.yaml --json out.json
    python benchmarks/patch_check_refusals.py --tiny                # offline: mutants of two repo files
    python benchmarks/patch_check_refusals.py --package humanize==4.9.0   # one package, all mutation kinds

`--package NAME==VER` (repeatable) measures packages outside the corpus configs: the sdist pip downloads
(unpinned: no sha256 to check against, cached like the rest), every mutation kind.

`--history CONFIG` measures real fixes instead of mutants: every function whose body changed between two
releases of a pair of a history config (configs/repair-history.yaml), applied alone to the older file as
the history builder applies it (graph_planner/corpus/history_diff.py; changes that need names only the
newer release binds are left out: they never apply alone). Every such change counts, whether or not a
test of the newer release fails without it.

    python benchmarks/patch_check_refusals.py --history configs/repair-history.yaml --no-baseline
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from graph_planner.corpus.fetch import DEFAULT_CACHE, fetch_sdist, unpack  # noqa: E402
from graph_planner.corpus.history_diff import apply_changes, diff_releases  # noqa: E402
from graph_planner.corpus.history_spec import load_history_config  # noqa: E402
from graph_planner.corpus.mutate import KINDS, mutants  # noqa: E402
from graph_planner.corpus.source import source_files  # noqa: E402 - the builder's own choice of files
from graph_planner.corpus.spec import PackageSpec, load_corpus_config  # noqa: E402
from graph_planner.patch_check import screen  # noqa: E402

BASELINE = "25d60dc"  # the check before the sound rewrite
CONFIGS = ("configs/repair-corpus-large.yaml", "configs/repair-corpus.yaml")
TINY_FILES = ("graph_planner/corpus/mutate.py", "graph_planner/patch_scope.py")


def baseline_screen():
    """The baseline check's `screen`, loaded from git, or None (with the reason printed)."""
    try:
        text = subprocess.run(
            ["git", "-C", str(ROOT), "show", f"{BASELINE}:graph_planner/patch_check.py"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        print(f"no baseline column: cannot read {BASELINE}:graph_planner/patch_check.py from git ({e})")
        return None
    path = Path(tempfile.mkdtemp()) / "baseline_patch_check.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location("baseline_patch_check", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.screen


def category(reason: str) -> str:
    """The rule a refusal reason names, without the function and the names it lists."""
    reason = re.sub(r"^in [\w.]+( \(unchanged\))?: ", "", reason)
    for pattern, name in [
        (r"^adds (\w+)", "adds {}"),
        (r"^reads ", "reads a name or chain it may not"),
        (r"^reaches ", "dunder or introspection word"),
        (r"gadget or impure helper", "an impure helper or gadget it did not use"),
        (r"computed argument", "a gadget with computed inputs"),
        (r"takes a value from a changed", "an unchanged gadget fed by a changed function"),
        (r"^changes an import", "import / global statement"),
        (r"the file's module state", "the file's own module state (rule 9)"),
        (r"^writes into self\.\w+ \(attr[^,]*$", "a new store into self.<attr> only (rule 10)"),
        (r"^writes into ", "a new write into an object it did not create (rule 10)"),
        (r"outside function bodies", "code outside function bodies"),
    ]:
        m = re.search(pattern, reason)
        if m:
            return name.format(*m.groups())
    return reason[:60]


def package_files(spec, cache: Path, tmp: Path) -> dict[str, str]:
    """{relative path: text} of a package's non-test source files, as the corpus builder picks them."""
    src = (
        Path(spec.source)
        if spec.source
        else unpack(fetch_sdist(spec.name, spec.version, spec.sha256, cache), tmp / spec.key)
    )
    out = {}
    for rel in source_files(src):
        try:
            out[rel] = (src / rel).read_text()
        except UnicodeDecodeError:
            continue
    return out


def measure(name: str, files: dict[str, str], kinds, old_screen, limit: int | None, every: int = 1) -> dict:
    """Refusals of one package's gold patches by the current and the baseline check (every `every`-th
    candidate mutant, in file and source order, when sampling)."""
    row = {"package": name, "mutants": 0, "refused": 0, "refused_baseline": 0, "seconds": 0.0}
    row["categories"], row["only_now"], row["only_before"], row["refused_at"] = Counter(), [], [], []
    t0, seen = time.monotonic(), 0
    for rel, text in sorted(files.items()):
        try:
            found = mutants(rel, text, kinds=kinds)
        except (SyntaxError, ValueError, RecursionError):
            continue
        for m in found:
            if limit is not None and row["mutants"] >= limit:
                break
            seen += 1
            if (seen - 1) % every:
                continue
            row["mutants"] += 1
            now = screen(m.source, text)
            before = old_screen(m.source, text) if old_screen else None
            row["refused"] += bool(now)
            row["refused_baseline"] += bool(before)
            for r in now:
                row["categories"][category(r)] += 1
            where = f"{rel}::{m.function} ({m.kind}, line {m.line})"
            if now:  # so that two runs (two checkouts) can be compared mutant by mutant
                row["refused_at"].append(f"{where}: {' | '.join(now)}")
            if now and before == []:
                row["only_now"].append(f"{where}: {now[0]}")
            if before and not now:
                row["only_before"].append(f"{where}: {before[0]}")
    row["seconds"] = round(time.monotonic() - t0, 1)
    return row


def measure_history(path: str, cache: Path, old_screen) -> list[dict]:
    """Refusals of the real fixes of every pair of a history config (see the module docstring)."""
    rows, done = [], set()
    with tempfile.TemporaryDirectory() as tmp:
        for pair in load_history_config(ROOT / path).pairs:
            key = f"{pair.name}-{pair.old.version}-{pair.new.version}"
            if key in done:
                continue
            done.add(key)
            trees = []
            for side, rel in (("old", pair.old), ("new", pair.new)):
                dest = Path(tmp) / key / side
                if rel.source:
                    trees.append(Path(rel.source))
                else:
                    trees.append(unpack(fetch_sdist(pair.name, rel.version, rel.sha256, cache), dest))
            row = {"package": key, "mutants": 0, "refused": 0, "refused_baseline": 0, "seconds": 0.0}
            row["categories"], row["only_now"], row["only_before"], row["refused_at"] = Counter(), [], [], []
            t0 = time.monotonic()
            for c in diff_releases(*trees).changes:
                if c.kind != "body" or c.needs:
                    continue
                try:
                    before = (trees[0] / c.file).read_text()
                except UnicodeDecodeError:
                    continue
                after = apply_changes(before, [c])
                now = screen(before, after)
                old = old_screen(before, after) if old_screen else None
                row["mutants"] += 1
                row["refused"] += bool(now)
                row["refused_baseline"] += bool(old)
                for r in now:
                    row["categories"][category(r)] += 1
                where = f"{c.file}::{c.qualname}"
                if now:
                    row["refused_at"].append(f"{where}: {' | '.join(now)}")
                if now and old == []:
                    row["only_now"].append(f"{where}: {now[0]}")
                if old and not now:
                    row["only_before"].append(f"{where}: {old[0]}")
            row["seconds"] = round(time.monotonic() - t0, 1)
            print(f"  {key}: {row['mutants']} changes, {row['seconds']} s", file=sys.stderr)
            rows.append(row)
    return rows


def report(title: str, rows: list[dict], baseline: bool) -> dict:
    """Print a config's table; returns its totals."""
    total = {k: sum(r[k] for r in rows) for k in ("mutants", "refused", "refused_baseline")}
    pct = lambda a, b: f"{100 * a / b:5.1f}%" if b else "   - "  # noqa: E731
    print(f"\n== {title}")
    print(
        f"{'package':28s} {'mutants':>8s} {'refused':>8s} {'rate':>7s}"
        + (f" {'before':>8s} {'rate':>7s}" if baseline else "")
    )
    for r in rows + [dict(package="TOTAL", **total)]:
        line = f"{r['package']:28s} {r['mutants']:8d} {r['refused']:8d} {pct(r['refused'], r['mutants'])}"
        print(line + (f" {r['refused_baseline']:8d} {pct(r['refused_baseline'], r['mutants'])}" if baseline else ""))
    cats = sum((r["categories"] for r in rows), Counter())
    print("refusal reasons (current check):")
    for cat, n in cats.most_common():
        print(f"  {n:6d}  {cat}")
    only_now = [f"{r['package']}: {x}" for r in rows for x in r["only_now"]]
    only_before = [f"{r['package']}: {x}" for r in rows for x in r["only_before"]]
    if baseline:
        print(f"refused now, accepted before: {len(only_now)}")
        for x in only_now:
            print("  " + x)
        print(f"refused before, accepted now: {len(only_before)}")
    refused_at = [f"{r['package']}: {x}" for r in rows for x in r["refused_at"]]
    return {
        **total,
        "categories": dict(cats),
        "only_now": only_now,
        "only_before": only_before,
        "refused_list": refused_at,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", action="append", help="corpus config (repeatable; default: both corpus configs)")
    ap.add_argument("--cache", default=str(DEFAULT_CACHE), help="sdist cache folder")
    ap.add_argument("--limit", type=int, default=None, help="at most this many mutants per package")
    ap.add_argument("--every", type=int, default=1, help="a sample: every N-th mutant of each package")
    ap.add_argument("--tiny", action="store_true", help="offline: mutants of two files of this repository")
    ap.add_argument("--package", action="append", help="NAME==VER of a package outside the configs (repeatable)")
    ap.add_argument("--no-baseline", action="store_true", help="skip the baseline check from git")
    ap.add_argument("--history", help="a history config: its pairs' real fixes instead of mutants")
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args(argv)
    old_screen = None if args.no_baseline else baseline_screen()
    results = {}
    if args.history:
        rows = measure_history(args.history, Path(args.cache), old_screen)
        results["history"] = report(f"real fixes of {args.history}", rows, old_screen is not None)
    elif args.tiny:
        files = {rel: (ROOT / rel).read_text() for rel in TINY_FILES}
        rows = [measure("planact (tiny)", files, None, old_screen, args.limit or 60)]
        results["tiny"] = report("tiny: two files of this repository", rows, old_screen is not None)
    elif args.package:
        rows = []
        with tempfile.TemporaryDirectory() as tmp:
            for pin in args.package:
                name, _, version = pin.partition("==")
                spec = PackageSpec(name=name, version=version, split="train")
                files = package_files(spec, Path(args.cache), Path(tmp))
                rows.append(measure(spec.key, files, tuple(KINDS), old_screen, args.limit, args.every))
        results["packages"] = report("packages outside the corpus configs", rows, old_screen is not None)
    else:
        done: dict[tuple, dict] = {}  # a package both configs list is measured once
        with tempfile.TemporaryDirectory() as tmp:
            for path in args.config or CONFIGS:
                cfg = load_corpus_config(ROOT / path)
                rows = []
                for spec in cfg.packages:
                    key = (spec.key, tuple(cfg.kinds))
                    if key not in done:
                        files = package_files(spec, Path(args.cache), Path(tmp))
                        done[key] = measure(spec.key, files, tuple(cfg.kinds), old_screen, args.limit, args.every)
                        row = done[key]
                        print(f"  {spec.key}: {row['mutants']} mutants, {row['seconds']} s", file=sys.stderr)
                    rows.append(done[key])
                results[path] = report(path, rows, old_screen is not None)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
