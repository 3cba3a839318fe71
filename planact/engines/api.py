"""Frozen API engines: any OpenAI-compatible endpoint, and the Anthropic Messages API.

They speak the engine protocol (prompts + SamplingParams -> Completions) so a role, an AFlow
executor or an optimizer can use them interchangeably with the local engines. API models have no
token ids we could train on: completions carry text, finish reason, usage and (OpenAI, when asked)
per-token logprobs; `token_ids` stay empty.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

from planact.engine_config import AnthropicConfig, OpenAIConfig, RemoteAPIConfig
from planact.engines.base import Completion, SamplingParams
from planact.engines.remote import HTTPClient, RetryPolicy, Usage

OPENAI_FINISH = {"stop": "stop", "length": "length", "content_filter": "abort", "tool_calls": "stop",
                 "function_call": "stop"}
ANTHROPIC_FINISH = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length", "tool_use": "stop",
                    "pause_turn": "abort", "refusal": "abort"}


def _key(api: RemoteAPIConfig, engine: str) -> str:
    if not api.api_key_env:
        return ""
    key = os.environ.get(api.api_key_env, "")
    if not key:
        raise RuntimeError(f"{engine} engine: ${api.api_key_env} is not set (the key is read from the environment "
                           "or a Prefect Secret named in api_key_secret)")
    return key


class _APIEngine:
    """Fan requests out over a bounded thread pool; count tokens and cost; never train."""

    kind = "api"

    def __init__(self, api: RemoteAPIConfig, headers: dict[str, str], key: str, name: str):
        self.api = api
        self.name = name
        self.weight_version = 0  # frozen: the version never moves
        self.usage = Usage(api.prices.input_per_mtok, api.prices.output_per_mtok)
        retry = RetryPolicy(api.max_retries, api.backoff_base_s, api.backoff_max_s)
        self.http = HTTPClient(api.base_url, name, headers, api.timeout_s, retry, api.concurrency,
                               secrets=(key,), key_hint=f"${api.api_key_env}" if api.api_key_env else "",
                               usage=self.usage)
        self._pool = ThreadPoolExecutor(max_workers=api.concurrency, thread_name_prefix=name)

    def generate(self, prompts: list[str], params: SamplingParams) -> list[list[Completion]]:
        """`params.n` completions per prompt; requests run concurrently up to the engine's limit."""
        return list(self._pool.map(lambda p: self._one(p, params), prompts))

    def _one(self, prompt: str, params: SamplingParams) -> list[Completion]:
        raise NotImplementedError  # each API defines its request

    def update_weights(self, state_dict: dict | None = None, version: int | None = None) -> int:
        """API models are frozen."""
        raise RuntimeError(f"{self.name}: an API engine cannot take new weights (its role must have train: false)")

    def health(self) -> dict:
        """Identity, endpoint and spend so far."""
        return {"engine": self.kind, "name": self.name, "model": self.api.model, "base_url": self.api.base_url,
                "weight_version": self.weight_version, "usage": self.usage.as_dict(),
                "max_in_flight": self.http.max_in_flight}

    def _completion(self, text: str, finish: str, logprobs: list[float], prompt_tokens: int,
                    completion_tokens: int) -> Completion:
        return Completion(prompt_ids=[], token_ids=[], logprobs=logprobs, text=text, finish_reason=finish,
                          weight_version=self.weight_version,
                          meta={"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                                "engine": self.kind})


class OpenAIEngine(_APIEngine):
    """Chat or text completions from an OpenAI-compatible endpoint (n samples per request)."""

    kind = "openai"

    def __init__(self, api: OpenAIConfig, name: str = "openai"):
        key = _key(api, "openai")
        super().__init__(api, {"Authorization": f"Bearer {key}"} if key else {}, key, name)

    def _one(self, prompt: str, params: SamplingParams) -> list[Completion]:
        api: OpenAIConfig = self.api
        body = {"model": api.model, "n": params.n, "temperature": params.temperature, "top_p": params.top_p,
                "max_tokens": params.max_new_tokens}
        if api.stop:
            body["stop"] = list(api.stop)
        if params.seed is not None:
            body["seed"] = params.seed
        if api.mode == "chat":
            messages = [{"role": "system", "content": api.system_prompt}] if api.system_prompt else []
            body["messages"] = messages + [{"role": "user", "content": prompt}]
            if api.logprobs:
                body["logprobs"] = True
            out = self.http.request("POST", "/chat/completions", body)
        else:
            body["prompt"] = prompt if not api.system_prompt else f"{api.system_prompt}\n\n{prompt}"
            if api.logprobs:
                body["logprobs"] = 1
            out = self.http.request("POST", "/completions", body)
        usage = out.get("usage") or {}
        choices = sorted(out.get("choices") or [], key=lambda c: c.get("index", 0))
        n = max(len(choices), 1)
        self.usage.add(usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0))
        result = []
        for c in choices:
            if api.mode == "chat":
                text = (c.get("message") or {}).get("content") or ""
                lp = [t.get("logprob", 0.0) for t in ((c.get("logprobs") or {}).get("content") or [])]
            else:
                text = c.get("text") or ""
                lp = [x for x in ((c.get("logprobs") or {}).get("token_logprobs") or []) if x is not None]
            result.append(self._completion(text, OPENAI_FINISH.get(c.get("finish_reason") or "", "stop"), lp,
                                           usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0) // n))
        return result


class AnthropicEngine(_APIEngine):
    """Messages API: system prompt, stop sequences, max tokens; one request per sample (no `n`)."""

    kind = "anthropic"

    def __init__(self, api: AnthropicConfig, name: str = "anthropic"):
        key = _key(api, "anthropic")
        headers = {"anthropic-version": api.api_version, **({"x-api-key": key} if key else {})}
        super().__init__(api, headers, key, name)

    def _one(self, prompt: str, params: SamplingParams) -> list[Completion]:
        api: AnthropicConfig = self.api
        body = {"model": api.model, "max_tokens": params.max_new_tokens, "temperature": min(params.temperature, 1.0),
                "messages": [{"role": "user", "content": prompt}]}
        if params.top_p < 1.0:
            body["top_p"] = params.top_p
        if api.system_prompt:
            body["system"] = api.system_prompt
        if api.stop:
            body["stop_sequences"] = list(api.stop)
        out = []
        for _ in range(params.n):
            msg = self.http.request("POST", "/v1/messages", body)
            usage = msg.get("usage") or {}
            self.usage.add(usage.get("input_tokens", 0), usage.get("output_tokens", 0))
            text = "".join(b.get("text", "") for b in msg.get("content") or [] if b.get("type") == "text")
            out.append(self._completion(text, ANTHROPIC_FINISH.get(msg.get("stop_reason") or "", "stop"), [],
                                        usage.get("input_tokens", 0), usage.get("output_tokens", 0)))
        return out
