"""Config of the production engines (sglang, openai, anthropic): one pydantic model each, every field
documented. Keys never live here: only the name of the environment variable or Prefect Secret holding one.
"""

from __future__ import annotations

import os
import warnings
from typing import Literal

from pydantic import Field, model_validator

from planact.config_base import StrictConfig


class PriceConfig(StrictConfig):
    """Prices for cost accounting, in USD per million tokens."""

    input_per_mtok: float = Field(0.0, ge=0.0, description="USD per million prompt (input) tokens.")
    output_per_mtok: float = Field(0.0, ge=0.0, description="USD per million completion (output) tokens.")


class RemoteAPIConfig(StrictConfig):
    """What the OpenAI and Anthropic engines (on the official SDKs) share: endpoint, key source, timeouts, retries,
    limits."""

    base_url: str = Field("", description="API root URL.")
    model: str = Field("", description="Model name sent with every request.")
    api_key_env: str = Field(
        "", description="Environment variable holding the API key ('' = send no key, e.g. a local server)."
    )
    api_key_secret: str | None = Field(
        None, description="Prefect Secret block holding the key; the flow loads it into api_key_env before work starts."
    )
    timeout_s: float = Field(60.0, gt=0.0, description="Per-attempt timeout, passed to the SDK client.")
    max_retries: int = Field(
        4,
        ge=0,
        le=20,
        description="The SDK's max_retries: retries on 408, 409, 429, 5xx (Anthropic's 529 too), timeouts and "
        "connection errors, with the SDK's backoff (0.5 s doubling to 8 s, jittered) or the server's "
        "Retry-After up to 120 s.",
    )
    concurrency: int = Field(8, ge=1, le=1024, description="Most requests in flight at once from one engine.")
    system_prompt: str | None = Field(None, description="System prompt sent with every request.")
    stop: list[str] = Field(default_factory=list, description="Stop sequences.")
    prices: PriceConfig = Field(default_factory=PriceConfig, description="Price table for cost accounting.")

    def missing_key(self, where: str) -> str:
        """Why a run cannot start for want of this endpoint's key ('' when it can): `where` is the
        config path of this block (`planner.openai`), named in the message."""
        if self.api_key_env and not self.api_key_secret and not os.environ.get(self.api_key_env):
            return (
                f"{where}.api_key_env: ${self.api_key_env} is not set (export it, name a Prefect Secret in "
                f"{where}.api_key_secret, or set api_key_env: '' for an endpoint without keys)"
            )
        return ""

    @model_validator(mode="before")
    @classmethod
    def _drop_hand_backoff(cls, data):
        # Configs written before the engines moved onto the SDKs carry their own backoff settings; the
        # SDK's backoff applies now, so those are dropped with a warning instead of refusing old runs.
        if isinstance(data, dict) and {"backoff_base_s", "backoff_max_s"} & data.keys():
            data = {k: v for k, v in data.items() if k not in ("backoff_base_s", "backoff_max_s")}
            warnings.warn(
                "backoff_base_s / backoff_max_s are ignored: the OpenAI and Anthropic SDKs apply their "
                "own backoff (max_retries still counts)",
                stacklevel=2,
            )
        return data


class OpenAIConfig(RemoteAPIConfig):
    """Any OpenAI-compatible endpoint (OpenAI, vLLM, SGLang's /v1, proxies)."""

    base_url: str = Field("https://api.openai.com/v1", description="API root URL, including /v1.")
    api_key_env: str = Field(
        "OPENAI_API_KEY", description="Environment variable holding the API key ('' = send no key)."
    )
    mode: Literal["chat", "completions"] = Field("chat", description="POST /chat/completions or /completions.")
    logprobs: bool = Field(False, description="Ask for per-token logprobs (where the endpoint offers them).")


class AnthropicConfig(RemoteAPIConfig):
    """The Anthropic Messages API."""

    base_url: str = Field("https://api.anthropic.com", description="API root URL (without /v1).")
    api_key_env: str = Field("ANTHROPIC_API_KEY", description="Environment variable holding the API key.")
    api_version: str = Field("2023-06-01", description="anthropic-version header.")


class SGLangConfig(StrictConfig):
    """An SGLang server per engine replica, launched and supervised by the replica's Ray actor."""

    launch_command: list[str] = Field(
        default_factory=list, description="Command before the flags; empty = [python, -m, sglang.launch_server]."
    )
    tp: int = Field(1, ge=1, description="Tensor-parallel degree (--tp).")
    mem_fraction_static: float | None = Field(
        None, gt=0.0, lt=1.0, description="--mem-fraction-static; None = SGLang's default."
    )
    extra_args: list[str] = Field(default_factory=list, description="More launch flags, passed verbatim.")
    host: str = Field("127.0.0.1", description="Address the server binds (the actor talks to it locally).")
    startup_timeout_s: float = Field(
        900.0, gt=0.0, description="Deadline for /health_generate to answer after a launch."
    )
    request_timeout_s: float = Field(600.0, gt=0.0, description="Per-request timeout.")
    max_restarts: int = Field(3, ge=0, description="Times a dead server is relaunched before the engine gives up.")
    concurrency: int = Field(64, ge=1, description="Most /generate requests in flight per server.")
    weights_dir: str | None = Field(
        None,
        description="Shared folder the trainer writes HF checkpoints to for update_weights_from_disk; None = "
        "<run>/weights.",
    )
