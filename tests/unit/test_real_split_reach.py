"""Whether a real fix's gold patch is among the candidate edits the team and the rule agent can propose."""

from __future__ import annotations

import difflib
from types import SimpleNamespace

from graph_planner.team import real

BUGGY = 'def size(n, limit):\n    """Whether n fits."""\n    return n <= limit\n'


def _task(fixed: str, functions: list[str] | None = None):
    patch = "".join(difflib.unified_diff(BUGGY.splitlines(True), fixed.splitlines(True), "a/m.py", "b/m.py"))
    meta = {"file": "m.py", "function": "size", "history": {"functions": functions or ["m.py::size"]}}
    return SimpleNamespace(meta=meta, gold_patch=patch)


def test_a_token_fix_is_reachable_even_when_the_release_also_edits_the_docstring(monkeypatch):
    monkeypatch.setattr(real, "base_text", lambda task, path: BUGGY)
    # the release changed `<=` to `<` and added a doctest line: still the one-token candidate edit
    assert real.gold_in_candidates(
        _task('def size(n, limit):\n    """Whether n fits.\n\n    >>> 1\n    """\n    return n < limit\n')
    )
    # a fix that adds a statement, or spans two functions, is no single candidate edit
    assert not real.gold_in_candidates(_task("def size(n, limit):\n    n = abs(n)\n    return n <= limit\n"))
    assert not real.gold_in_candidates(_task(BUGGY.replace("<=", "<"), ["m.py::size", "m.py::other"]))
