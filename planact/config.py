"""Run configuration: pydantic models loaded from YAML with `key=value` overrides.

These models are also the Prefect parameter schema, so every field carries a
description that shows up in the Prefect UI form.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, Field, ValidationError, field_validator, model_validator

from planact.engine_config import AnthropicConfig, OpenAIConfig, SGLangConfig, _Strict
from planact.env_config import EnvConfig


API_ENGINES = ("openai", "anthropic")


class ConfigError(ValueError):
    """A run config is invalid; the message names every offending field."""




class TinyModelSpec(_Strict):
    """Shape of a locally built Llama-style model (used when `model_path` is empty)."""

    hidden_size: int = Field(96, ge=8, description="Width of the residual stream.")
    num_layers: int = Field(2, ge=1, description="Number of transformer blocks.")
    num_heads: int = Field(4, ge=1, description="Attention heads (hidden_size must divide evenly).")
    intermediate_size: int = Field(256, ge=8, description="Width of the MLP inside each block.")
    max_positions: int = Field(160, ge=16, description="Longest sequence (prompt + response) the model supports.")
    tokenizer: Literal["char", "bpe"] = Field("char", description="'char': the synthetic task's character vocabulary; 'bpe': byte-level BPE trained locally on the environment's text (the repair env: its training packages' code).")
    vocab_size: int = Field(3000, ge=300, le=65536, description="BPE vocabulary size (tokenizer: bpe).")

    @model_validator(mode="after")
    def _heads_divide(self) -> "TinyModelSpec":
        if self.hidden_size % self.num_heads:
            raise ValueError(f"hidden_size {self.hidden_size} is not divisible by num_heads {self.num_heads}")
        return self


class SamplingConfig(_Strict):
    """How a role's engine samples during rollouts."""

    temperature: float = Field(1.0, ge=0.0, le=5.0, description="Softmax temperature; 0 means greedy.")
    top_p: float = Field(1.0, gt=0.0, le=1.0, description="Nucleus sampling mass (1.0 disables it).")
    max_new_tokens: int = Field(24, ge=1, le=4096, description="Longest response the engine may produce.")


class RLConfig(_Strict):
    """GRPO hyper-parameters for one role (README, "RL")."""

    lr: float = Field(1e-4, gt=0.0, lt=1.0, description="AdamW learning rate after warmup (>= 3e-4 collapsed tiny models here).")
    warmup_steps: int = Field(10, ge=0, description="Optimizer steps of linear learning-rate warmup.")
    weight_decay: float = Field(0.0, ge=0.0, description="AdamW weight decay.")
    eps_clip: float = Field(0.2, gt=0.0, lt=1.0, description="PPO clip range below 1 (and above, unless eps_clip_high).")
    eps_clip_high: float | None = Field(None, gt=0.0, description="Upper clip range (DAPO 'clip-higher'); None = eps_clip.")
    clip_ratio_c: float = Field(3.0, gt=1.0, description="Dual-clip bound (verl): with A < 0 a token's loss is at most clip_ratio_c * |A|.")
    kl_coef: float = Field(0.0, ge=0.0, description="Weight of the KL penalty to the frozen reference (the warm start).")
    kl_estimator: Literal["k1", "k3"] = Field("k3", description="KL estimator: k1 = log-ratio, k3 = Schulman's unbiased non-negative one.")
    entropy_coef: float = Field(0.0, ge=0.0, description="Weight of the entropy bonus.")
    std_normalize: bool = Field(True, description="Divide group-centred rewards by the group std (+1e-6).")
    grad_clip: float = Field(1.0, gt=0.0, description="Global gradient-norm clip.")
    num_minibatches: int = Field(2, ge=1, description="Optimizer steps per round (the round's samples split evenly).")
    stale_weight_cap: float = Field(5.0, gt=1.0, description="Pipelined rounds: cap on a stale sample's per-token importance weight pi_prox/pi_behav (decoupled PPO; the clip is taken around the trainer's current policy, not the stale one).")


