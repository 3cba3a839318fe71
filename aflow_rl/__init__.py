"""AFlow with RL: workflow search (AFlow's MCTS and on-disk format) guided by a GiGPO-trained edit policy.

A library: nothing here imports Prefect. flows/aflow.py drives it as a Prefect flow.
"""
