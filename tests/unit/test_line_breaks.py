"""Lines as Python numbers them (review 11): str.splitlines also breaks at U+2028, form feeds and other
characters, so lines taken with it and indexed by the parser's line numbers were other lines, and a change
to one function could compare as "the same text" and escape the patch check, the off-target rule and the
call jail."""

from __future__ import annotations

from graph_planner.patch_check import changed_functions, screen
from graph_planner.patching import apply_diff

BASE = 'def a():\n    return "x\u2028y"\n\n\ndef b():\n    return 1\n'


def test_a_change_below_a_line_separator_is_seen():
    patched = BASE.replace("return 1", "return 2")
    assert [name for name, *_ in changed_functions(BASE, patched)] == ["b"]
    assert screen(BASE, patched) == []  # an honest change of b's body: accepted, and seen as b's


def test_a_patch_may_not_add_a_character_other_tools_read_as_a_line_break():
    clean = "def a():\n    return 1\n\n\ndef b():\n    return 1\n"
    for c in ("\u2028", "\u2029", "\x0c", "\x85", "\x1c"):
        hidden = clean.replace("return 1\n\n", f"return 1  # {c}\n\n", 1)
        assert screen(clean, hidden) == [
            f"adds U+{ord(c):04X}, which other tools read as a line break and Python does not"
        ]
    assert screen(clean, clean.replace("return 1", "return 3", 1)) == []  # control


def test_a_diff_keeps_form_feeds_and_separators_it_does_not_touch():
    base = "x = 1\n\x0c\ndef f():\n    s = 'a\u2028b'\n    return 1\n"
    diff = "--- a/m.py\n+++ b/m.py\n@@ -5,1 +5,1 @@\n-    return 1\n+    return 2\n"
    out = apply_diff(diff, {"m.py": base}.get, {"m.py"})["m.py"]
    assert out == base.replace("return 1", "return 2")