class WarmStartConfig(_Strict):
    """Supervised warm start on teacher demonstrations, run once before RL."""

    enabled: bool = Field(True, description="Run the warm start when the run has no checkpoint yet.")
    steps: int = Field(300, ge=0, description="Optimizer steps of cross-entropy training.")
    batch_size: int = Field(64, ge=1, description="Demonstrations per step.")
    lr: float = Field(3e-3, gt=0.0, lt=1.0, description="Peak learning rate.")
    final_lr_ratio: float = Field(0.1, ge=0.0, le=1.0, description="Cosine-anneal to this fraction of lr (an annealed start is what RL must beat).")
    warmup_steps: int = Field(20, ge=0, description="Linear warmup steps.")
    patience: int = Field(0, ge=0, description="Stop once the held-out demonstration loss has not improved for this many evaluations in a row and keep the best weights (`steps` is then the most it may run); 0 = run exactly `steps`.")
    eval_every: int = Field(100, ge=1, description="Steps between held-out loss evaluations (with patience > 0).")
    heldout: int = Field(256, ge=8, description="Demonstrations kept out of training to measure the held-out loss (with patience > 0).")
    min_delta: float = Field(0.01, ge=0.0, lt=1.0, description="Relative improvement of the held-out loss that counts as progress (0.01 = 1%).")


class ResourceConfig(_Strict):
    """Where a role's engines and trainer run on Ray."""

    num_cpus: float = Field(0.5, ge=0.0, description="Ray CPUs reserved by each engine/trainer actor of this role.")
    num_gpus: float = Field(0.0, ge=0.0, description="Ray GPUs reserved by each actor of this role.")
    memory_mb: int = Field(0, ge=0, description="Ray memory (MB) reserved per actor; 0 = no reservation.")
    custom: dict[str, float] = Field(default_factory=dict, description="Custom Ray resources per actor, e.g. {'node2': 0.5} to pin a role to labelled nodes.")
    torch_threads: int = Field(1, ge=1, description="torch intra-op threads per actor (oversubscribing cores is 2.5-5x slower).")
    replicas: int = Field(1, ge=1, description="Engine replicas; generation is fanned out over them.")
    colocate_trainer: bool = Field(True, description="Run the trainer inside engine replica 0 (weight sync is then in-process).")
    device: str = Field("cpu", description="torch device for the model, e.g. 'cpu' or 'cuda'.")
    trainer_workers: int = Field(1, ge=1, le=256, description="Ranks of the role's trainer: rank 0 is the trainer above, ranks 1..N-1 are extra actors; they train data-parallel with torch.distributed (gloo on CPU, NCCL on GPU).")
    trainer_placement: Literal["PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD"] = Field("PACK", description="Placement group strategy of ranks 1..N-1 (PACK: as few nodes as possible; SPREAD: across nodes).")
    trainer_timeout_s: float = Field(300.0, gt=0.0, description="Deadline of a trainer group's rendezvous and collectives (a dead rank fails the step after at most this long).")
    fsdp: bool = Field(False, description="Shard the role's training replica over its trainer ranks with FSDP2 (parameters, gradients and optimizer state split N ways; bf16 compute on GPU). Needs trainer_workers >= 2. Rank 0 keeps the full model for its engine and checkpoints.")


