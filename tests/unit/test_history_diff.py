"""Two releases compared function by function: changed / added / removed functions, API-only changes
skipped, module code outside functions listed, a change applied alone; and a release's changelog entry."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

from graph_planner.corpus.changelog import entry, release_notes
from graph_planner.corpus.history_diff import apply_changes, compare_files, diff_releases
from graph_planner.corpus.history_tasks import classify

OLD = textwrap.dedent('''
    import re

    LIMIT = 3


    def parse(text):
        """Split text."""
        return re.split(",", text)


    def clamp(x, lo=0, hi=10):
        return min(max(x, lo), hi)


    def gone(x):
        return x


    def pad(s, width):
        return s


    class Box:
        size = 1

        def area(self):
            return self.size * self.size

        def label(self):
            return "box"

        class Lid:
            def open(self):
                return False
    ''').lstrip()

NEW = textwrap.dedent('''
    import re
    import string

    LIMIT = 4
    SEP = ","


    def parse(text):
        """Split text on commas."""
        return re.split(",", text)


    def clamp(x, lo=0, hi=12):
        # the upper bound moved
        return min(max(x, lo), hi)


    def pad(s, width, fill=" "):
        return s.ljust(width, fill)


    def split(text):
        return text.split(SEP)


    def strip_all(text):
        return text.strip(string.whitespace)


    class Box:
        size = 2

        def area(self):
            return self._side() ** 2

        def _side(self):
            return self.size

        def label(self):
            return "box " + str(self.size)

        class Lid:
            def open(self):
                return True
    ''').lstrip()


def _by_name(changes):
    return {c.qualname: c for c in changes}


def test_functions_are_compared_one_by_one_and_classified():
    changes, outside = compare_files(OLD, NEW, "pkg/mod.py")
    by = _by_name(changes)
    kinds = {q: c.kind for q, c in by.items()}
    assert kinds == {
        "parse": "docstring",
        "clamp": "body",  # a literal default is body, as a patch may change it
        "gone": "removed",
        "pad": "signature",
        "split": "added",
        "strip_all": "added",
        "Box.area": "body",
        "Box._side": "added",
        "Box.label": "body",
        "Box.Lid.open": "body",  # a method of a nested class is its own function
    }
    assert by["pad"].detail == "adds parameters fill"
    # a body that reads a name only the newer module binds, or a new method through self, needs that addition
    assert by["Box.area"].needs == ("Box._side",)
    assert by["Box.label"].needs == () and by["clamp"].needs == ()
    # module code outside functions that changed is listed, never taken for a function change
    assert "- LIMIT = 3" in outside and "+ LIMIT = 4" in outside and "+ import string" in outside
    assert "+ Box.size = 2" in outside and not any("def " in ln for ln in outside)


def test_api_only_changes_are_skipped_with_a_reason_and_body_changes_are_candidates():
    by = _by_name(compare_files(OLD, NEW, "pkg/mod.py")[0])
    assert classify(by["split"]) == "adds API: split is not in the older release" and by["split"].api_only
    assert classify(by["gone"]).startswith("removes API") and by["gone"].api_only
    assert classify(by["pad"]) == "changes API: adds parameters fill" and by["pad"].api_only
    assert classify(by["parse"]) == "docstring only" and not by["parse"].api_only
    assert classify(by["Box.area"]) == "needs names only the newer release defines: Box._side"
    assert classify(by["clamp"]) == classify(by["Box.label"]) == classify(by["Box.Lid.open"]) == ""


def test_a_change_applied_alone_replaces_only_its_function():
    by = _by_name(compare_files(OLD, NEW, "pkg/mod.py")[0])
    text = apply_changes(OLD, [by["Box.Lid.open"]])
    assert "return True" in text and "return False" not in text
    # everything else stays byte for byte, and the file still parses
    assert text.replace("return True", "return False") == OLD
    ast.parse(text)
    both = apply_changes(OLD, [by["clamp"], by["Box.label"]])
    assert "hi=12" in both and '"box " + str(self.size)' in both and "LIMIT = 3" in both and "def split" not in both


def test_release_trees_match_modules_by_name_and_leave_tests_out(tmp_path: Path):
    old, new = tmp_path / "old", tmp_path / "new"
    for root, files in (
        (old, {"lib.py": "def f():\n    return 1\n", "tests/test_lib.py": "def test_f():\n    pass\n"}),
        (new, {"lib/__init__.py": "def f():\n    return 2\n", "tests/test_lib.py": "def test_f():\n    assert 1\n"}),
    ):
        for rel, text in files.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text)
    (new / "extra.py").write_text("def g():\n    return 0\n")
    diff = diff_releases(old, new)
    assert diff.moved_files == {"lib.py": "lib/__init__.py"}
    assert [(c.file, c.qualname, c.kind) for c in diff.changes] == [("extra.py", "g", "added"), ("lib.py", "f", "body")]
    assert diff.added_files == ["extra.py"] and not diff.removed_files


def test_the_changelog_entry_of_a_release():
    text = "# Changes\n\n## [1.2.0]\n\n- Fix `x` (#12).\n- Add `y`.\n\n## [1.1.9]\n\n- Older.\n"
    assert entry(text, "1.2.0") == "## [1.2.0]\n\n- Fix `x` (#12).\n- Add `y`."
    rst = "v2.0.1 (2026-01-01)\n===================\n\n- Fix it.\n\nv2.0.0 (2025-12-01)\n===================\n"
    assert entry(rst, "2.0.1") == "v2.0.1 (2026-01-01)\n===================\n\n- Fix it."
    listed = "History\n-------\n\n- 1.22.4 Fix a\n  Fix b\n- 1.22.3 Fix c\n"
    assert entry(listed, "1.22.4") == "- 1.22.4 Fix a\n  Fix b"
    assert entry(listed, "1.22.40") == "" and entry("see 1.2.0.1 for more\n", "1.2.0", strict=True) == ""


def test_release_notes_prefer_a_changelog_file_over_the_readme(tmp_path: Path):
    (tmp_path / "README.md").write_text("Install 3.1 with pip.\n\n- 3.1 readme entry\n")
    assert release_notes(tmp_path, "3.1") == ("README.md", "- 3.1 readme entry")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "changelog.rst").write_text("Version 3.1\n-----------\n\n* fixed\n\nVersion 3.0\n")
    assert release_notes(tmp_path, "3.1") == ("docs/changelog.rst", "Version 3.1\n-----------\n\n* fixed")
    assert release_notes(tmp_path, "9.9") == ("", "")
