"""The repository graph (build), anchor search and expansion (search), and working memory (memory)."""

from graph_planner.graph.build import RepoGraph
from graph_planner.graph.memory import Budget, WorkingMemory
from graph_planner.graph.search import GraphSearch

__all__ = ["Budget", "GraphSearch", "RepoGraph", "WorkingMemory"]