class RoleConfig(_Strict):
    """Everything about one role (planner or actor): model, engine, sampling, RL."""

    model_path: str | None = Field(None, description="HF checkpoint folder, hub id, or registered model (models:/<name>/<version-or-alias>); empty = build a tiny model from `tiny`.")
    tiny: TinyModelSpec = Field(default_factory=TinyModelSpec, description="Tiny-model shape used when model_path is empty.")
    engine: Literal["hf", "sglang", "openai", "anthropic"] = Field("hf", description="Generation engine: 'hf' (in-process transformers), 'sglang' (a server per replica), 'openai' / 'anthropic' (API models, frozen).")
    train: bool = Field(True, description="Update this role with RL; False keeps it frozen.")
    sglang: SGLangConfig = Field(default_factory=SGLangConfig, description="Settings of the sglang engine.")
    openai: OpenAIConfig = Field(default_factory=OpenAIConfig, description="Settings of the openai engine.")
    anthropic: AnthropicConfig = Field(default_factory=AnthropicConfig, description="Settings of the anthropic engine.")
    group_size: int = Field(4, ge=1, description="Samples per prompt (GRPO group G).")
    sampling: SamplingConfig = Field(default_factory=SamplingConfig, description="Rollout sampling settings.")
    rl: RLConfig = Field(default_factory=RLConfig, description="GRPO hyper-parameters.")
    warm_start: WarmStartConfig = Field(default_factory=WarmStartConfig, description="Supervised warm start.")
    resources: ResourceConfig = Field(default_factory=ResourceConfig, description="Ray resources and replicas.")

    @model_validator(mode="after")
    def _api_models_are_frozen(self) -> "RoleConfig":
        if self.engine in API_ENGINES and self.train:
            raise ValueError(f"engine {self.engine!r} serves an API model, which cannot be trained: set train: false")
        return self

    @model_validator(mode="after")
    def _trainer_group(self) -> "RoleConfig":
        if self.resources.trainer_workers > 1 and not self.train:
            raise ValueError("resources.trainer_workers > 1 needs train: true (a frozen role has no trainer)")
        if self.resources.fsdp and self.resources.trainer_workers < 2:
            raise ValueError("resources.fsdp: sharding needs a trainer group (resources.trainer_workers >= 2)")
        if self.resources.fsdp and self.rl.kl_coef > 0:
            raise ValueError("resources.fsdp: the KL reference model is not sharded; set rl.kl_coef: 0 or fsdp: false")
        return self


class CreditConfig(_Strict):
    """How the verifier's outcome is credited to each role."""

    actor: Literal["outcome", "plan_fidelity"] = Field("outcome", description="Actor reward: the task's true answer ('outcome') or the given plan executed faithfully ('plan_fidelity').")
    planner: Literal["mean_actor_outcome"] = Field("mean_actor_outcome", description="Planner reward = mean outcome of the actor samples that executed its plan.")
    actor_requires_valid_plan: bool = Field(True, description="Actor earns 0 when the plan was malformed, so it is never paid for ignoring the plan.")


class BarrierConfig(_Strict):
    """The per-(run, round) barrier held by PlanActOrchestrator."""

    timeout_s: float = Field(1800.0, gt=0.0, description="Seconds the actor side waits for the planner's plans.")
    fallback_on_timeout: bool = Field(True, description="On timeout: True = actor executes without a plan (round tagged), False = fail the round.")
    namespace: str = Field("planact", description="Ray namespace of the orchestrator and all named actors.")
    liveness_s: float = Field(15.0, ge=0.0, description="Two-job mode: a partner silent this long (no heartbeat) is dead and the waiter is released at once; 0 = wait for the timeout.")


class RegisteredNames(_Strict):
    """MLflow Model Registry names of the trained roles."""

    planner: str | None = Field(None, description="Registered model name of the planner; empty = '<run_name>-planner'.")
    actor: str | None = Field(None, description="Registered model name of the actor; empty = '<run_name>-actor'.")


class TrackingConfig(_Strict):
    """MLflow tracking."""

    tracking_uri: str | None = Field(None, description="MLflow URI; empty = $MLFLOW_TRACKING_URI or sqlite under the project's runs/ folder.")
    experiment: str = Field("planact", description="MLflow experiment name.")
    eval_every: int = Field(10, ge=1, description="Held-out evaluation every this many rounds (and at the start and end).")
    eval_samples: int = Field(4, ge=1, description="Samples per held-out task for pass@1 at the sampling temperature.")
    rollout_rows: int = Field(12, ge=0, description="Sample rollouts logged as a table per evaluation.")
    register_models: bool = Field(True, description="At the end of a run, log each trained role as an MLflow transformers model and register a new version (tagged with the run, round and held-out figures).")
    model_names: RegisteredNames = Field(default_factory=RegisteredNames, description="Registry names of the trained roles.")


