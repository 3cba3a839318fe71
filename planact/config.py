"""Run configuration: pydantic models loaded from YAML with `key=value` overrides.

These models are also the Prefect parameter schema, so every field carries a
description that shows up in the Prefect UI form.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, ValidationError, field_validator, model_validator

from planact import plugins

# What every config shares lives in config_base (plug-ins build on it); importable from here as before.
from planact.config_base import (  # noqa: F401
    ConfigError,
    RayConfig,
    StrictConfig,
    TrackingURI,
    check_run_name,
    flatten,
    format_error,
    keep_section_defaults,
    load_data,
)
from planact.env_config import EnvConfig

# Role-level models live in role_config; importable from here as before (RLConfig, TinyModelSpec, ...).
from planact.role_config import (  # noqa: F401
    API_ENGINES,
    LoRAConfig,
    RLConfig,
    RoleConfig,
    SamplingConfig,
    TinyModelSpec,
    WarmStartConfig,
)


class CreditConfig(StrictConfig):
    """How the verifier's outcome is credited to each role."""

    actor: Literal["outcome", "plan_fidelity"] = Field(
        "outcome",
        description="Actor reward: the task's true answer ('outcome') or the given plan executed faithfully "
        "('plan_fidelity').",
    )
    planner: Literal["mean_actor_outcome"] = Field(
        "mean_actor_outcome", description="Planner reward = mean outcome of the actor samples that executed its plan."
    )
    actor_requires_valid_plan: bool = Field(
        True, description="Actor earns 0 when the plan was malformed, so it is never paid for ignoring the plan."
    )


class BarrierConfig(StrictConfig):
    """The per-(run, round) barrier held by PlanActOrchestrator."""

    timeout_s: float = Field(1800.0, gt=0.0, description="Seconds the actor side waits for the planner's plans.")
    fallback_on_timeout: bool = Field(
        True, description="On timeout: True = actor executes without a plan (round tagged), False = fail the round."
    )
    namespace: str = Field("planact", description="Ray namespace of the orchestrator and all named actors.")
    liveness_s: float = Field(
        15.0,
        ge=0.0,
        description="Two-job mode: a partner silent this long (no heartbeat) is dead and the waiter is released at "
        "once; 0 = wait for the timeout.",
    )


class RegisteredNames(StrictConfig):
    """MLflow Model Registry names of the trained roles."""

    planner: str | None = Field(None, description="Registered model name of the planner; empty = '<run_name>-planner'.")
    actor: str | None = Field(None, description="Registered model name of the actor; empty = '<run_name>-actor'.")


class TrackingConfig(StrictConfig):
    """MLflow tracking."""

    tracking_uri: TrackingURI = Field(
        None,
        description="MLflow URI (sqlite:///... or http://...; a file store is refused, as MLflow 3 refuses it); "
        "empty = $MLFLOW_TRACKING_URI (a file store there is refused before the run starts) or sqlite under the "
        "project's runs/ folder.",
    )
    experiment: str = Field("planact", description="MLflow experiment name.")
    eval_every: int = Field(
        10, ge=1, description="Held-out evaluation every this many rounds (and at the start and end)."
    )
    eval_samples: int = Field(4, ge=1, description="Samples per held-out task for pass@1 at the sampling temperature.")
    rollout_rows: int = Field(12, ge=0, description="Sample rollouts logged as a table per evaluation.")
    register_models: bool = Field(
        True,
        description="At the end of a run, log each trained role as an MLflow transformers model and register a new "
        "version (tagged with the run, round and held-out figures).",
    )
    model_names: RegisteredNames = Field(
        default_factory=RegisteredNames, description="Registry names of the trained roles."
    )


class CheckpointConfig(StrictConfig):
    """Checkpointing and resume."""

    root: str = Field(
        "runs", description="Folder holding one sub-folder per run name (checkpoints, experience, state)."
    )
    every: int = Field(1, ge=1, description="Checkpoint every this many rounds (and always after the last).")


class PipelineConfig(StrictConfig):
    """Overlap of rounds: generation of the next round while this one trains (docs/plan-act.md, "Pipelined rounds")."""

    max_staleness: Literal[0, 1] = Field(
        0,
        description="0 = synchronous rounds; 1 = round t+1 generates (with the weights of round t-1) while round t "
        "trains, the loss correcting for the stale policy. Needs every trained role's trainer in its own "
        "actor (resources.colocate_trainer: false). (2 would need versioned weight and optimizer "
        "snapshots to checkpoint and sync from: not built.)",
    )


