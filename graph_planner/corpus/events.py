"""Which interpreter capabilities each function of a clean package sets off in its own suite.

The runtime guard (plugin/planact_boot.py) holds an audit event against a function a patch changed only
when the clean version of that function did not set off the same event in the clean suite's run (a
package's own data-file `open`, a dataclass's `exec`). The corpus builder records that once per package,
on the clean source's coverage run: every function not nested in another is watched, and each event is
credited to every watched function on the stack (a function is answerable for what it calls).
"""

from __future__ import annotations

import ast
from pathlib import Path

from graph_planner.graph.build import SKIP_DIRS, is_test_file
from graph_planner.patch_scope import outer_functions
from graph_planner.pyparse import parse


def span(fn: ast.AST) -> tuple[int, int]:
    """(first line, last line) of a function: its first decorator's line, or its `def` line, to its end."""
    return min([fn.lineno, *(d.lineno for d in fn.decorator_list)]), fn.end_lineno


def package_watch(root: str | Path) -> tuple[tuple[str, int, int, str], ...]:
    """(path, first line, last line, "path::qualified name") of every outermost function of the package's
    non-test modules under `root`: the guard's watch list for recording the clean suite's events."""
    root = Path(root)
    out = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if SKIP_DIRS.intersection(rel.parts) or is_test_file(rel.as_posix()):
            continue
        try:
            tree = parse(path.read_bytes())
        except (SyntaxError, ValueError):
            continue
        out += [(rel.as_posix(), *span(fn), f"{rel.as_posix()}::{name}") for name, fn in outer_functions(tree)]
    return tuple(out)
