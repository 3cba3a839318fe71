"""Free-form edits (env.repair.decoding: free): the patch model writes the whole corrected function.

The reply format, the only one read:

* The reply's **first fenced code block**: an opening line of three backticks, optionally followed by
  `python`, `python3` or `py` (and nothing else but spaces), and a closing line of three backticks. Text
  before and after the block (explanations) and any later block are ignored.
* The block holds **exactly one function definition whose name is the target's** (the last part of its
  qualified name: `Cls.method` -> `def method`), `def` or `async def`, at any indentation (the block is
  dedented first; a method may be written at column 0 or indented). Comments around the definition are
  dropped; decorators above it are ignored (a patch may not change them: the function's text starts at
  its `def` line). Any other statement in the block (an import, a second def, a class, module code) makes
  the reply malformed: a free-form edit changes the target function and nothing else.
* Line endings may be `\\n`, `\\r\\n` or `\\r`. Only the first MAX_REPLY_CHARS characters of a reply are
  read: a block still open there is malformed.

A reply that parses becomes an edit script entry {file, old: the target's text, new: the corrected
function re-indented as the target is in its file} (the same shape as a candidate edit, so it takes the
candidates' path: graph_planner.team.sandbox.Sandbox.judge, the patch check, then the guarded test run).
A malformed reply is no edit: it scores 0 and is counted, never raised.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from dataclasses import dataclass

from graph_planner.candidates import function_text, reindent_changed
from graph_planner.judge import base_text, gold_texts
from graph_planner.patching import PatchError
from graph_planner.pyparse import parse, parse_bounded
from graph_planner.tasks import RepairTask

MAX_REPLY_CHARS = 32_000  # ~8k tokens: far above any corpus function, far below what would cost real time
OUTPUT_CHARS = 2_000  # the failing tests' output shown in the prompt (its end: the error lines)
_OPEN = re.compile(r"^[ \t]*```[ \t]*(?:python3?|py)?[ \t]*$", re.IGNORECASE)
_CLOSE = re.compile(r"^[ \t]*```[ \t]*$")

INSTRUCTIONS = (
    "Reply with the whole corrected function in one ```python code block: the same name and signature, "
    "only its body changed, and no other code in the block."
)


@dataclass(frozen=True)
class FreeEdit:
    """A parsed reply: the edit to judge, or why the reply is malformed."""

    edit: dict | None
    """{file, old, new} for the sandbox (None when malformed)."""
    error: str = ""
    """Why the reply is malformed ('' when it parsed)."""


def target_name(node: str) -> str:
    """The name a reply's def must carry: `pkg/mod.py::Cls.method` -> `method`."""
    return node.split("::", 1)[-1].rsplit(".", 1)[-1]


def code_block(reply: str) -> str | None:
    """The text of the reply's first fenced code block (line endings normalised), None when there is none."""
    lines = reply[:MAX_REPLY_CHARS].replace("\r\n", "\n").replace("\r", "\n").split("\n")
    start = next((i for i, line in enumerate(lines) if _OPEN.match(line)), None)
    if start is None:
        return None
    end = next((i for i in range(start + 1, len(lines)) if _CLOSE.match(lines[i])), None)
    if end is None:
        return None
    return "\n".join(lines[start + 1 : end]) + "\n"


def dedent(text: str) -> str:
    """`text` with its first code line's indentation taken off every line that has it (a line without it,
    inside a multi-line string, stays as it is: textwrap.dedent would then take off nothing)."""
    lines = text.splitlines(True)
    first = next((ln for ln in lines if ln.strip() and not ln.lstrip().startswith("#")), "")
    ind = first[: len(first) - len(first.lstrip(" \t"))]
    return "".join(ln[len(ind) :] if ln.startswith(ind) else ln if ln.strip() else ln.lstrip(" \t") for ln in lines)


def _in_strings(text: str) -> set[int]:
    """Line numbers (1-based) of `text` that start inside a multi-line string literal."""
    out: set[int] = set()
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.STRING and tok.end[0] > tok.start[0]:
                out.update(range(tok.start[0] + 1, tok.end[0] + 1))
    except (tokenize.TokenError, SyntaxError):
        pass
    return out