class CheckpointConfig(_Strict):
    """Checkpointing and resume."""

    root: str = Field("runs", description="Folder holding one sub-folder per run name (checkpoints, experience, state).")
    every: int = Field(1, ge=1, description="Checkpoint every this many rounds (and always after the last).")


class RayConfig(_Strict):
    """How to reach Ray."""

    address: str | None = Field(None, description="Ray cluster address ('auto', 'ray://...'); empty = start a local Ray.")
    num_cpus: int | None = Field(None, ge=1, description="Logical CPUs for a locally started Ray (None = detect).")
    runtime_env: dict[str, Any] = Field(default_factory=dict, description="Ray runtime_env for workers (pip, env_vars, working_dir...).")
    task_num_cpus: float = Field(0.1, gt=0.0, description="CPUs reserved by each Prefect task on Ray (fractional so actors leave room, STACK_NOTES).")


class AFlowHookConfig(_Strict):
    """Optimise the workflow around the current models every N rounds (an aflow-optimize sub-flow)."""

    every_rounds: int = Field(0, ge=0, description="Run an AFlow search after every this many rounds (0 = never); must be a multiple of checkpoint.every.")
    max_rounds: int = Field(3, ge=1, description="Search rounds per optimisation.")
    validation_repeats: int = Field(2, ge=1, description="Evaluations of each workflow on the validation split.")
    limit: int | None = Field(20, ge=1, description="Validation problems used (None = all 50).")
    shards: int = Field(1, ge=1, description="Evaluation shards per repeat.")
    task_runner: Literal["ray", "threads"] = Field("threads", description="Where the search's tasks run: 'threads' (this flow's process, next to the agents holding the Ray CPUs) or 'ray'.")
    policy: bool = Field(True, description="Guide the search with the GiGPO edit policy (False = plain MCTS).")


class PipelineConfig(_Strict):
    """Overlap of rounds: generation of the next round while this one trains (README, "Pipelined rounds")."""

    max_staleness: Literal[0, 1, 2] = Field(0, description="0 = synchronous rounds; 1 = round t+1 generates (with the weights of round t-1) while round t trains, the loss correcting for the stale policy. Needs every trained role's trainer in its own actor (resources.colocate_trainer: false). 2 is not built yet.")


