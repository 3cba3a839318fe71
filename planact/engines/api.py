"""Frozen API engines on the official SDKs: any OpenAI-compatible endpoint (`openai`), and the
Anthropic Messages API (`anthropic`).

The SDKs own the HTTP work: timeouts, retries with exponential backoff and jitter, Retry-After
(up to two minutes; a longer one is not waited for), connection pooling and response parsing.
What they do not do lives here: a per-engine concurrency limit, token and cost accounting, `n`
samples where the API has no `n` (Anthropic), keys read from a named variable and never shown, and
errors that say what to check. They speak the engine protocol (prompts + SamplingParams ->
Completions) so a role, an AFlow executor or an optimizer can use them like the local engines. API
models have no token ids we could train on: completions carry text, finish reason, usage and (OpenAI,
when asked) per-token logprobs; `token_ids` stay empty.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor

import anthropic
import openai

from planact.engine_config import AnthropicConfig, OpenAIConfig, RemoteAPIConfig
from planact.engines.base import Completion, SamplingParams
from planact.engines.remote import AuthError, RemoteError, Usage

OPENAI_FINISH = {
    "stop": "stop",
    "length": "length",
    "content_filter": "abort",
    "tool_calls": "stop",
    "function_call": "stop",
}
ANTHROPIC_FINISH = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "tool_use": "stop",
    "pause_turn": "abort",
    "refusal": "abort",
}


def _key(api: RemoteAPIConfig, engine: str) -> str:
    if not api.api_key_env:
        return ""
    key = os.environ.get(api.api_key_env, "")
    if not key:
        raise RuntimeError(
            f"{engine} engine: ${api.api_key_env} is not set (the key is read from the environment "
            "or a Prefect Secret named in api_key_secret)"
        )
    return key


class _APIEngine:
    """One SDK client per engine, a bounded thread pool over prompts, token and cost accounting; never trains."""

    kind = "api"
    sdk = openai  # the SDK module whose client and exception classes this engine uses

    def __init__(self, api: RemoteAPIConfig, name: str, key: str, auth_header: str):
        self.api = api
        self.name = name
        self.weight_version = 0  # frozen: the version never moves
        self.usage = Usage(api.prices.input_per_mtok, api.prices.output_per_mtok)
        self._key = key
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(api.concurrency)
        self.in_flight = 0
        self.max_in_flight = 0
        # The SDK's own client with its defaults; the hook only counts the retries it makes (it stamps
        # every attempt with x-stainless-retry-count) for usage and health().
        http_client = self.sdk.DefaultHttpxClient(event_hooks={"request": [self._count_retry]})
        # No key configured (a local server): send no auth header at all rather than an empty one (the
        # SDKs accept that only when the request itself says the header is omitted).
        self._extra_headers = {} if key else {auth_header: self.sdk.Omit()}
        self.client = self._client(key or "unused", http_client)
        self._pool = ThreadPoolExecutor(max_workers=api.concurrency, thread_name_prefix=name)

    def _client(self, key: str, http_client):
        raise NotImplementedError  # each SDK builds its own client

    def _count_retry(self, request) -> None:
        if request.headers.get("x-stainless-retry-count", "0") != "0":
            self.usage.add_retry()

    def generate(self, prompts: list[str], params: SamplingParams) -> list[list[Completion]]:
        """`params.n` completions per prompt; requests run concurrently up to the engine's limit."""
        return list(self._pool.map(lambda p: self._one(p, params), prompts))

    def _one(self, prompt: str, params: SamplingParams) -> list[Completion]:
        raise NotImplementedError  # each API defines its request

    def _call(self, create, **body):
        """One SDK call inside the concurrency limit, its failures turned into errors that name what to check."""
        with self._slots:
            with self._lock:
                self.in_flight += 1
                self.max_in_flight = max(self.max_in_flight, self.in_flight)
            try:
                return create(**body, extra_headers=self._extra_headers)
            except (self.sdk.AuthenticationError, self.sdk.PermissionDeniedError) as exc:
                hint = f"; check ${self.api.api_key_env}" if self.api.api_key_env else ""
                raise AuthError(
                    f"{self.name}: authentication failed (HTTP {exc.status_code}) at {self.api.base_url}{hint}",
                    exc.status_code,
                ) from None
            except self.sdk.APITimeoutError:
                raise RemoteError(
                    f"{self.name}: gave up after {self.api.max_retries + 1} attempts; last error: "
                    f"timed out ({self.api.timeout_s:g} s per attempt)"
                ) from None
            except self.sdk.APIConnectionError as exc:
                raise RemoteError(
                    f"{self.name}: gave up after {self.api.max_retries + 1} attempts; last error: "
                    f"connection failed ({self._redact(str(exc.__cause__ or exc))})"
                ) from None
            except self.sdk.APIStatusError as exc:
                # The SDK retried what is worth retrying (408, 409, 429, 5xx incl. Anthropic's 529) before raising.
                retried = exc.status_code in (408, 409, 429) or exc.status_code >= 500
                gave_up = f"gave up after {self.api.max_retries + 1} attempts; last error: " if retried else ""
                raise RemoteError(
                    f"{self.name}: {gave_up}HTTP {exc.status_code}: {self._redact(str(exc.message))[:500]}",
                    exc.status_code,
                ) from None
            finally:
                with self._lock:
                    self.in_flight -= 1

    def _redact(self, text: str) -> str:
        return text.replace(self._key, "***") if self._key else text

    def update_weights(self, state_dict: dict | None = None, version: int | None = None) -> int:
        """API models are frozen."""
        raise RuntimeError(f"{self.name}: an API engine cannot take new weights (its role must have train: false)")

    def health(self) -> dict:
        """Identity, endpoint and spend so far."""
        return {
            "engine": self.kind,
            "name": self.name,
            "model": self.api.model,
            "base_url": self.api.base_url,
            "weight_version": self.weight_version,
            "usage": self.usage.as_dict(),
            "max_in_flight": self.max_in_flight,
            "sdk": f"{self.sdk.__name__} {self.sdk.__version__}",
        }

    def close(self) -> None:
        """Release the thread pool and the SDK's connection pool."""
        self._pool.shutdown(wait=False)
        self.client.close()

    def _completion(
        self, text: str, finish: str, logprobs: list[float], prompt_tokens: int, completion_tokens: int
    ) -> Completion:
        return Completion(
            prompt_ids=[],
            token_ids=[],
            logprobs=logprobs,
            text=text,
            finish_reason=finish,
            weight_version=self.weight_version,
            meta={"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens, "engine": self.kind},
        )


class OpenAIEngine(_APIEngine):
    """Chat or text completions from an OpenAI-compatible endpoint (n samples per request)."""

    kind = "openai"
    sdk = openai

    def __init__(self, api: OpenAIConfig, name: str = "openai"):
        super().__init__(api, name, _key(api, "openai"), "Authorization")

    def _client(self, key: str, http_client) -> openai.OpenAI:
        return openai.OpenAI(
            api_key=key,
            base_url=self.api.base_url,
            timeout=self.api.timeout_s,
            max_retries=self.api.max_retries,
            http_client=http_client,
        )

    def _one(self, prompt: str, params: SamplingParams) -> list[Completion]:
        api: OpenAIConfig = self.api
        body = {
            "model": api.model,
            "n": params.n,
            "temperature": params.temperature,
            "top_p": params.top_p,
            "max_tokens": params.max_new_tokens,
        }
        if api.stop:
            body["stop"] = list(api.stop)
        if params.seed is not None:
            body["seed"] = params.seed
        if api.mode == "chat":
            messages = [{"role": "system", "content": api.system_prompt}] if api.system_prompt else []
            out = self._call(
                self.client.chat.completions.create,
                messages=messages + [{"role": "user", "content": prompt}],
                **body,
                **({"logprobs": True} if api.logprobs else {}),
            )
        else:
            text = prompt if not api.system_prompt else f"{api.system_prompt}\n\n{prompt}"
            out = self._call(
                self.client.completions.create, prompt=text, **body, **({"logprobs": 1} if api.logprobs else {})
            )
        prompt_tokens = out.usage.prompt_tokens if out.usage else 0
        completion_tokens = out.usage.completion_tokens if out.usage else 0
        self.usage.add(prompt_tokens, completion_tokens)
        choices = sorted(out.choices, key=lambda c: c.index)
        result = []
        for c in choices:
            if api.mode == "chat":
                text = c.message.content or ""
                lp = [t.logprob for t in ((c.logprobs.content if c.logprobs else None) or [])]
            else:
                text = c.text or ""
                lp = [x for x in ((c.logprobs.token_logprobs if c.logprobs else None) or []) if x is not None]
            result.append(
                self._completion(
                    text,
                    OPENAI_FINISH.get(c.finish_reason or "", "stop"),
                    lp,
                    prompt_tokens,
                    completion_tokens // max(len(choices), 1),
                )
            )
        return result


class AnthropicEngine(_APIEngine):
    """Messages API: system prompt, stop sequences, max tokens; one request per sample (no `n`)."""

    kind = "anthropic"
    sdk = anthropic

    def __init__(self, api: AnthropicConfig, name: str = "anthropic"):
        super().__init__(api, name, _key(api, "anthropic"), "Authorization")

    def _client(self, key: str, http_client) -> anthropic.Anthropic:
        return anthropic.Anthropic(
            api_key=key,
            base_url=self.api.base_url,
            timeout=self.api.timeout_s,
            max_retries=self.api.max_retries,
            http_client=http_client,
            default_headers={"anthropic-version": self.api.api_version},
        )

    def _one(self, prompt: str, params: SamplingParams) -> list[Completion]:
        api: AnthropicConfig = self.api
        body = {
            "model": api.model,
            "max_tokens": params.max_new_tokens,
            "messages": [{"role": "user", "content": prompt}],
        }
        # anthropic>=1 dropped temperature/top_p from create(); the API still takes them on models that
        # allow sampling settings, so they travel in extra_body, and only when not the API's default
        # (newer models refuse a non-default value, and temperature with top_p together).
        sampling = {}
        if params.temperature != 1.0:
            sampling["temperature"] = min(params.temperature, 1.0)
        elif params.top_p < 1.0:
            sampling["top_p"] = params.top_p
        if sampling:
            body["extra_body"] = sampling
        if api.system_prompt:
            body["system"] = api.system_prompt
        if api.stop:
            body["stop_sequences"] = list(api.stop)
        out = []
        for _ in range(params.n):
            msg = self._call(self.client.messages.create, **body)
            self.usage.add(msg.usage.input_tokens, msg.usage.output_tokens)
            text = "".join(b.text for b in msg.content if b.type == "text")
            out.append(
                self._completion(
                    text,
                    ANTHROPIC_FINISH.get(msg.stop_reason or "", "stop"),
                    [],
                    msg.usage.input_tokens,
                    msg.usage.output_tokens,
                )
            )
        return out
