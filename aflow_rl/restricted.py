"""The allow-list a model-written graph.py must pass before it runs (see aflow_rl.workflow).

The check is on the AST, so nothing runs before it; the graph then executes with `SAFE_BUILTINS`
only and sees operators, prompt constants and `create_llm_instance` through namespaces that hold
nothing else. Names and attributes starting with `_` are refused, which closes the usual routes to
the interpreter (`__class__`, `__globals__`, `__import__`, `__builtins__`).
"""

from __future__ import annotations

import ast
import asyncio
import builtins
import re
import types
import typing

from aflow_rl import llm as llm_module

# `{x.attr}` / `{x[0]}` in a format string walks attributes of the formatted value.
FORMAT_FIELD = re.compile(r"\{[^{}]*[.\[][^{}]*\}")
_MODULES = ("typing", "asyncio", "re", "workspace", "scripts", "aflow_rl", "metagpt", "prompt")
_MAX_INT = 10**6
_MAX_RANGE = 20
# Kept equal to aflow_rl/sandboxed/workflow_host.py's BUILTINS (that file runs in the sandbox, without this
# package; tests/unit/test_workflow_guard.py checks the two agree).
_BUILTIN_NAMES = tuple(
    "len range str int float bool list dict set tuple min max sum sorted reversed enumerate zip any all abs round "
    "isinstance Exception ValueError KeyError IndexError TypeError RuntimeError".split()
)
# Refused by name already in the check (they are absent at run time too): the usual ways out.
_DENIED = {
    "open",
    "exec",
    "eval",
    "compile",
    "getattr",
    "setattr",
    "delattr",
    "globals",
    "locals",
    "vars",
    "input",
    "breakpoint",
    "help",
    "memoryview",
    "type",
    "object",
    "super",
    "classmethod",
    "staticmethod",
    "property",
}
SAFE_BUILTINS = {name: getattr(builtins, name) for name in (*_BUILTIN_NAMES, "__build_class__")}
LLM_FACE = types.SimpleNamespace(create_llm_instance=llm_module.create_llm_instance)
# The standard modules a graph may import, each seen through a namespace holding only these names.
FACES = {
    "typing": types.SimpleNamespace(
        **{n: getattr(typing, n) for n in ("Any", "Callable", "Dict", "List", "Literal", "Optional", "Tuple", "Union")}
    ),
    "asyncio": types.SimpleNamespace(gather=asyncio.gather),  # AFlow's ensembles gather operator calls
    "re": types.SimpleNamespace(
        **{
            n: getattr(re, n)
            for n in ("search", "match", "fullmatch", "findall", "sub", "split", "DOTALL", "IGNORECASE", "MULTILINE")
        }
    ),
}

_EXPR = (
    ast.Name,
    ast.Attribute,
    ast.Call,
    ast.Constant,
    ast.JoinedStr,
    ast.FormattedValue,
    ast.BinOp,
    ast.BoolOp,
    ast.Compare,
    ast.UnaryOp,
    ast.IfExp,
    ast.Subscript,
    ast.Slice,
    ast.List,
    ast.Tuple,
    ast.Dict,
    ast.Set,
    ast.ListComp,
    ast.SetComp,
    ast.DictComp,
    ast.GeneratorExp,
    ast.comprehension,
    ast.Await,
    ast.Starred,
    ast.keyword,
    ast.expr_context,
    ast.boolop,
    ast.cmpop,
    ast.unaryop,
    ast.arguments,
    ast.arg,
)
_STMT = (
    ast.Assign,
    ast.AugAssign,
    ast.AnnAssign,
    ast.Return,
    ast.If,
    ast.For,
    ast.Expr,
    ast.Pass,
    ast.Break,
    ast.Continue,
    ast.Assert,
)
_BINOPS = (ast.Add, ast.Sub, ast.Div, ast.FloorDiv, ast.Mod)  # no * or **: no amplification of strings


