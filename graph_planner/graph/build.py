"""The repository graph: files, classes, functions and tests of a Python repository, built with `ast`.

Nodes (networkx MultiDiGraph, id -> attributes kind/name/path/lineno/end_lineno):
  file      "pkg/mod.py"
  class     "pkg/mod.py::Cls"
  function  "pkg/mod.py::func" or "pkg/mod.py::Cls.method"
  test      a function named test_* (or a method of a Test* class) in a test file
Edges (attribute `kind`):
  contains  file -> class/function, class -> method
  imports   file -> file (imports that resolve inside the repository)
  calls     function -> function (resolved by name: the same module, `self.m()` in the same class, names
            and `module.name` brought in by imports; otherwise any function of that name when it is unique)
  tests     test -> function it calls
Nothing is executed: the source is only parsed.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import networkx as nx

from graph_planner.pyparse import parse

SKIP_DIRS = {".git", ".venv", "venv", "build", "dist", "__pycache__", ".tox", ".eggs", "node_modules"}


def is_test_file(path: str) -> bool:
    """pytest's default discovery: test_*.py or *_test.py, or anything under a tests/ folder."""
    p = Path(path)
    return p.name.startswith("test_") or p.stem.endswith("_test") or "tests" in p.parts or "test" in p.parts


def test_node(test_id: str) -> str:
    """pytest node id -> graph node id (path::Class.method, parameters dropped)."""
    parts = test_id.split("[")[0].split("::")
    return parts[0] + "::" + ".".join(parts[1:])


def module_name(path: str) -> str:
    """pkg/sub/mod.py -> pkg.sub.mod (src/ layouts drop the leading src)."""
    parts = list(Path(path).with_suffix("").parts)
    if parts and parts[0] == "src":
        parts = parts[1:]
    if parts and parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


@dataclass
class _Def:
    node_id: str
    cls: str | None
    tree: ast.AST


