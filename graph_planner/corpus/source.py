"""A package's side of a corpus build: its clean source, its test-run settings and its candidate mutants.

`prepare` unpacks the pinned sdist (and its pure-Python dependencies) into the corpus folder,
`suite_for` says how its tests run there, and `candidates` picks the mutants worth proving: covered
functions only, up to `per_function` each (distinct kinds first), interleaved, capped at `max_tried`.
graph_planner.corpus.build proves and writes them.
"""

from __future__ import annotations

import os
import random
import shutil
from pathlib import Path

from graph_planner.corpus.fetch import fetch_sdist, sha256, unpack
from graph_planner.corpus.mutate import Mutant, mutants
from graph_planner.corpus.spec import CorpusConfig, PackageSpec
from graph_planner.corpus.testrun import Suite
from graph_planner.corpus.validate import Baseline
from graph_planner.graph.build import SKIP_DIRS, is_test_file


def source_root(folder: Path) -> str:
    """'src' for a src/ layout, else '.'."""
    src = folder / "src"
    return (
        "src"
        if src.is_dir() and any(p.suffix == ".py" or (p / "__init__.py").is_file() for p in src.iterdir())
        else "."
    )


def suite_for(spec: PackageSpec, out: Path, timeout_s: float) -> Suite:
    """The test-run settings of a package inside corpus folder `out`."""
    deps = []
    for d in spec.deps:
        folder = (out / "deps" / d.key).resolve()
        deps.append(str(folder / source_root(folder)))
    root = source_root(out / "src" / spec.key) if spec.source_root == "auto" else spec.source_root
    return Suite(root, tuple(os.path.normpath(p) for p in deps), ("-o", "addopts=", *spec.pytest_args), timeout_s)


def prepare(spec: PackageSpec, out: Path, cache: Path) -> Path:
    """Clean source of the package (and its dependencies) unpacked under `out`; returns the source folder."""
    for dep in spec.deps:
        unpack(fetch_sdist(dep.name, dep.version, dep.sha256, cache), out / "deps" / dep.key)
    src = out / "src" / spec.key
    if spec.source:
        if src.exists():
            shutil.rmtree(src)
        shutil.copytree(spec.source, src, ignore=shutil.ignore_patterns(".git", "__pycache__", "*.pyc"))
    else:
        archive = fetch_sdist(spec.name, spec.version, spec.sha256, cache)
        unpack(archive, src)
        (out / "src" / f"{spec.key}.sha256").write_text(sha256(archive))
    return src


def source_files(src: Path) -> list[str]:
    """The package's own modules under `src`: no tests, conftest, setup.py or skipped folders."""
    out = []
    for p in sorted(src.rglob("*.py")):
        rel = p.relative_to(src)
        if (
            not SKIP_DIRS.intersection(rel.parts)
            and not is_test_file(rel.as_posix())
            and rel.name != "setup.py"
            and "conftest" not in rel.name
        ):
            out.append(rel.as_posix())
    return out


def candidates(src: Path, base: Baseline, cfg: CorpusConfig) -> list[Mutant]:
    """Mutants of covered functions: up to `per_function` per function (distinct kinds first), in an
    order that interleaves functions, capped at `max_tried`."""
    rng = random.Random(cfg.seed)
    covered = base.covered_functions()
    per_fn: list[list[Mutant]] = []
    for rel in source_files(src):
        if rel not in covered:
            continue
        by_fn: dict[str, list[Mutant]] = {}
        for m in mutants(rel, (src / rel).read_text(), functions=covered[rel], kinds=tuple(cfg.kinds)):
            by_fn.setdefault(m.function, []).append(m)
        for fn in sorted(by_fn):
            pool = by_fn[fn]
            rng.shuffle(pool)
            chosen, kinds = [], set()
            for m in pool + pool:  # first pass: one per kind; second pass: fill up
                if len(chosen) == cfg.per_function:
                    break
                if m in chosen or (m.kind in kinds and len(kinds) < len({x.kind for x in pool})):
                    continue
                chosen.append(m)
                kinds.add(m.kind)
            per_fn.append(chosen)
    rng.shuffle(per_fn)
    ordered = [fn[i] for i in range(cfg.per_function) for fn in per_fn if i < len(fn)]
    return ordered[: cfg.max_tried]
