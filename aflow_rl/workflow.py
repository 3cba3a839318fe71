"""Workflows in AFlow's format: round_N/graph.py + prompt.py, validated, then loaded in isolation.

graph.py and prompt.py are model output (the LLM optimizer writes them), so they are a security
boundary. prompt.py is never executed: only its module-level string constants are read from the AST.
graph.py runs only after an allow-list check of its AST (`restricted`): imports of AFlow's own module
paths, one `class Workflow` whose methods use operators, prompt constants, plain data and a short list
of builtins; no names or attributes starting with `_`, no `while`, no `**`, no `global`, no
`try`/`with`/`lambda`/`del`, loops only over small literal ranges or existing values, and format
strings without attribute or index fields. It then executes with those builtins only. So a graph can
call operators and shape strings; it cannot import, open files, reach the interpreter's internals or
hang the worker in its own code (its operator calls have the evaluator's timeouts).

A graph.py written for AFlow imports its prompt module and operators through AFlow's package paths
(`workspace.X.workflows.round_1.prompt`, `...template.operator`, `scripts.async_llm`). The loader
binds those imports to this round's prompt constants, aflow_rl.operators and aflow_rl.llm, in a fresh
namespace: nothing goes into sys.modules, so hundreds of rounds never collide.
"""

from __future__ import annotations

import ast
import types
from dataclasses import dataclass, field
from pathlib import Path

from aflow_rl import llm as llm_module
from aflow_rl import operators as operators_module
from aflow_rl.operators import OPERATORS, operator_calls
from aflow_rl.restricted import FACES, FORMAT_FIELD, LLM_FACE, SAFE_BUILTINS, restricted
from graph_planner.pyparse import parse  # a null byte is a SyntaxError on every Python


@dataclass
class Validation:
    """Problems found in a graph/prompt pair before anything runs."""

    errors: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when the workflow may be evaluated."""
        return not self.errors


def _prompt_aliases(tree: ast.Module) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.asname or a.name for a in node.names if a.name.split(".")[-1] == "prompt"}
        elif isinstance(node, ast.ImportFrom):
            names |= {a.asname or a.name for a in node.names if a.name == "prompt"}
    return names


def prompt_constants(prompt_src: str) -> dict[str, str]:
    """Module-level string constants of a prompt.py (what graph.py may reference); nothing is executed."""
    out = {}
    for node in parse(prompt_src).body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    out[t.id] = node.value.value
    return out


def _prompt_errors(prompt_src: str) -> list[str]:
    errors = []
    for node in parse(prompt_src).body:
        is_doc = isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
        is_const = (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
            and all(isinstance(t, ast.Name) for t in node.targets)
        )
        if not (is_doc or is_const):
            errors.append(f'prompt.py line {node.lineno}: only string constants (NAME = "...") are allowed')
        elif is_const and FORMAT_FIELD.search(node.value.value):
            errors.append(f"prompt.py line {node.lineno}: format fields with attributes or indexes are not allowed")
    return errors


def validate(graph_src: str, prompt_src: str, max_operator_calls: int = 10) -> Validation:
    """Parses, defines Workflow with async __call__, only known operators, referenced prompts exist, call budget."""
    v = Validation()
    try:
        graph = parse(graph_src)
    except SyntaxError as e:
        v.errors.append(f"graph.py does not parse: {e.msg} (line {e.lineno})")
        return v
    try:
        consts = prompt_constants(prompt_src)
    except SyntaxError as e:
        v.errors.append(f"prompt.py does not parse: {e.msg} (line {e.lineno})")
        return v
    v.errors += _prompt_errors(prompt_src)
    v.errors += restricted(graph, _prompt_aliases(graph))
    cls = next((n for n in graph.body if isinstance(n, ast.ClassDef) and n.name == "Workflow"), None)
    if cls is None:
        v.errors.append("graph.py defines no class Workflow")
        return v
    call = next((n for n in cls.body if isinstance(n, ast.AsyncFunctionDef) and n.name == "__call__"), None)
    if call is None:
        v.errors.append("Workflow has no `async def __call__`")
    aliases = _prompt_aliases(graph)
    for node in ast.walk(graph):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if node.value.id in aliases and node.attr not in consts:
                v.errors.append(f"graph.py uses {node.value.id}.{node.attr}, which prompt.py does not define")
            if node.value.id == "operator" and node.attr[:1].isupper() and node.attr not in OPERATORS:
                v.errors.append(f"unknown operator {node.attr!r} (known: {', '.join(OPERATORS)})")
    n_calls = len(operator_calls(graph_src))
    if n_calls > max_operator_calls:
        v.errors.append(f"{n_calls} operator calls exceed the limit of {max_operator_calls}")
    return v


class _Rewriter(ast.NodeTransformer):
    """Replace AFlow's package imports by names bound in the execution namespace."""

    def visit_Import(self, node: ast.Import):
        keep, binds = [], []
        for a in node.names:
            last = a.name.split(".")[-1]
            if a.name in FACES:
                binds.append(ast.parse(f"{a.asname or a.name} = __aflow_faces__[{a.name!r}]").body[0])
            elif last in ("prompt", "operator") or a.name.startswith(("workspace", "scripts", "aflow_rl")):
                binds.append(
                    ast.parse(
                        f"{a.asname or last} = __aflow_{last if last in ('prompt', 'operator') else 'mod'}__"
                    ).body[0]
                )
            else:
                keep.append(a)
        return ([ast.Import(names=keep)] if keep else []) + binds

    def visit_ImportFrom(self, node: ast.ImportFrom):
        mod = node.module or ""
        if mod in FACES:  # typing, asyncio, re: bound from namespaces holding a few safe names each
            return [ast.parse(f"{a.asname or a.name} = __aflow_faces__[{mod!r}].{a.name}").body[0] for a in node.names]
        if not (mod.startswith(("workspace", "scripts", "aflow_rl", "metagpt")) or node.level):
            return node
        out = []
        for a in node.names:
            target = a.asname or a.name
            if a.name in ("prompt", "operator", "operators"):
                out.append(ast.parse(f"{target} = __aflow_{a.name.rstrip('s')}__").body[0])
            elif a.name in ("llm", "async_llm"):
                out.append(ast.parse(f"{target} = __aflow_llm__").body[0])
            elif a.name == "create_llm_instance":
                out.append(ast.parse(f"{target} = __aflow_llm__.create_llm_instance").body[0])
            else:  # e.g. `from scripts.evaluator import DatasetType`: a harmless placeholder name
                out.append(ast.parse(f"{target} = str").body[0])
        return out


