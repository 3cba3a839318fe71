"""Run configuration: pydantic models loaded from YAML with `key=value` overrides.

These models are also the Prefect parameter schema, so every field carries a
description that shows up in the Prefect UI form.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, Field, ValidationError, field_validator, model_validator

from planact.engine_config import StrictConfig
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


class ConfigError(ValueError):
    """A run config is invalid; the message names every offending field."""


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

    tracking_uri: str | None = Field(
        None, description="MLflow URI; empty = $MLFLOW_TRACKING_URI or sqlite under the project's runs/ folder."
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


class RayConfig(StrictConfig):
    """How to reach Ray."""

    address: str | None = Field(
        None, description="Ray cluster address ('auto', 'ray://...'); empty = start a local Ray."
    )
    num_cpus: int | None = Field(None, ge=1, description="Logical CPUs for a locally started Ray (None = detect).")
    runtime_env: dict[str, Any] = Field(
        default_factory=dict, description="Ray runtime_env for workers (pip, env_vars, working_dir...)."
    )
    task_num_cpus: float = Field(
        0.1, gt=0.0, description="CPUs reserved by each Prefect task on Ray (fractional so actors leave room)."
    )
    agent_ready_timeout_s: float = Field(
        120.0,
        gt=0.0,
        description="Seconds an engine or trainer agent may take from its request until its constructor has finished "
        "(placed on a node, torch imported, model built) before the run fails with AgentCreationError; "
        "raise it on a loaded machine or for a large model. Applies when this run starts its namespace's "
        "schedulemesh supervisor.",
    )
    agent_stages: Literal["threads", "ray"] = Field(
        "threads",
        description="Where the stages whose work is a call to the agents run (actor-execute, train-<role>, "
        "warm-start): 'threads' = threads of the flow process (their work runs in the agents on Ray "
        "either way; saves a Ray task hop and a task-run start in a Ray worker, ~0.6 s a round), 'ray' = "
        "Ray task workers, like every other task of the flow.",
    )

    @property
    def private(self) -> bool:
        """True when the run starts its own local Ray (no cluster address given)."""
        return self.address in (None, "", "local")


class AFlowHookConfig(StrictConfig):
    """Optimise the workflow around the current models every N rounds (an aflow-optimize sub-flow)."""

    every_rounds: int = Field(
        0,
        ge=0,
        description="Run an AFlow search after every this many rounds (0 = never); must be a multiple of "
        "checkpoint.every.",
    )
    max_rounds: int = Field(3, ge=1, description="Search rounds per optimisation.")
    validation_repeats: int = Field(2, ge=1, description="Evaluations of each workflow on the validation split.")
    limit: int | None = Field(20, ge=1, description="Validation problems used (None = all 50).")
    shards: int = Field(1, ge=1, description="Evaluation shards per repeat.")
    task_runner: Literal["ray", "threads"] = Field(
        "threads",
        description="Where the search's tasks run: 'threads' (this flow's process, next to the agents holding the Ray "
        "CPUs) or 'ray'.",
    )
    policy: bool = Field(True, description="Guide the search with the GiGPO edit policy (False = plain MCTS).")


class PipelineConfig(StrictConfig):
    """Overlap of rounds: generation of the next round while this one trains (docs/plan-act.md, "Pipelined rounds")."""

    max_staleness: Literal[0, 1] = Field(
        0,
        description="0 = synchronous rounds; 1 = round t+1 generates (with the weights of round t-1) while round t "
        "trains, the loss correcting for the stale policy. Needs every trained role's trainer in its own "
        "actor (resources.colocate_trainer: false). (2 would need versioned weight and optimizer "
        "snapshots to checkpoint and sync from: not built.)",
    )


FREE_REPLY_TOKENS = 128  # env.repair.decoding 'free': the shortest reply limit that fits a small function


class RunConfig(StrictConfig):
    """A Plan/Act training run."""

    run_name: str = Field("demo", description="Run id: names the run folder and MLflow run; re-using it resumes.")
    seed: int = Field(0, description="Seed for task sampling, model init and sampling.")
    rounds: int = Field(60, ge=0, description="RL rounds to run in total (a resumed run continues up to this).")
    agent_role: Literal["both", "planner", "actor"] = Field(
        "both", description="'both' = one flow drives both roles; 'planner'/'actor' = two-job mode."
    )
    env: EnvConfig = Field(default_factory=EnvConfig, description="Environment.")
    planner: RoleConfig = Field(
        default_factory=lambda: RoleConfig(
            group_size=8, sampling=SamplingConfig(max_new_tokens=16), rl=RLConfig(lr=3e-4)
        ),
        description="The planner role (larger model).",
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
    aflow: AFlowHookConfig = Field(
        default_factory=AFlowHookConfig, description="AFlow search around the current models every N rounds."
    )
    pipeline: PipelineConfig = Field(default_factory=PipelineConfig, description="Synchronous or pipelined rounds.")

    @field_validator("run_name")
    @classmethod
    def _safe_name(cls, v: str) -> str:
        return check_run_name(v)

    @model_validator(mode="before")
    @classmethod
    def _role_defaults(cls, data):
        # A role section that sets some fields keeps that role's own defaults for the others: without
        # this, `--set actor.resources.replicas=2` silently gave the actor the planner-sized generic model.
        if isinstance(data, dict):
            for role in ("planner", "actor"):
                if isinstance(data.get(role), dict):
                    own = cls.model_fields[role].default_factory().model_dump(exclude_unset=True)
                    data = {**data, role: deep_merge(own, data[role])}
        return data

    @model_validator(mode="after")
    def _no_secrets(self) -> RunConfig:
        from planact.secrets import config_errors

        errors = config_errors(self.model_dump())
        if errors:
            raise ValueError("; ".join(errors))
        return self

    @model_validator(mode="after")
    def _aflow_on_checkpoints(self) -> RunConfig:
        if self.aflow.every_rounds and self.aflow.every_rounds % self.checkpoint.every:
            raise ValueError(
                "aflow.every_rounds must be a multiple of checkpoint.every (it searches around a checkpoint)"
            )
        if self.aflow.every_rounds and self.agent_role != "both":
            raise ValueError(
                "aflow.every_rounds needs agent_role 'both' (the search executes planner and actor together)"
            )
        return self

    @model_validator(mode="after")
    def _pipelined(self) -> RunConfig:
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
    def _repair_roles(self) -> RunConfig:
        if self.env.kind == "repair":
            # The planner chooses among the offered functions in both modes; in 'free' the actor writes its
            # edit, so any engine may serve it.
            free = self.env.repair.decoding == "free"
            for role in ("planner",) if free else ("planner", "actor"):
                if getattr(self, role).engine != "hf":
                    raise ValueError(
                        f"env.repair.decoding {self.env.repair.decoding!r} scores the {role}'s candidate sets "
                        f"in-process: {role}.engine must be 'hf'"
                        + ("" if free else " (a served patch model needs decoding: free)")
                    )
            if free and self.actor.sampling.max_new_tokens < FREE_REPLY_TOKENS:
                # the reply holds the whole corrected function: a short limit cuts every block open (malformed)
                raise ValueError(
                    f"env.repair.decoding 'free': actor.sampling.max_new_tokens must be at least "
                    f"{FREE_REPLY_TOKENS} (the patch model writes the whole function)"
                )
        return self

    def run_dir(self) -> Path:
        """Folder holding this run's checkpoints, experience and state."""
        return Path(self.checkpoint.root).resolve() / self.run_name


