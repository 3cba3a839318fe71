"""Prefect tasks of optimizer training: a search run to its end (fanned out on Ray) and the update.

Both rebuild the optimizer from the iteration's checkpoint folder, so a search task on any Ray worker
samples from exactly the weights the iteration started with (on-policy), and the update is a function
of that folder and the transitions (a retried task redoes it from the same inputs).
"""

from __future__ import annotations

from prefect import task
from prefect.cache_policies import NO_CACHE

from aflow_rl.config import AFlowConfig
from aflow_rl.optimizer_rl import learn, make_optimizer, run_searches

OPTS = {"cache_policy": NO_CACHE, "persist_result": False}


@task(name="search", retries=1, **OPTS)
def run_search(cfg: AFlowConfig, checkpoint: str, benchmark: str, seed: int, tag: str) -> list[dict]:
    """One search of this benchmark with this seed, stepped by the checkpoint's optimizer until it ends; its
    transitions."""
    import os

    import torch

    from tasks import QUIET_ENV, quiet_state_lines

    if os.environ.get(QUIET_ENV) == "1":  # this worker's Prefect console handlers were (re)made after import
        quiet_state_lines()
    torch.set_num_threads(1)  # many searches share the machine's cores
    return run_searches(cfg, make_optimizer(cfg, checkpoint), [seed], tag, [benchmark])


@task(name="train_optimizer", **OPTS)
def train_optimizer(cfg: AFlowConfig, checkpoint: str, transitions: list[dict], iteration: int, out: str) -> dict:
    """GiGPO advantages over the iteration's transitions, one GRPO update, the new checkpoint written whole."""
    model = make_optimizer(cfg, checkpoint)
    figures = learn(cfg, model, transitions, iteration)
    model.save(out)
    return {"figures": figures, "transitions": transitions}