def reindent(source: str, text: str) -> str:
    """`text` (a corrected version of the function `source`, dedented) indented as `source` is in its file.

    Lines equal at the start and the end keep the file's exact text; of the changed lines, those inside a
    multi-line string keep their text (indenting them would change the string's value), the rest get the
    file's indentation (candidates' rule)."""
    indent = source[: len(source) - len(source.lstrip(" \t"))]
    return reindent_changed(source, dedent(source), text, indent, keep=frozenset(_in_strings(text)))


def _kind(node: ast.stmt) -> str:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return f"def {node.name}"
    return type(node).__name__.lower()


def parse_reply(reply: str, file: str, source: str, name: str) -> FreeEdit:
    """The edit a reply asks for on the function `name` whose text in `file` is `source` (as `read` shows
    it: from its def line, indented as in the file)."""
    if not isinstance(reply, str) or not reply.strip():
        return FreeEdit(None, "empty reply")
    block = code_block(reply)
    if block is None:
        where = f" in its first {MAX_REPLY_CHARS} characters" if len(reply) > MAX_REPLY_CHARS else ""
        return FreeEdit(None, f"no closed ```python code block{where}")
    block = dedent(block)
    try:
        tree = parse_bounded(block)  # a block nested deeper than any honest function is refused here
    except (SyntaxError, ValueError) as e:  # ValueError: null bytes
        line = getattr(e, "lineno", None)
        return FreeEdit(None, f"the block does not parse: {getattr(e, 'msg', e)}" + (f" (line {line})" if line else ""))
    defs = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    if not defs:
        return FreeEdit(None, "the block holds no function definition")
    if len(tree.body) > 1:
        return FreeEdit(None, f"the block must hold only the function {name}: it holds {[_kind(n) for n in tree.body]}")
    fn = defs[0]
    if fn.name != name:
        return FreeEdit(None, f"the block defines {fn.name!r}, not the target function {name!r}")
    text = "".join(block.splitlines(True)[fn.lineno - 1 : fn.end_lineno])  # decorators and trailing comments off
    text = dedent(text)
    text = text if text.endswith("\n") else text + "\n"
    body = dedent(source)
    if text == body:
        return FreeEdit({"file": file, "old": source, "new": source})  # unchanged: judged like any edit
    new = reindent(source, text)
    try:
        parse(dedent(new))
    except (SyntaxError, ValueError) as e:
        return FreeEdit(None, f"the function's indentation does not fit its file: {getattr(e, 'msg', e)}")
    return FreeEdit({"file": file, "old": source, "new": new})


def fence(function: str) -> str:
    """A function's text as a reply in the format (what the scripted gold agent writes)."""
    return f"```python\n{dedent(function).rstrip()}\n```\n"


def failing_output(problem_statement: str, limit: int = OUTPUT_CHARS) -> str:
    """The failing tests and the end of their output (the error lines), at most about `limit` characters."""
    head, sep, output = problem_statement.partition("Test output:")
    if not sep or len(problem_statement) <= limit:
        return problem_statement[-limit:]
    tail = output[-max(0, limit - len(head)) :]
    return f"{head.strip()}\n\nTest output (its end):\n...{tail}" if len(output) > len(tail) else problem_statement


def free_prompt(node: str, source: str, problem_statement: str) -> str:
    """The patch model's prompt: the failing tests' output, the target function's source, the format."""
    name = node.split("::", 1)[-1]
    file = node.split("::", 1)[0]
    return (
        f"A bug in a Python repository makes tests fail.\n\n{failing_output(problem_statement)}\n\n"
        f"The function to fix, {name} in {file}:\n```python\n{dedent(source).rstrip()}\n```\n\n"
        f"{INSTRUCTIONS}"
    )


def task_target(task: RepairTask) -> tuple[str, str] | None:
    """(node id, source as in the base commit's file) of the function a corpus task's bug sits in."""
    file, function = task.meta.get("file", ""), task.meta.get("function", "")
    try:
        found = function_text(base_text(task, file), function) if file and function else None
    except RuntimeError:  # the file is not in the base commit
        return None
    return (f"{file}::{function}", found[1]) if found else None


def gold_reply(task: RepairTask) -> str | None:
    """The task's gold fix of its function written in the format (None when the gold patch does not apply
    or does not leave the function in the file)."""
    file, function = task.meta.get("file", ""), task.meta.get("function", "")
    try:
        fixed = gold_texts(task).get(file)
    except (PatchError, RuntimeError):
        return None
    found = function_text(fixed, function) if fixed else None
    return fence(found[1]) if found else None
