"""planact: train a planner and an actor model together with RL, on Ray, tracked in MLflow."""

__version__ = "0.1.0"
