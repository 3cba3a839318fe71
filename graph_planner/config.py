"""Config of a code-repair evaluation run (the `repair-evaluate` flow's parameter form)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError, field_validator

from graph_planner.env_config import EpisodeConfig
from planact.config import TrackingConfig, load_config
from planact.config_base import ConfigError, RayConfig, StrictConfig, check_run_name, format_error
from planact.engine_config import OpenAIConfig


class RepairEvalConfig(StrictConfig):
    """Evaluate an agent on a code-repair corpus split."""

    run_name: str = Field("repair-eval", description="Names the run folder and the MLflow run.")
    root: str = Field("runs", description="Folder for run folders (and the default MLflow store).")
    corpus_dir: str = Field("runs/corpus", description="Corpus folder (built there from corpus_config when missing).")
    corpus_config: str = Field(
        "configs/repair-corpus.yaml", description="Corpus YAML used to build corpus_dir if it has no task files."
    )
    split: Literal["train", "heldout", "real", "all"] = Field(
        "heldout",
        description="Which split to evaluate on (real: release-history tasks, built by `planact-repair corpus "
        "--history` into corpus_dir beforehand).",
    )
    limit: int = Field(0, ge=0, description="First N tasks only (0 = all).")
    agent: Literal["rule", "model"] = Field(
        "rule", description="rule = the baseline state machine; model = an OpenAI-compatible endpoint."
    )
    model: OpenAIConfig = Field(
        default_factory=lambda: OpenAIConfig(api_key_env=""), description="Endpoint of the model agent."
    )
    episode: EpisodeConfig = Field(default_factory=EpisodeConfig, description="Episode budgets.")
    workers: int = Field(0, ge=0, description="Parallel sandbox slots (Ray tasks, one CPU each); 0 = one per CPU.")
    tracking: TrackingConfig = Field(
        default_factory=lambda: TrackingConfig(experiment="planact-repair"), description="MLflow tracking."
    )
    ray: RayConfig = Field(default_factory=RayConfig, description="Ray connection.")

    @field_validator("run_name")
    @classmethod
    def _safe(cls, v: str) -> str:
        return check_run_name(v)

    def run_dir(self) -> Path:
        """This run's folder (telemetry, summary)."""
        return Path(self.root).resolve() / self.run_name


def validate_repair_config(data: dict | RepairEvalConfig) -> RepairEvalConfig:
    """Validate into a RepairEvalConfig; ConfigError names every bad field."""
    try:
        return RepairEvalConfig.model_validate(data if isinstance(data, dict) else data.model_dump())
    except ValidationError as err:
        raise ConfigError(format_error(err)) from None


def load_repair_config(path: str | Path | None = None, overrides: list[str] | None = None) -> RepairEvalConfig:
    """Read the YAML, apply key=value overrides, validate."""
    return load_config(path, overrides, validate=validate_repair_config)