class RunConfig(_Strict):
    """A Plan/Act training run."""

    run_name: str = Field("demo", description="Run id: names the run folder and MLflow run; re-using it resumes.")
    seed: int = Field(0, description="Seed for task sampling, model init and sampling.")
    rounds: int = Field(60, ge=0, description="RL rounds to run in total (a resumed run continues up to this).")
    agent_role: Literal["both", "planner", "actor"] = Field("both", description="'both' = one flow drives both roles; 'planner'/'actor' = two-job mode.")
    env: EnvConfig = Field(default_factory=EnvConfig, description="Environment.")
    planner: RoleConfig = Field(default_factory=lambda: RoleConfig(
        group_size=8, sampling=SamplingConfig(max_new_tokens=16), rl=RLConfig(lr=3e-4)),
        description="The planner role (larger model).")
    actor: RoleConfig = Field(
        default_factory=lambda: RoleConfig(
            tiny=TinyModelSpec(hidden_size=64, num_layers=3, num_heads=4, intermediate_size=192), group_size=2,
            sampling=SamplingConfig(max_new_tokens=12),
            warm_start=WarmStartConfig(steps=6000, patience=3, eval_every=250)),
        description="The actor role (smaller model).",
    )
    credit: CreditConfig = Field(default_factory=CreditConfig, description="Reward credit per role.")
    barrier: BarrierConfig = Field(default_factory=BarrierConfig, description="Planner/actor barrier.")
    tracking: TrackingConfig = Field(default_factory=TrackingConfig, description="MLflow tracking.")
    checkpoint: CheckpointConfig = Field(default_factory=CheckpointConfig, description="Checkpoints and resume.")
    ray: RayConfig = Field(default_factory=RayConfig, description="Ray connection.")
    aflow: AFlowHookConfig = Field(default_factory=AFlowHookConfig, description="AFlow search around the current models every N rounds.")
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
    def _no_secrets(self) -> "RunConfig":
        from planact.secrets import config_errors

        errors = config_errors(self.model_dump())
        if errors:
            raise ValueError("; ".join(errors))
        return self

    @model_validator(mode="after")
    def _aflow_on_checkpoints(self) -> "RunConfig":
        if self.aflow.every_rounds and self.aflow.every_rounds % self.checkpoint.every:
            raise ValueError("aflow.every_rounds must be a multiple of checkpoint.every (it searches around a checkpoint)")
        if self.aflow.every_rounds and self.agent_role != "both":
            raise ValueError("aflow.every_rounds needs agent_role 'both' (the search executes planner and actor together)")
        return self

    @model_validator(mode="after")
    def _pipelined(self) -> "RunConfig":
        if self.pipeline.max_staleness == 2:
            raise NotImplementedError(
                "pipeline.max_staleness: 2 is not built: a trainer two versions ahead of its engines needs "
                "versioned weight and optimizer snapshots to checkpoint and sync from; use 0 or 1")
        if self.pipeline.max_staleness:
            for role in (("planner", "actor") if self.agent_role == "both" else (self.agent_role,)):
                rc = getattr(self, role)
                if rc.train and rc.resources.colocate_trainer:
                    raise ValueError(f"pipeline.max_staleness 1 trains while the engines generate: "
                                     f"{role}.resources.colocate_trainer must be false (a colocated trainer "
                                     "shares the engine's weights and would change them mid-generation)")
        return self

    @model_validator(mode="after")
    def _repair_roles(self) -> "RunConfig":
        if self.env.kind == "repair" and self.env.repair.decoding == "candidates":
            for role in ("planner", "actor"):
                if getattr(self, role).engine != "hf":
                    raise ValueError(f"env.repair.decoding 'candidates' scores candidate sets in-process: "
                                     f"{role}.engine must be 'hf' (real served models use decoding: free)")
        return self

    def run_dir(self) -> Path:
        """Folder holding this run's checkpoints, experience and state."""
        return Path(self.checkpoint.root).resolve() / self.run_name


def check_run_name(v: str) -> str:
    """A run name names a folder: letters, digits, '_', '-', '.'."""
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}", v):
        raise ValueError("use letters, digits, '_', '-', '.' (it names a folder)")
    return v


def check_runtime(cfg: "RunConfig") -> None:
    """Before any work starts: every API-engine role can find its key (env var or Prefect Secret), a
    registered model named in model_path exists, and a repair run's corpus exists."""
    if cfg.env.kind == "repair" and not (Path(cfg.env.repair.corpus) / "train.jsonl").is_file():
        raise ConfigError(f"env.repair.corpus: no corpus at {Path(cfg.env.repair.corpus).resolve()} (build it: "
                          "planact-repair corpus --config configs/repair-rl-corpus.yaml --out runs/rl-corpus)")
    for role in ("planner", "actor"):
        rc = getattr(cfg, role)
        if rc.model_path and rc.model_path.startswith("models:/"):
            from planact.registry import model_version
            from planact.tracking import tracking_uri

            try:
                model_version(rc.model_path, tracking_uri(cfg))
            except Exception as exc:  # noqa: BLE001 - any lookup failure means the run cannot start
                raise ConfigError(f"{role}.model_path: {rc.model_path} cannot be found in the MLflow registry at "
                                  f"{tracking_uri(cfg)} ({type(exc).__name__}: {str(exc)[:200]})") from None
        if rc.engine in API_ENGINES:
            api = getattr(rc, rc.engine)
            if api.api_key_env and not api.api_key_secret and not os.environ.get(api.api_key_env):
                raise ConfigError(f"{role}.{rc.engine}.api_key_env: ${api.api_key_env} is not set (export it, name a "
                                  f"Prefect Secret in {role}.{rc.engine}.api_key_secret, or set api_key_env: '' "
                                  "for an endpoint without keys)")


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
            raise ConfigError(f"override {item!r}: the value is not valid YAML ({_yaml_problem(err)}); "
                              "quote it, e.g. key=\"'text'\"") from None
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