def checked_tree(graph_src: str, prompt_src: str, max_operator_calls: int = 10) -> ast.Module:
    """graph.py's syntax tree with its imports rewritten to namespace bindings, once it passed the check
    (ValueError naming every problem otherwise)."""
    v = validate(graph_src, prompt_src, max_operator_calls)
    if not v.ok:
        raise ValueError("workflow refused: " + "; ".join(v.errors))
    tree = _Rewriter().visit(ast.parse(graph_src))
    ast.fix_missing_locations(tree)
    return tree


def load_workflow_class(graph_src: str, prompt_src: str, max_operator_calls: int = 10):
    """Check graph.py and prompt.py, then run graph.py in this process with safe builtins and its imports
    bound; its Workflow class (evaluations run it in a sandbox instead: aflow_rl.workflow_box)."""
    tree = checked_tree(graph_src, prompt_src, max_operator_calls)
    prompt_mod = types.SimpleNamespace(**prompt_constants(prompt_src))
    ns = {
        "__name__": "aflow_graph",
        "__builtins__": SAFE_BUILTINS,
        "__aflow_prompt__": prompt_mod,
        "__aflow_operator__": types.SimpleNamespace(**{k: getattr(operators_module, k) for k in OPERATORS}),
        "__aflow_mod__": LLM_FACE,
        "__aflow_llm__": LLM_FACE,
        "__aflow_faces__": FACES,
    }
    exec(compile(tree, "graph.py", "exec"), ns)
    # AFlow graphs import create_llm_instance from scripts.async_llm; ours from aflow_rl.llm: both resolve here.
    ns.setdefault("create_llm_instance", llm_module.create_llm_instance)
    return ns["Workflow"]


def read_round(folder: str | Path) -> tuple[str, str]:
    """graph.py and prompt.py of a round folder."""
    folder = Path(folder)
    return (folder / "graph.py").read_text(), (folder / "prompt.py").read_text()
