"""The repository's module import graph, its layers and its cycles (run: python tools/import_graph.py).

Every `import` counts, also those inside functions: a lazy import still ties two modules together.
Layers, highest first; a module may import its own package and any package on a lower floor:

    benchmarks, tests, tools
    flows                      (Prefect flows: describe the round)
    tasks                      (Prefect tasks: delegate to the libraries below)
    aflow_rl                   (AFlow with RL; its coding benchmark uses graph_planner's mutation operators)
    graph_planner              (code repair; its team environment plugs into planact by entry point)
    planact                    (the library: roles, engines, training, rounds; never imports its users)
    sandbox, schedulemesh      (rooms of their own: no planact, no workload)

Inside graph_planner the same rule holds between its rooms (`GRAPH_PLANNER_ROOMS`, lowest first): parsing,
the code graph and the patch check; the corpus's parts (fetching, mutating, running and judging a
package's tests); tasks, settings and verdicts (the task record, the environment's settings, the sandboxed
runtime, the judge); the corpus builders, which prove every task's gold patch through the judge and so sit
above it; the environment and the agents; the team and the command line. A module of no room is an error: a
new one gets a place.
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("sandbox", "schedulemesh", "planact", "graph_planner", "aflow_rl", "tasks", "flows")
FLOOR = {"sandbox": 0, "schedulemesh": 0, "planact": 1, "graph_planner": 2, "aflow_rl": 3, "tasks": 4, "flows": 5}


def module_name(path: Path) -> str:
    """'planact.rl.trainer' for planact/rl/trainer.py ('pkg' for pkg/__init__.py)."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _resolve(mod: str, is_pkg: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = mod.split(".") if is_pkg else mod.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _type_only(node: ast.AST) -> bool:
    """An `if TYPE_CHECKING:` block: its imports name types for annotations and never run."""
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and (
        (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
        or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")
    )


def _runtime_nodes(tree: ast.AST):
    """Every node of `tree` outside `if TYPE_CHECKING:` blocks: a type-only import runs nothing, so it
    makes no cycle (the patch check's fact, slice and form modules annotate with each other's types)."""
    todo = [tree]
    while todo:
        node = todo.pop()
        yield node
        todo.extend(child for child in ast.iter_child_nodes(node) if not _type_only(child))


def graph() -> dict[str, set[str]]:
    """module -> the repository modules it imports (nearest existing module of each dotted name)."""
    files = {module_name(p): p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")}
    edges: dict[str, set[str]] = defaultdict(set)
    for mod, path in files.items():
        for node in _runtime_nodes(ast.parse(path.read_text(), str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                target = _resolve(mod, path.name == "__init__.py", node)
                # `from pkg import mod` depends on pkg.mod; `from pkg import name` on pkg (its __init__ or module).
                names = [f"{target}.{a.name}" if f"{target}.{a.name}" in files else target for a in node.names]
            for name in names:
                parts = name.split(".")
                while parts and ".".join(parts) not in files:
                    parts.pop()
                if parts and ".".join(parts) != mod:
                    edges[mod].add(".".join(parts))
        edges.setdefault(mod, set())
    return edges


# (room, module prefixes), lowest first. A prefix ending in "." or "_" is a family; otherwise it names a module
# and its submodules. The longest matching prefix decides (corpus.build is a builder, corpus.fetch a part).
GRAPH_PLANNER_ROOMS = [
    ("parsing, code graph, patch check", ("graph_planner.pyparse", "graph_planner.patch_", "graph_planner.graph")),
    # the call jail (stdlib only: the boot script loads per-run copies) sits with the test run that starts it
    (
        "corpus parts",
        (
            "graph_planner.corpus",
            "graph_planner.patching",
            "graph_planner.jail",
            "graph_planner.jail_client",
            "graph_planner.jail_callback",
            "graph_planner.jail_fork",
            "graph_planner.jail_clock",
            "graph_planner.jail_filter",
            "graph_planner.jail_rewrite",
            "graph_planner.jail_wire",
        ),
    ),
    (
        "tasks, settings and verdicts",
        (
            "graph_planner.tasks",
            "graph_planner.env_config",
            "graph_planner.runtime",
            "graph_planner.judge",
            "graph_planner.provenance",
            "graph_planner.result_cache",
            "graph_planner.state_digest",
        ),
    ),
    (
        "corpus builders",
        (
            "graph_planner.corpus.build",
            "graph_planner.corpus.history",
            "graph_planner.corpus.history_tasks",
            "graph_planner.jail_qualify",
        ),
    ),
    (
        "environment and agents",
        (
            "graph_planner.env",
            "graph_planner.localise",
            "graph_planner.sbfl",
            "graph_planner.candidates",
            "graph_planner.proposals",
            "graph_planner.unbound",
            "graph_planner.definite",
            "graph_planner.defects",
            "graph_planner.idioms",
            "graph_planner.leftovers",
            "graph_planner.actions",
            "graph_planner.agents",
            "graph_planner.free_edit",
            "graph_planner.evaluate",
            "graph_planner.config",
        ),
    ),
    ("team and command line", ("graph_planner.team", "graph_planner.free_eval", "graph_planner.cli")),
]


def room_of(mod: str) -> int | None:
    """The floor of a graph_planner module among GRAPH_PLANNER_ROOMS (None: the package itself, or no room)."""
    best = None
    for floor, (_, prefixes) in enumerate(GRAPH_PLANNER_ROOMS):
        for p in prefixes:
            family = p.endswith((".", "_"))
            if (mod.startswith(p) if family else mod == p or mod.startswith(p + ".")) and (
                best is None or len(p) > best[1]
            ):
                best = (floor, len(p))
    return None if best is None else best[0]


def upward_inside(edges: dict[str, set[str]]) -> list[tuple[str, str]]:
    """Imports between graph_planner's rooms that point up, and (mod, "no room") for a module without one."""
    bad = []
    for mod, targets in edges.items():
        if not mod.startswith("graph_planner.") or mod == "graph_planner":
            continue
        a = room_of(mod)
        if a is None:
            bad.append((mod, "no room"))
            continue
        bad += [(mod, t) for t in targets if (b := room_of(t)) is not None and b > a]
    return sorted(bad)


def upward(edges: dict[str, set[str]]) -> list[tuple[str, str]]:
    """Imports from a lower floor to a higher one, or between the two workloads."""
    bad = []
    for mod, targets in edges.items():
        a = mod.split(".")[0]
        for t in targets:
            b = t.split(".")[0]
            if a != b and (FLOOR[b] > FLOOR[a] or (FLOOR[a] == FLOOR[b])):
                bad.append((mod, t))
    return sorted(bad)


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each sorted."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]
    sys.setrecursionlimit(10000)

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return sorted(out)


if __name__ == "__main__":
    g = graph()
    up, cyc = upward(g) + upward_inside(g), cycles(g)
    for a, b in up:
        print(f"upward: {a} -> {b}")
    for comp in cyc:
        print("cycle: " + " <-> ".join(comp))
    print(f"{sum(len(v) for v in g.values())} imports among {len(g)} modules; {len(up)} upward, {len(cyc)} cycles")
    sys.exit(1 if up or cyc else 0)
