"""Patches from a model: parse a unified diff or an edit script, apply it to file texts, screen it.

Nothing here touches the disk or runs code. A patch that does not parse or apply raises PatchError with
a message the agent sees as its observation. Paths must name existing non-test Python files of the
repository: a patch cannot add files, edit tests, or reach outside the working copy. What a patch may
change inside a file is graph_planner.patch_check's allow-list (`screen`, re-exported here).
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath

from graph_planner.graph.build import is_test_file
from graph_planner.patch_check import screen  # noqa: F401 - the check every patch path uses
from graph_planner.pyparse import source_lines


class PatchError(ValueError):
    """A patch that cannot be applied; the message says why."""


_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def _path(header: str) -> str:
    name = header.split("\t")[0].strip()
    return name[2:] if name[:2] in ("a/", "b/") else name


def check_path(path: str, files: set[str]) -> str:
    """A repository-relative path the patch may change (existing, non-test .py, no escape)."""
    p = PurePosixPath(path)
    if p.is_absolute() or ".." in p.parts or not path:
        raise PatchError(f"{path!r}: only paths inside the repository")
    if path not in files:
        raise PatchError(f"{path!r} is not a Python file of the repository (a patch edits existing files)")
    if is_test_file(path) or p.name == "conftest.py":
        raise PatchError(f"{path!r} is a test file: the tests are the judge, not editable")
    return path


def parse_diff(diff: str) -> dict[str, list[tuple[int, list[str], list[str]]]]:
    """file -> hunks (old start line, old lines, new lines) of a unified diff."""
    out: dict[str, list] = {}
    lines = source_lines(diff)  # the lines Python sees: a U+2028 inside a line stays in it
    if lines and lines[-1] == "":  # the text's final line end (splitlines gives no empty line after it)
        lines.pop()
    i, current = 0, None
    while i < len(lines):
        line = lines[i]
        if line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            current = _path(lines[i + 1][4:])
            if current == "/dev/null":
                raise PatchError("a patch may not delete files")
            out.setdefault(current, [])
            i += 2
            continue
        m = _HUNK.match(line)
        if m and current is not None:
            if len(m.group(1)) > 9:  # int() refuses numbers past 4,300 digits with a ValueError, not a PatchError
                raise PatchError(f"hunk header {line[:40]!r}...: line number out of range")
            old, new = [], []
            i += 1
            while i < len(lines) and not lines[i].startswith(("@@", "--- ")):
                body = lines[i]
                tag, text = (body[:1], body[1:]) if body else (" ", "")
                if tag == " ":
                    old.append(text), new.append(text)
                elif tag == "-":
                    old.append(text)
                elif tag == "+":
                    new.append(text)
                elif tag != "\\":  # "\ No newline at end of file"
                    break
                i += 1
            out[current].append((int(m.group(1)), old, new))
            continue
        i += 1
    if not any(out.values()):
        raise PatchError("no hunks found: expected a unified diff (---/+++ headers and @@ hunks)")
    return out


def _apply_hunks(text: str, hunks: list[tuple[int, list[str], list[str]]], path: str) -> str:
    lines = source_lines(text)
    shift = 0
    for start, old, new in hunks:
        want = start - 1 + shift
        # exact position first, then the nearest offset where the old lines match (as `patch` does)
        for at in sorted(range(len(lines) - len(old) + 1), key=lambda k: abs(k - want)):
            if lines[at : at + len(old)] == old:
                break
        else:
            raise PatchError(f"{path}: hunk at line {start} does not match the file")
        lines[at : at + len(old)] = new
        shift += len(new) - len(old)
    # source_lines keeps a final empty line where splitlines did not: join them as they were
    if lines and lines[-1] == "" and text.endswith(("\n", "\r")):
        lines.pop()
    return "\n".join(lines) + ("\n" if text.endswith(("\n", "\r")) else "")


def apply_diff(diff: str, read, files: set[str]) -> dict[str, str]:
    """New texts of the files a unified diff changes; `read(path)` gives a file's current text."""
    return {check_path(p, files): _apply_hunks(read(p), hunks, p) for p, hunks in parse_diff(diff).items()}


def apply_edits(edits: list[dict], read, files: set[str]) -> dict[str, str]:
    """New texts from an edit script: each {file, old, new} replaces the one occurrence of `old`."""
    texts: dict[str, str] = {}
    for n, e in enumerate(edits):
        path = check_path(str(e.get("file", "")), files)
        text = texts.get(path, read(path))
        old, new = str(e.get("old", "")), str(e.get("new", ""))
        count = text.count(old) if old else 0
        if count != 1:
            raise PatchError(f"edit {n}: `old` must occur exactly once in {path} (found {count})")
        texts[path] = text.replace(old, new, 1)
    return texts
