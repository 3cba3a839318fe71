"""A tiny local package with its own pytest suite, built into a corpus (no network) for env tests."""

from __future__ import annotations

import re
import shutil
import textwrap
from pathlib import Path

from filelock import FileLock

from graph_planner.corpus.build import build_corpus
from graph_planner.corpus.spec import CorpusConfig, PackageSpec

# The function both the corpus fixture and the validation tests mutate (indented as FILES' texts are).
CLAMP = """
        def clamp(x, lo, hi):
            if x < lo:
                return lo
            if x > hi:
                return hi
            return x
"""

FILES = {
    "minilib/__init__.py": "from minilib.core import clamp, mean, window, scale\n",
    "minilib/core.py": CLAMP
    + """

        def mean(values):
            total = 0
            for v in values:
                total = total + v
            return total / len(values)


        def window(seq, size=2):
            return [seq[i:i + size] for i in range(len(seq) - size + 1)]


        def scale(values, factor):
            return [clamp(v * factor, 0, 100) for v in values]
        """,
    "tests/test_core.py": """
        from minilib import clamp, mean, scale, window


        def test_clamp_inside():
            assert clamp(5, 0, 10) == 5


        def test_clamp_edges():
            assert clamp(-1, 0, 10) == 0 and clamp(11, 0, 10) == 10


        def test_mean():
            assert mean([1, 2, 3, 6]) == 3


        def test_window():
            assert window([1, 2, 3]) == [[1, 2], [2, 3]]
            assert window([1, 2, 3], 3) == [[1, 2, 3]]


        def test_scale():
            assert scale([1, 50, 60], 2) == [2, 100, 100]
        """,
}


def write_files(root: Path, files: dict[str, str]) -> Path:
    """Write {relative path: indented text} under `root`; returns `root`."""
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text).lstrip("\n"))
    return root


def write_package(root: Path) -> Path:
    """The package's source folder under `root`."""
    return write_files(root / "minilib-src", FILES)


def _build(root: Path, kinds: list[str] | None) -> Path:
    spec = PackageSpec(name="minilib", version="0.1", source=str(write_package(root)), split="heldout")
    cfg = CorpusConfig(
        packages=[spec], per_function=3, max_tried=14, max_kept=14, timeout_s=30, **({"kinds": kinds} if kinds else {})
    )
    build_corpus(cfg, root / "corpus", log=lambda _: None)
    return root / "corpus"


def _session_dir(path: Path) -> Path | None:
    """pytest's folder for this test session (`.../pytest-<N>`, shared by its xdist workers), if `path` is in one."""
    return next((p for p in [path, *path.parents] if re.fullmatch(r"pytest-\d+", p.name)), None)


def build_minilib(root: Path, kinds: list[str] | None = None) -> Path:
    """A corpus of minilib tasks in `root`/corpus; returns the corpus folder.

    Built once per test session and `kinds` (~10 CPU-s; six test files use it), then copied: every caller
    gets a fresh folder of its own (its result cache, contexts), the same tasks as a build of its own (two
    builds give identical tasks, tools/same_corpus.py)."""
    session = _session_dir(Path(root).resolve())
    if session is None:
        return _build(root, kinds)
    shared = session / "minilib-corpora" / "-".join(sorted(kinds or ["all"]))
    shared.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(shared) + ".lock"):
        if not (shared / "built").is_file():
            shutil.rmtree(shared, ignore_errors=True)
            _build(shared, kinds)
            (shared / "built").touch()
    write_package(root)  # the package's source beside the corpus, as a build of its own leaves it
    shutil.copytree(shared / "corpus", root / "corpus")
    return root / "corpus"
