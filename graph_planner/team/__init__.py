"""The planner/actor team on code repair: the round environment, its contexts, prompts, sandbox and evaluation."""
