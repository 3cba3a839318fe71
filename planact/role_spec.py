"""What one role's Ray workers receive instead of the whole run config: `RoleSpec`, built on the driver.

A `RoleWorker` (engine, trainer) and the ranks of its trainer group read their role's section, a few
run-level values and nothing else; `role_spec(cfg, role)` picks those out once where the agents are
created (planact.agents), so a worker cannot come to depend on another section of the run.

The environment stays on the driver: plug-ins are built from the whole run config (`make_env(cfg)`; the
repair env reads the seed, the run folder and both roles' sections), so the warm start's only use of it,
the teacher's demonstrations, is drawn there (`warm_start_demos`) and sent to the trainer as text pairs.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from planact.config import API_ENGINES, RoleConfig, RunConfig, WarmStartConfig
from planact.initial_models import initial_model_path
from planact.registry import resolve_model
from planact.tracking import tracking_uri
from planact.trainer_group import rank_names

if TYPE_CHECKING:
    from planact.envs.base import RoundEnv


@dataclass(frozen=True)
class RoleSpec:
    """One role's part of the run config: everything its workers (RoleWorker, TrainerRank) read."""

    role: str
    """'planner' or 'actor'."""
    config: RoleConfig
    """The role's section of the run config (model, engine, sampling, training, resources)."""
    seed: int
    """The run's seed (LoRA adapters' initialisation)."""
    run_dir: Path
    """The run's folder: engine logs, exported weights (sglang), the run state naming the last checkpoint."""
    agent_role: str
    """The run's `agent_role` ('both' or one role): which run state file a restored worker reads."""
    tiny_model: str | None
    """The tiny starting model the driver built under the run folder when the role has no model_path
    (None with a model_path or an API engine)."""
    tracking_uri: str
    """Where a `models:/` model_path is looked up."""
    namespace: str
    """The run's Ray/schedulemesh namespace, where trainer rank 0 finds ranks 1..N-1."""
    rank_names: tuple[str, ...]
    """Ray actor names of the role's trainer ranks 1..N-1 (empty with one trainer worker)."""

    def initial_model(self) -> Path:
        """The role's starting checkpoint on this machine: its model_path resolved, or the driver's tiny model."""
        # Resolved here, not on the driver: a hub or registry model is downloaded once per machine, and a
        # worker may run on another node than the driver.
        if self.config.model_path:
            return resolve_model(self.config.model_path, self.tracking_uri)
        if self.tiny_model is None:
            raise ValueError(f"{self.role}: an API engine role has no local starting model")
        return Path(self.tiny_model)


def role_spec(cfg: RunConfig, role: str) -> RoleSpec:
    """The `RoleSpec` of `role` in this run (builds the role's tiny starting model here when missing)."""
    rc: RoleConfig = getattr(cfg, role)
    # Built on the driver (a folder check after the session's prebuild_initial_models): its tokenizer may
    # learn from the environment's text, and only the driver builds the environment.
    tiny = None if rc.model_path or rc.engine in API_ENGINES else str(initial_model_path(cfg, role))
    return RoleSpec(
        role=role,
        config=rc,
        seed=cfg.seed,
        run_dir=cfg.run_dir(),
        agent_role=cfg.agent_role,
        tiny_model=tiny,
        tracking_uri=tracking_uri(cfg),
        namespace=cfg.barrier.namespace,
        rank_names=tuple(rank_names(cfg, role)),
    )


def warm_start_demos(
    env: RoundEnv, role: str, ws: WarmStartConfig, seed: int, steps: int | None = None
) -> list[tuple[str, str]]:
    """The teacher's (prompt, target) pairs a role's warm start of `steps` (default ws.steps) trains on."""
    # Enough distinct demonstrations that the warm start plateaus on the task, not on memorising them:
    # each is seen ~4 times. (A fixed 20k let one seed generalise and another memorise at 6000 steps.)
    n = min(200_000, max(2000, (steps if steps is not None else ws.steps) * ws.batch_size // 4))
    return env.demonstrations(role, n, random.Random(f"{seed}:demos:{role}"))
