"""A release's changelog entry, read from the sdist: the words a release-history task's issue starts from.

Looked for in CHANGES / CHANGELOG / HISTORY / NEWS / RELEASE-NOTES files (any extension) at the top of
the sdist, then the same names under docs/ (and doc/), then README files (parse keeps its history
there). The entry starts at the first line naming the version as a whole token and ends before the
next line that starts another release's entry (a line opening with a version number, `vX.Y`, `Version
X.Y` or `[X.Y]`, markup aside) or at `limit` characters.
"""

from __future__ import annotations

import re
from pathlib import Path

_NAMES = re.compile(r"^(changes|changelog|change_log|history|news|release[-_]?notes)([-_.].*)?$", re.I)
_README = re.compile(r"^readme([-_.].*)?$", re.I)
# a line that opens a release entry: markup, then an optional "version" / "v" / "[", then a version number
_ENTRY = re.compile(r"^[\s#*=\-+`>|]*(?:release\s+|version\s+|v(?=\d)|\[)?v?(\d+(?:\.\d+)+[\w.+-]*)", re.I)


def _files(root: Path) -> list[Path]:
    """Candidate changelog files in the order they are tried."""
    top = sorted(p for p in root.iterdir() if p.is_file() and _NAMES.match(p.name))
    docs = sorted(
        p
        for d in ("docs", "doc")
        if (root / d).is_dir()
        for p in (root / d).rglob("*")
        if p.is_file() and _NAMES.match(p.name)
    )
    readme = sorted(p for p in root.iterdir() if p.is_file() and _README.match(p.name))
    return top + docs + readme


def _opens(line: str, version: str, token: re.Pattern, strict: bool) -> bool:
    """The line opens `version`'s entry: it starts with the version (markup aside) or, outside a README,
    is a short heading naming it ("Changes in 1.2.0")."""
    m = _ENTRY.match(line)
    if m and m.group(1).rstrip(".") == version:
        return True
    return not strict and len(line.strip()) <= 60 and bool(token.search(line))


def entry(text: str, version: str, limit: int = 3000, strict: bool = False) -> str:
    """The entry of `version` in a changelog text ("" when the text has none); `strict`: only a line that
    starts with the version opens it (in a README, where versions are also mentioned in passing)."""
    token = re.compile(rf"(?<![\w.])[vV]?{re.escape(version)}(?![\w]|\.\d)")
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if not _opens(line, version, token, strict):
            continue
        out = [line]
        for nxt in lines[i + 1 :]:
            m = _ENTRY.match(nxt)
            if m and m.group(1).rstrip(".") != version and not token.search(nxt):
                break
            out.append(nxt)
        body = "\n".join(out).strip()
        return body[:limit] + ("\n[...]" if len(body) > limit else "")
    return ""


def release_notes(root: Path, version: str, limit: int = 3000) -> tuple[str, str]:
    """(file relative to `root`, entry) of `version` in the first changelog of the sdist that has one;
    ("", "") when none does."""
    for path in _files(root):
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        found = entry(text, version, limit, strict=bool(_README.match(path.name)))
        if found:
            return path.relative_to(root).as_posix(), found
    return "", ""
