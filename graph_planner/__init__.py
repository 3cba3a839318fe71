"""graph_planner: code repair on real Python repositories (see README, "graph_planner").

Built so far: the code graph, its search and the working memory (`graph_planner.graph`). The task
corpus, the environment and the agents are not built yet (README, "Not built yet").
"""