def _bounded_iter(node: ast.AST) -> bool:
    """Loops run over existing values, or over range(n) with a small literal n or len(...)."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "range"):
        return True
    return all(
        (isinstance(a, ast.Constant) and isinstance(a.value, int) and abs(a.value) <= _MAX_RANGE)
        or (isinstance(a, ast.Call) and isinstance(a.func, ast.Name) and a.func.id == "len")
        for a in node.args
    )


def _is_prompt_format(call: ast.Call, prompt_aliases: set[str]) -> bool:
    """`.format` only on a prompt constant or a string literal, whose fields were checked (or `self.format`, the
    Format operator)."""
    owner = call.func.value
    if (isinstance(owner, ast.Constant) and isinstance(owner.value, str)) or (
        isinstance(owner, ast.Name) and owner.id == "self"
    ):
        return True
    return isinstance(owner, ast.Attribute) and isinstance(owner.value, ast.Name) and owner.value.id in prompt_aliases


def _node_error(node: ast.AST, prompt_aliases: set[str]) -> str | None:
    if isinstance(node, ast.Name) and ((node.id.startswith("_") and node.id != "_") or node.id in _DENIED):
        return f"name {node.id!r}"
    if isinstance(node, ast.Attribute) and node.attr.startswith("_"):
        return f"attribute {node.attr!r}"
    if isinstance(node, ast.arg) and node.arg.startswith("_"):
        return f"parameter {node.arg!r}"
    if isinstance(node, ast.Constant):
        if isinstance(node.value, int) and not isinstance(node.value, bool) and abs(node.value) > _MAX_INT:
            return f"integer {node.value}"
        if isinstance(node.value, str) and FORMAT_FIELD.search(node.value):
            return "a format field with an attribute or index"
    if isinstance(node, ast.BinOp) and not isinstance(node.op, _BINOPS):
        return f"operator {type(node.op).__name__}"
    if isinstance(node, ast.AugAssign) and not isinstance(node.op, _BINOPS):
        return f"operator {type(node.op).__name__}"
    if isinstance(node, (ast.For, ast.comprehension)) and not _bounded_iter(node.iter):
        return f"a loop over range() beyond {_MAX_RANGE}"
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        if node.func.attr == "format_map" or (
            node.func.attr == "format" and not _is_prompt_format(node, prompt_aliases)
        ):
            return f"`.{node.func.attr}` on a computed string"
    return None


def _body_errors(body: list[ast.stmt], prompt_aliases: set[str]) -> list[str]:
    errors = []
    for stmt in body:
        for node in ast.walk(stmt):
            if isinstance(node, ast.stmt) and not isinstance(node, _STMT):
                errors.append(f"line {node.lineno}: `{type(node).__name__}` is not allowed in a workflow method")
            elif not isinstance(node, (ast.stmt, *_EXPR, ast.operator)):
                errors.append(f"line {getattr(node, 'lineno', '?')}: `{type(node).__name__}` is not allowed")
            elif (why := _node_error(node, prompt_aliases)) is not None:
                errors.append(f"line {getattr(node, 'lineno', '?')}: {why} is not allowed")
    return errors


def _import_ok(node: ast.Import | ast.ImportFrom) -> bool:
    if isinstance(node, ast.ImportFrom):
        return bool(node.level) or (node.module or "").startswith(_MODULES)
    return all(a.name.startswith(_MODULES) for a in node.names)


def restricted(tree: ast.Module, prompt_aliases: set[str] | None = None) -> list[str]:
    """Why this graph.py may not run (empty when it may): the allow-list described in the module docstring."""
    aliases = set(prompt_aliases or ())
    errors = []
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            if not _import_ok(node):
                errors.append(
                    f"line {node.lineno}: only AFlow's own imports (typing, asyncio, re, workspace, scripts, "
                    "aflow_rl, metagpt, prompt) are allowed"
                )
        elif isinstance(node, ast.ClassDef):
            if node.name != "Workflow" or node.bases or node.keywords or node.decorator_list:
                errors.append(f"line {node.lineno}: the only class allowed is a plain `class Workflow:`")
                continue
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    dunder = item.name.startswith("_") and item.name not in ("__init__", "__call__")
                    if dunder or item.decorator_list:
                        errors.append(f"line {item.lineno}: method {item.name!r} is not allowed")
                    errors += _body_errors(item.body, aliases)
                    errors += _body_errors([ast.Expr(a) for a in item.args.defaults if a], aliases)
                    errors += [
                        f"line {item.lineno}: parameter {a.arg!r} is not allowed"
                        for a in item.args.args
                        if a.arg.startswith("_")
                    ]
                elif not (isinstance(item, ast.Expr) and isinstance(item.value, ast.Constant)):
                    errors += _body_errors([item], aliases)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.Expr)):
            errors += _body_errors([node], aliases)
        else:
            errors.append(f"line {node.lineno}: `{type(node).__name__}` is not allowed at the top of graph.py")
    return errors
