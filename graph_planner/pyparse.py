"""Parsing Python source into AST objects under one process-wide lock.

CPython 3.11 keeps the AST constructor's recursion counter in interpreter-wide state: two threads that
build AST objects at once can fail with "SystemError: AST constructor recursion depth mismatch" (seen
when judge slots screened patches while an episode enumerated candidate edits). Every parse graph_planner
does in a process that also judges goes through `parse`, so one lock serialises them all; parses take
milliseconds, so the lock costs nothing measurable.
"""

from __future__ import annotations

import ast
import threading

PARSE_LOCK = threading.RLock()


def parse(source: str | bytes, filename: str = "<unknown>", mode: str = "exec") -> ast.AST:
    """`ast.parse(source, filename, mode)` under the process-wide parse lock."""
    with PARSE_LOCK:
        return ast.parse(source, filename, mode)
