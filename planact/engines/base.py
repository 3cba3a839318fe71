"""The generation protocol every engine speaks (hf now; sglang/openai/anthropic later)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol


@dataclass
class SamplingParams:
    """Sampling settings sent with every request (always explicit, as with SGLang)."""

    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 24
    n: int = 1  # samples per prompt (a GRPO group)
    seed: int | None = None
    # One seed per prompt: each row samples from its own generator, so what a prompt draws does not
    # depend on which other prompts share its batch (the AFlow executor batches concurrent calls by timing).
    row_seeds: list[int] | None = None
    # The prompt as plain text to continue (a file's code before a function), not a chat turn: a
    # pretrained model scores code best where it reads like the files it was trained on.
    raw_prompt: bool = False


@dataclass
class Completion:
    """One sampled response with what training needs to use it."""

    prompt_ids: list[int]
    token_ids: list[int]  # response tokens, EOS included when the model stopped
    logprobs: list[float]  # log p of each sampled token at the sampling temperature
    text: str  # decoded response, special tokens removed
    finish_reason: str  # "stop" (EOS) or "length"
    weight_version: int
    meta: dict = field(default_factory=dict)

    def sample_fields(self) -> dict:
        """What a training sample keeps of it (the one conversion: rollouts, AFlow's optimizer RL)."""
        return {
            "text": self.text,
            "prompt_ids": self.prompt_ids,
            "token_ids": self.token_ids,
            "logprobs": self.logprobs,
            "weight_version": self.weight_version,
        }


def encode_prompt(tokenizer, prompt: str, raw: bool = False) -> list[int]:
    """The ids every local engine (hf, sglang) feeds the model: for an instruct model (its tokenizer has a
    chat template) the prompt as one user turn of that template, ready for the assistant's answer, or with
    `raw` its plain tokens (text to continue); else BOS + the prompt's tokens (planact's tiny models)."""
    templated = bool(getattr(tokenizer, "chat_template", None))
    if raw and templated:
        return tokenizer.encode(prompt, add_special_tokens=False)
    if templated:
        ids = tokenizer.apply_chat_template(
            [{"role": "user", "content": prompt}], add_generation_prompt=True, tokenize=True
        )
        ids = ids["input_ids"] if hasattr(ids, "keys") else ids
        return list(ids)
    return [tokenizer.bos_token_id] + tokenizer.encode(prompt, add_special_tokens=False)


class Engine(Protocol):
    """Prompts + sampling params -> completions; weights can be replaced in place."""

    def generate(self, prompts: list[str], params: SamplingParams) -> list[list[Completion]]:
        """Return, per prompt, `params.n` completions."""

    def update_weights(self, state_dict: dict | None = None, version: int | None = None) -> int:
        """Install new weights (None = already shared in-process) and return the new version."""

    def health(self) -> dict:
        """Liveness and identity: model, weight version, device."""
