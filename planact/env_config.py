"""The environment section of a run config (env): the kind, the synthetic Plan/Act task's settings, and the
sections of the installed environment plug-ins (env.<kind>, found by entry point: planact.plugins)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, model_validator

from planact import plugins
from planact.config_base import StrictConfig


class _EnvConfig(StrictConfig):
    """The environment of a run: its kind, the synthetic Plan/Act task's settings, and one section per plug-in."""

    kind: str = Field(  # its type: the installed kinds (EnvConfig below)
        "synthetic",
        description="The environment, one of the installed kinds (entry points `planact.envs`): 'synthetic' = "
        "instructions over digit lists (planact.envs.plan_act, the settings below); a plug-in's kind reads its "
        "settings from env.<kind> (e.g. 'repair': code repair by the graph planner and the patch model, "
        "env.repair).",
    )
    name: Literal["plan_act"] = Field("plan_act", description="Synthetic environment id.")
    tasks_per_round: int = Field(64, ge=1, description="Distinct tasks sampled per round.")
    min_ops: int = Field(2, ge=1, description="Fewest operations in an instruction.")
    max_ops: int = Field(2, ge=1, le=3, description="Most operations in an instruction.")
    min_len: int = Field(4, ge=1, description="Shortest digit list.")
    max_len: int = Field(7, ge=1, le=12, description="Longest digit list.")
    but_first_prob: float = Field(
        0.5,
        ge=0.0,
        le=1.0,
        description="Probability a multi-op instruction is phrased 'B, but first A' (plan order differs from text "
        "order).",
    )
    teacher_order_error: float = Field(
        0.7,
        ge=0.0,
        le=1.0,
        description="Probability the planner's teacher writes a 'but first' plan in text order (wrong): the "
        "imperfection RL can fix and SFT cannot.",
    )
    heldout_size: int = Field(200, ge=1, description="Held-out tasks for evaluation (never used in training).")
    heldout_seed: int = Field(12345, description="Seed of the held-out set (fixed so runs compare).")

    @model_validator(mode="after")
    def _ranges(self) -> _EnvConfig:
        if self.min_ops > self.max_ops:
            raise ValueError("min_ops must be <= max_ops")
        if self.min_len > self.max_len:
            raise ValueError("min_len must be <= max_len")
        return self

    def settings(self) -> BaseModel | None:
        """The settings section of the run's environment kind (env.<kind>); None for a kind without one."""
        return getattr(self, self.kind) if self.kind in ENV_SECTIONS else None


ENV_SECTIONS = plugins.sections("env")
EnvConfig = plugins.with_sections(
    _EnvConfig, ENV_SECTIONS, kind=(Literal[plugins.env_kinds()], _EnvConfig.model_fields["kind"])
)
