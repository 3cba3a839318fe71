"""graph_planner: code repair on real Python repositories (docs/code-repair.md).

The code graph, its search and the working memory (`graph`), the task corpus (`corpus`), the episode
environment (`env`), the agents (`agents`) and the repair team plugged into planact's rounds (`team`).
What is not built yet: docs/limits.md.
"""