class RepoGraph:
    """A code graph of one repository checkout; `graph` is the networkx MultiDiGraph."""

    def __init__(self, root: str | Path):
        self.root = Path(root).resolve()
        self.graph = nx.MultiDiGraph()
        self._sources: dict[str, list[str]] = {}
        self._defs: list[_Def] = []
        self._modules: dict[str, str] = {}  # dotted module -> file path
        self.parse_errors: list[str] = []
        # Its parses go through graph_planner.pyparse (CPython 3.11's AST constructor is not thread-safe).
        self._build()

    # --- building ---

    def _files(self) -> list[str]:
        out = []
        for p in sorted(self.root.rglob("*.py")):
            rel = p.relative_to(self.root)
            if not SKIP_DIRS.intersection(rel.parts):
                out.append(rel.as_posix())
        return out

    def _build(self) -> None:
        trees = {}
        for rel in self._files():
            text = (self.root / rel).read_text(errors="replace")
            try:
                trees[rel] = parse(text)
            except SyntaxError as e:
                self.parse_errors.append(f"{rel}: {e.msg} (line {e.lineno})")
                continue
            self._sources[rel] = text.splitlines()
            self._modules[module_name(rel)] = rel
            self.graph.add_node(
                rel, kind="file", name=Path(rel).name, path=rel, lineno=1, end_lineno=len(self._sources[rel])
            )
            self._add_defs(rel, trees[rel])
        for rel, tree in trees.items():
            self._add_imports(rel, tree)
        self._add_calls()

    def _add_defs(self, rel: str, tree: ast.Module) -> None:
        test_file = is_test_file(rel)
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                cid = f"{rel}::{node.name}"
                self.graph.add_node(
                    cid, kind="class", name=node.name, path=rel, lineno=node.lineno, end_lineno=node.end_lineno
                )
                self.graph.add_edge(rel, cid, kind="contains")
                for item in node.body:
                    if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        fid = f"{cid}.{item.name}"
                        test = test_file and node.name.startswith("Test") and item.name.startswith("test")
                        self._add_function(fid, item, rel, "test" if test else "function")
                        self.graph.add_edge(cid, fid, kind="contains")
                        self._defs.append(_Def(fid, node.name, item))
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                fid = f"{rel}::{node.name}"
                self._add_function(fid, node, rel, "test" if test_file and node.name.startswith("test") else "function")
                self.graph.add_edge(rel, fid, kind="contains")
                self._defs.append(_Def(fid, None, node))

    def _add_function(self, fid: str, node: ast.AST, rel: str, kind: str) -> None:
        self.graph.add_node(
            fid,
            kind=kind,
            name=node.name,
            path=rel,
            lineno=node.lineno,
            end_lineno=node.end_lineno,
            doc=ast.get_docstring(node) or "",
        )

    def _resolve_module(self, rel: str, module: str | None, level: int) -> str | None:
        if level:
            base = module_name(rel).split(".")
            base = base[: len(base) - level + (1 if Path(rel).name == "__init__.py" else 0)]
            module = ".".join(base + ([module] if module else []))
        return module

    def _add_imports(self, rel: str, tree: ast.Module) -> None:
        names: dict[str, str] = {}  # local name -> "module" or "module:attr"
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    names[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
                    self._link_import(rel, a.name)
            elif isinstance(node, ast.ImportFrom):
                mod = self._resolve_module(rel, node.module, node.level)
                if mod is None:
                    continue
                for a in node.names:
                    target = f"{mod}.{a.name}"
                    names[a.asname or a.name] = target if target in self._modules else f"{mod}:{a.name}"
                    self._link_import(rel, target if target in self._modules else mod)
        self.graph.nodes[rel]["import_names"] = names

    def _link_import(self, rel: str, module: str) -> None:
        while module:
            if module in self._modules and self._modules[module] != rel:
                self.graph.add_edge(rel, self._modules[module], kind="imports")
                return
            module = module.rpartition(".")[0]

    def _add_calls(self) -> None:
        by_name: dict[str, list[str]] = {}
        for d in self._defs:
            by_name.setdefault(d.tree.name, []).append(d.node_id)
        for d in self._defs:
            rel = self.graph.nodes[d.node_id]["path"]
            imports = self.graph.nodes[rel].get("import_names", {})
            for node in ast.walk(d.tree):
                if not isinstance(node, ast.Call):
                    continue
                target = self._resolve_call(node.func, rel, d.cls, imports, by_name)
                if target and target != d.node_id:
                    self.graph.add_edge(d.node_id, target, kind="calls")
                    if self.graph.nodes[d.node_id]["kind"] == "test" and self.graph.nodes[target]["kind"] == "function":
                        self.graph.add_edge(d.node_id, target, kind="tests")

    def _resolve_call(self, func: ast.AST, rel: str, cls: str | None, imports: dict, by_name: dict) -> str | None:
        if isinstance(func, ast.Name):
            name = func.id
            if f"{rel}::{name}" in self.graph:
                return f"{rel}::{name}"
            if name in imports:
                return self._lookup(imports[name])
        elif isinstance(func, ast.Attribute):
            name = func.attr
            if isinstance(func.value, ast.Name):
                if func.value.id in ("self", "cls") and cls and f"{rel}::{cls}.{name}" in self.graph:
                    return f"{rel}::{cls}.{name}"
                if func.value.id in imports:
                    return self._lookup(f"{imports[func.value.id]}:{name}")
        else:
            return None
        candidates = [c for c in by_name.get(name, []) if self.graph.nodes[c]["kind"] == "function"]
        return candidates[0] if len(candidates) == 1 else None

    def _lookup(self, ref: str) -> str | None:
        """'pkg.mod:name' (or a module's dotted name) -> a node id inside the repository."""
        mod, _, attr = ref.partition(":")
        rel = self._modules.get(mod)
        if rel is None:
            return None
        if not attr:
            return rel
        for cand in (f"{rel}::{attr}",):
            if cand in self.graph:
                return cand
        return None

    # --- reading ---

    def node(self, node_id: str) -> dict:
        """Attributes of a node (KeyError for an unknown id)."""
        return self.graph.nodes[node_id]

    def source(self, node_id: str) -> list[tuple[int, str]]:
        """(line number, text) of a node's source lines."""
        n = self.graph.nodes[node_id]
        lines = self._sources.get(n["path"], [])
        return [(i, lines[i - 1]) for i in range(n["lineno"], min(n["end_lineno"], len(lines)) + 1)]

    def neighbours(self, node_id: str, kinds: tuple[str, ...] | None = None) -> list[tuple[str, str, str]]:
        """(edge kind, direction 'out'|'in', other node) for every edge touching `node_id`."""
        out = [(d["kind"], "out", v) for _, v, d in self.graph.out_edges(node_id, data=True)]
        out += [(d["kind"], "in", u) for u, _, d in self.graph.in_edges(node_id, data=True)]
        return sorted({e for e in out if kinds is None or e[0] in kinds})

    def innermost(self, path: str, line: int) -> str | None:
        """The smallest function/class/file node of `path` that contains `line`."""

        def size(n: dict) -> tuple[int, bool]:
            return n["end_lineno"] - n["lineno"], n["kind"] == "file"  # on a tie the definition beats its file

        hits = [
            (size(n), nid)
            for nid, n in self.graph.nodes(data=True)
            if n["path"] == path and n["lineno"] <= line <= n["end_lineno"]
        ]
        return min(hits)[1] if hits else None

    def summary(self) -> dict[str, int]:
        """Counts of nodes and edges by kind."""
        nodes: dict[str, int] = {}
        for _, n in self.graph.nodes(data=True):
            nodes[n["kind"]] = nodes.get(n["kind"], 0) + 1
        edges: dict[str, int] = {}
        for _, _, d in self.graph.edges(data=True):
            edges[d["kind"]] = edges.get(d["kind"], 0) + 1
        return {
            **{f"nodes/{k}": v for k, v in sorted(nodes.items())},
            **{f"edges/{k}": v for k, v in sorted(edges.items())},
        }
