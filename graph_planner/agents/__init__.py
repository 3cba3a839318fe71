"""Agents that act in PlannerEnv: the rule agent (the baseline) and the model agent."""

from graph_planner.agents.rule import RuleAgent, run_episode

__all__ = ["RuleAgent", "run_episode"]
