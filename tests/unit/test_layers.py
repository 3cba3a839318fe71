"""The import graph of the repository points down its layers and has no cycles (tools/import_graph.py).

Every import counts, also those inside functions: a lazy import still ties two modules together."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))

import import_graph  # noqa: E402


def test_every_import_points_down_the_layers():
    assert import_graph.upward(import_graph.graph()) == []


def test_graph_planners_rooms_import_only_downward_and_every_module_has_a_room():
    assert import_graph.upward_inside(import_graph.graph()) == []


def test_no_import_cycles_among_modules():
    assert import_graph.cycles(import_graph.graph()) == []


def test_the_checker_sees_upward_imports_and_cycles():
    edges = {"planact.a": {"graph_planner.b"}, "graph_planner.b": {"planact.a"}, "sandbox.x": set()}
    assert import_graph.upward(edges) == [("planact.a", "graph_planner.b")]
    assert import_graph.cycles(edges) == [["graph_planner.b", "planact.a"]]
    # inside graph_planner: the builders may use the judge, the judge may not use the builders
    inside = {
        "graph_planner.corpus.build": {"graph_planner.judge"},
        "graph_planner.judge": {"graph_planner.corpus.build", "graph_planner.corpus.fetch"},
        "graph_planner.newthing": set(),
    }
    assert import_graph.upward_inside(inside) == [
        ("graph_planner.judge", "graph_planner.corpus.build"),
        ("graph_planner.newthing", "no room"),
    ]