class _RunConfig(StrictConfig):
    """A Plan/Act training run."""

    run_name: str = Field("demo", description="Run id: names the run folder and MLflow run; re-using it resumes.")
    seed: int = Field(0, description="Seed for task sampling, model init and sampling.")
    rounds: int = Field(60, ge=0, description="RL rounds to run in total (a resumed run continues up to this).")
    agent_role: Literal["both", "planner", "actor"] = Field(
        "both", description="'both' = one flow drives both roles; 'planner'/'actor' = two-job mode."
    )
    env: EnvConfig = Field(default_factory=EnvConfig, description="Environment.")
    # Each setting has one default: a role's own value where it differs from RoleConfig's (the planner's
    # group size and reply length are RoleConfig's defaults; the actor's are its own).
    planner: RoleConfig = Field(
        default_factory=lambda: RoleConfig(rl=RLConfig(lr=3e-4)), description="The planner role (larger model)."
    )
    actor: RoleConfig = Field(
        default_factory=lambda: RoleConfig(
            tiny=TinyModelSpec(hidden_size=64, num_layers=3, num_heads=4, intermediate_size=192),
            group_size=2,
            sampling=SamplingConfig(max_new_tokens=12),
            warm_start=WarmStartConfig(steps=6000, patience=3, eval_every=250),
        ),
        description="The actor role (smaller model).",
    )
    credit: CreditConfig = Field(default_factory=CreditConfig, description="Reward credit per role.")
    barrier: BarrierConfig = Field(default_factory=BarrierConfig, description="Planner/actor barrier.")
    tracking: TrackingConfig = Field(default_factory=TrackingConfig, description="MLflow tracking.")
    checkpoint: CheckpointConfig = Field(default_factory=CheckpointConfig, description="Checkpoints and resume.")
    ray: RayConfig = Field(default_factory=RayConfig, description="Ray connection.")
    pipeline: PipelineConfig = Field(default_factory=PipelineConfig, description="Synchronous or pipelined rounds.")

    @field_validator("run_name")
    @classmethod
    def _safe_name(cls, v: str) -> str:
        return check_run_name(v)

    @model_validator(mode="before")
    @classmethod
    def _role_defaults(cls, data):
        # A role section that sets some fields keeps that role's own defaults for the others.
        return keep_section_defaults(cls, data, ("planner", "actor"))

    @model_validator(mode="after")
    def _no_secrets(self) -> _RunConfig:
        from planact.secrets import config_errors

        errors = config_errors(self.model_dump())
        if errors:
            raise ValueError("; ".join(errors))
        return self

    @model_validator(mode="after")
    def _pipelined(self) -> _RunConfig:
        if self.pipeline.max_staleness:
            for role in ("planner", "actor") if self.agent_role == "both" else (self.agent_role,):
                rc = getattr(self, role)
                if rc.train and rc.resources.colocate_trainer:
                    raise ValueError(
                        f"pipeline.max_staleness 1 trains while the engines generate: "
                        f"{role}.resources.colocate_trainer must be false (a colocated trainer "
                        "shares the engine's weights and would change them mid-generation)"
                    )
        return self

    @model_validator(mode="after")
    def _plugin_rules(self) -> _RunConfig:
        plugins.call_hook(self.plugin_sections(), "check_run", self)
        return self

    def plugin_sections(self) -> list[BaseModel]:
        """The plug-in sections that apply to this run: its environment kind's (env.<kind>) and every top-level one."""
        own = self.env.settings()
        return ([own] if own is not None else []) + [getattr(self, name) for name in RUN_SECTIONS]

    def run_dir(self) -> Path:
        """Folder holding this run's checkpoints, experience and state."""
        return Path(self.checkpoint.root).resolve() / self.run_name


RUN_SECTIONS = plugins.sections()  # top-level sections of installed plug-ins (aflow: aflow_rl's hook)
RunConfig = plugins.with_sections(_RunConfig, RUN_SECTIONS)


def validate_config(data: dict | RunConfig) -> RunConfig:
    """Validate a dict (or re-validate a model) into a RunConfig, raising ConfigError naming fields."""
    try:
        return RunConfig.model_validate(data if isinstance(data, dict) else data.model_dump())
    except ValidationError as err:
        raise ConfigError(format_error(err)) from None


def load_config(path: str | Path | None = None, overrides: list[str] | None = None, validate=None):
    """Load a YAML config (or the defaults), apply `key=value` overrides, validate (RunConfig by default)."""
    return (validate or validate_config)(load_data(path, overrides))
