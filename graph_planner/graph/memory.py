"""Working memory: the budgeted subgraph the planner keeps, and its text for the patch model.

The planner fills memory from scored candidates (1-hop expansion of its anchors) with add / remove /
keep operations; each is checked against the budget (nodes and characters of source) and a refused
operation is reported, never raised. `linearize()` renders the memory as the patch model reads it:
per node its file, kind and line-numbered source, then its neighbours inside and outside memory.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from graph_planner.graph.build import RepoGraph
from graph_planner.graph.search import GraphSearch


@dataclass
class Budget:
    """Limits of the working memory."""

    nodes: int = 8
    """Most nodes held at once."""
    chars: int = 6000
    """Most characters of source held at once (the patch model's context)."""


@dataclass
class OpResult:
    """What one memory operation did: applied or refused, and why."""

    op: str
    node: str
    applied: bool
    reason: str = ""


@dataclass
class WorkingMemory:
    """Node ids held, in the order they were added, under a budget."""

    repo: RepoGraph
    budget: Budget = field(default_factory=Budget)
    nodes: list[str] = field(default_factory=list)

    def chars(self, node_id: str) -> int:
        """Characters of a node's source (what it costs in the budget)."""
        return sum(len(text) + 1 for _, text in self.repo.source(node_id))

    def used(self) -> dict[str, int]:
        """Nodes and characters held."""
        return {"nodes": len(self.nodes), "chars": sum(self.chars(n) for n in self.nodes)}

    def candidates(
        self, search: GraphSearch, anchors: list[str], hops: int = 1, k: int = 10
    ) -> list[tuple[str, float]]:
        """The anchors and their k-hop neighbourhood (functions and classes), best first, not yet in memory."""
        scored = [(a, 1.0) for a in anchors if a in self.repo.graph] + search.expand(anchors, hops)
        seen, out = set(self.nodes), []
        for n, s in scored:
            if n not in seen and self.repo.node(n)["kind"] in ("function", "class", "test"):
                seen.add(n)
                out.append((n, s))
        return out[:k]

    def apply_ops(self, ops: list[dict]) -> list[OpResult]:
        """Apply [{'op': 'add'|'remove'|'keep', 'node': id}, ...] in order; refusals are results, not errors."""
        results = []
        for raw in ops:
            op, node = str(raw.get("op", "")), str(raw.get("node", ""))
            results.append(self._apply(op, node))
        return results

    def _apply(self, op: str, node: str) -> OpResult:
        if op not in ("add", "remove", "keep"):
            return OpResult(op, node, False, f"unknown op {op!r} (add, remove, keep)")
        if node not in self.repo.graph:
            return OpResult(op, node, False, "no such node")
        if op == "keep":
            return OpResult(op, node, node in self.nodes, "" if node in self.nodes else "not in memory")
        if op == "remove":
            if node not in self.nodes:
                return OpResult(op, node, False, "not in memory")
            self.nodes.remove(node)
            return OpResult(op, node, True)
        if node in self.nodes:
            return OpResult(op, node, False, "already in memory")
        used = self.used()
        if used["nodes"] + 1 > self.budget.nodes:
            return OpResult(op, node, False, f"node budget {self.budget.nodes} reached")
        cost = self.chars(node)
        if used["chars"] + cost > self.budget.chars:
            return OpResult(op, node, False, f"{cost} chars exceed the {self.budget.chars - used['chars']} left")
        self.nodes.append(node)
        return OpResult(op, node, True)

    def linearize(self, neighbours: int = 5) -> str:
        """The memory as text: per node its header, numbered source lines and up to `neighbours` neighbours."""
        parts = []
        for nid in self.nodes:
            n = self.repo.node(nid)
            parts.append(f"### {n['kind']} {nid} ({n['path']}:{n['lineno']}-{n['end_lineno']})")
            parts += [f"{i:5d} | {text}" for i, text in self.repo.source(nid)]
            near = [
                f"{kind}{'->' if d == 'out' else '<-'} {other}{' [in memory]' if other in self.nodes else ''}"
                for kind, d, other in self.repo.neighbours(nid)
                if kind != "contains"
            ][:neighbours]
            if near:
                parts.append("  neighbours: " + "; ".join(near))
            parts.append("")
        return "\n".join(parts)