def check_run_name(v: str) -> str:
    """A run name names a folder: letters, digits, '_', '-', '.'."""
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}", v):
        raise ValueError("use letters, digits, '_', '-', '.' (it names a folder)")
    return v


def _format_error(err: ValidationError) -> str:
    lines = []
    for e in err.errors():
        loc = ".".join(str(p) for p in e["loc"]) or "<root>"
        lines.append(f"  {loc}: {e['msg']}")
    return "invalid run config:\n" + "\n".join(lines)


def set_path(data: dict, dotted: str, value: Any) -> None:
    """Set `a.b.c` inside nested dicts, creating levels as needed."""
    keys = dotted.split(".")
    if not all(k.strip() for k in keys):
        raise ConfigError(f"override {dotted!r}: empty name in the key path (expected e.g. planner.rl.lr)")
    node = data
    for k in keys[:-1]:
        node = node.setdefault(k, {})
        if not isinstance(node, dict):
            raise ConfigError(f"override {dotted!r}: {k!r} is not a section")
    node[keys[-1]] = value


def _yaml_problem(err: yaml.YAMLError) -> str:
    """A YAML error in one line: what is wrong and where."""
    mark = getattr(err, "problem_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    return f"{getattr(err, 'problem', None) or type(err).__name__}{where}"


def parse_overrides(overrides: list[str] | None) -> dict:
    """Turn ['a.b=1', 'c=x'] into a nested dict; values are parsed as YAML scalars."""
    out: dict = {}
    for item in overrides or []:
        if "=" not in item:
            raise ConfigError(f"override {item!r} must look like key.path=value")
        key, raw = item.split("=", 1)
        try:
            value = yaml.safe_load(raw) if raw != "" else None
        except yaml.YAMLError as err:
            raise ConfigError(
                f"override {item!r}: the value is not valid YAML ({_yaml_problem(err)}); quote it, e.g. key=\"'text'\""
            ) from None
        set_path(out, key.strip(), value)
    return out


def deep_merge(base: dict, extra: dict) -> dict:
    """Recursively merge `extra` into a copy of `base`."""
    out = dict(base)
    for k, v in extra.items():
        out[k] = deep_merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def validate_config(data: dict | RunConfig) -> RunConfig:
    """Validate a dict (or re-validate a model) into a RunConfig, raising ConfigError naming fields."""
    try:
        return RunConfig.model_validate(data if isinstance(data, dict) else data.model_dump())
    except ValidationError as err:
        raise ConfigError(_format_error(err)) from None


def load_config(path: str | Path | None = None, overrides: list[str] | None = None, validate=None):
    """Load a YAML config (or the defaults), apply `key=value` overrides, validate (RunConfig by default)."""
    data: dict = {}
    if path:
        p = Path(path)
        if not p.is_file():
            raise ConfigError(f"config file not found: {p}")
        try:
            data = yaml.safe_load(p.read_text()) or {}
        except yaml.YAMLError as err:
            raise ConfigError(f"{p}: not valid YAML: {_yaml_problem(err)}") from None
        if not isinstance(data, dict):
            raise ConfigError(f"{p}: top level must be a mapping")
    return (validate or validate_config)(deep_merge(data, parse_overrides(overrides)))


def flatten(cfg: BaseModel | dict, prefix: str = "") -> dict[str, Any]:
    """Flatten a config into dotted keys (MLflow params)."""
    data = cfg.model_dump() if isinstance(cfg, BaseModel) else cfg
    out: dict[str, Any] = {}
    for k, v in data.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and v:
            out.update(flatten(v, key + "."))
        else:
            out[key] = v
    return out
