"""Two tiny local "releases" of a package, written by the tests (no network): 0.1 and 0.2.

0.2 differs from 0.1 by
  * a real fix in one function: `mean([])` returns 0.0 instead of dividing by zero (test_mean_empty);
  * a fix spanning two functions: `window` now normalises its size through `_size`, and `_size` clamps a
    size below 1 (test_window_zero needs both; neither alone fixes it);
  * an API-only addition: a new function `median`, exported, with its own test module;
  * an unrelated change: `scale` rewritten with the same behaviour, and a docstring edit in `clamp`;
  * the changelog entry of 0.2.
"""

from __future__ import annotations

from pathlib import Path

from .repair_fixture import write_files

OLD = {
    "minilib/__init__.py": "from minilib.core import clamp, mean, scale, window\n",
    "minilib/core.py": '''
        def clamp(x, lo, hi):
            """Clamp x to [lo, hi]."""
            if x < lo:
                return lo
            if x > hi:
                return hi
            return x


        def mean(values):
            total = 0
            for v in values:
                total = total + v
            return total / len(values)


        def _size(size):
            return size


        def window(seq, size=2):
            return [seq[i:i + size] for i in range(len(seq) - size + 1)]


        def chunks(seq, size=2):
            size = _size(size)
            return [seq[i:i + size] for i in range(0, len(seq), size)]


        def scale(values, factor):
            return [clamp(v * factor, 0, 100) for v in values]
        ''',
    "tests/test_core.py": """
        from minilib import clamp, mean, scale, window


        def test_clamp():
            assert clamp(5, 0, 10) == 5 and clamp(-1, 0, 10) == 0 and clamp(11, 0, 10) == 10


        def test_mean():
            assert mean([1, 2, 3, 6]) == 3


        def test_window():
            assert window([1, 2, 3]) == [[1, 2], [2, 3]]


        def test_scale():
            assert scale([1, 50, 60], 2) == [2, 100, 100]
        """,
    "CHANGES.md": """
        ## 0.1

        - First release.
        """,
}

NEW = {
    **OLD,
    "minilib/__init__.py": "from minilib.core import clamp, mean, median, scale, window\n",
    "minilib/core.py": '''
        def clamp(x, lo, hi):
            """Clamp x to the closed interval [lo, hi]."""
            if x < lo:
                return lo
            if x > hi:
                return hi
            return x


        def mean(values):
            if not values:
                return 0.0
            total = 0
            for v in values:
                total = total + v
            return total / len(values)


        def median(values):
            ordered = sorted(values)
            return ordered[len(ordered) // 2]


        def _size(size):
            return max(1, size)


        def window(seq, size=2):
            size = _size(size)
            return [seq[i:i + size] for i in range(len(seq) - size + 1)]


        def chunks(seq, size=2):
            size = _size(size)
            return [seq[i:i + size] for i in range(0, len(seq), size)]


        def scale(values, factor):
            out = []
            for v in values:
                out.append(clamp(v * factor, 0, 100))
            return out
        ''',
    "tests/test_core.py": OLD["tests/test_core.py"]
    + """

        def test_mean_empty():
            assert mean([]) == 0.0


        def test_window_zero():
            assert window([1, 2], 0) == [[1], [2]]
        """,
    "tests/test_median.py": """
        from minilib import median


        def test_median():
            assert median([3, 1, 2]) == 2
        """,
    "CHANGES.md": """
        ## 0.2

        - `mean` of an empty list is 0.0 (it raised ZeroDivisionError).
        - `window` treats a size below 1 as 1.
        - New: `median`.

        ## 0.1

        - First release.
        """,
}


def write_releases(root: Path) -> tuple[Path, Path]:
    """Both releases' folders under `root`: (0.1, 0.2)."""
    return write_files(root / "minilib-0.1", OLD), write_files(root / "minilib-0.2", NEW)


def history_config(root: Path) -> Path:
    """A release-history YAML naming the two local releases; returns its path."""
    old, new = write_releases(root)
    path = root / "history.yaml"
    path.write_text(
        "timeout_s: 30\n"
        "pairs:\n"
        f"  - {{name: minilib, old: {{version: '0.1', source: '{old}'}}, new: {{version: '0.2', source: '{new}'}}}}\n"
    )
    return path
