"""SGLang's native transport and what every remote engine reports.

`HTTPClient` (timeouts, retries with backoff and jitter honouring Retry-After, a concurrency limit) is
the client of SGLang's own /generate, /update_weights_from_disk and /get_model_info routes, which no
SDK speaks; the OpenAI and Anthropic engines use the official SDKs instead (planact/engines/api.py).
`Usage` (token and cost accounting) and the errors (`RemoteError`, `AuthError`, never showing a key)
are shared by all remote engines.
"""

from __future__ import annotations

import email.utils
import random
import threading
import time
from dataclasses import dataclass, field

import httpx

# Rate limits, server errors and Anthropic's "overloaded" are worth another try; 4xx otherwise are not.
RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 529})


class RemoteError(RuntimeError):
    """A request failed for good (after retries, or with a non-retryable status)."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


class AuthError(RemoteError):
    """401/403: the key is missing, wrong or lacks access (the message names the variable, never the key)."""


@dataclass
class RetryPolicy:
    """Exponential backoff with full jitter; Retry-After wins when the server sends it."""

    max_retries: int = 4
    backoff_base_s: float = 0.5
    backoff_max_s: float = 30.0
    max_retry_after_s: float = 120.0
    rng: random.Random = field(default_factory=random.Random, repr=False)

    def delay(self, attempt: int, retry_after: float | None) -> float:
        """Seconds to wait before retry number `attempt` (0-based)."""
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.max_retry_after_s)
        return self.rng.uniform(0, min(self.backoff_max_s, self.backoff_base_s * 2**attempt))


def parse_retry_after(value: str | None) -> float | None:
    """Retry-After as seconds (delta-seconds or an HTTP date); None when absent or unreadable."""
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


@dataclass
class Usage:
    """Tokens and money spent by one engine (prices per million tokens, from config)."""

    input_per_mtok: float = 0.0
    output_per_mtok: float = 0.0
    requests: int = 0
    retries: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    # Requests are answered on several threads at once; `+=` on a shared int is not atomic.
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, prompt_tokens: int, completion_tokens: int) -> None:
        """Count one answered request."""
        with self._lock:
            self.requests += 1
            self.prompt_tokens += int(prompt_tokens or 0)
            self.completion_tokens += int(completion_tokens or 0)

    def add_retry(self) -> None:
        """Count one retried request."""
        with self._lock:
            self.retries += 1

    @property
    def cost_usd(self) -> float:
        """Cost so far at the configured prices."""
        return (self.prompt_tokens * self.input_per_mtok + self.completion_tokens * self.output_per_mtok) / 1e6

    def as_dict(self) -> dict:
        """Figures for metrics and health()."""
        return {
            "requests": self.requests,
            "retries": self.retries,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cost_usd": self.cost_usd,
        }


class HTTPClient:
    """JSON over HTTP for one endpoint; thread-safe; at most `concurrency` requests in flight."""

    def __init__(
        self,
        base_url: str,
        name: str,
        headers: dict[str, str] | None = None,
        timeout_s: float = 60.0,
        retry: RetryPolicy | None = None,
        concurrency: int = 8,
        secrets: tuple[str, ...] = (),
        key_hint: str = "",
        usage: Usage | None = None,
    ):
        self.base_url = base_url.rstrip("/")
        self.name = name
        self.retry = retry or RetryPolicy()
        self.secrets = tuple(s for s in secrets if s)
        self.key_hint = key_hint
        self.usage = usage or Usage()
        self._client = httpx.Client(
            base_url=self.base_url,
            headers=headers or {},
            timeout=timeout_s,
            limits=httpx.Limits(max_connections=concurrency),
        )
        self._slots = threading.BoundedSemaphore(concurrency)
        self._lock = threading.Lock()
        self.in_flight = 0
        self.max_in_flight = 0

    def redact(self, text: str) -> str:
        """The text with every secret replaced by '***'."""
        for s in self.secrets:
            text = text.replace(s, "***")
        return text

    def request(self, method: str, path: str, body: dict | None = None) -> dict:
        """Send, retrying retryable failures; returns the decoded JSON body."""
        last = ""
        for attempt in range(self.retry.max_retries + 1):
            retry_after = None
            try:
                response = self._send(method, path, body)
            except httpx.TimeoutException as exc:
                last = f"timed out ({type(exc).__name__})"
            except httpx.TransportError as exc:
                last = f"connection failed ({type(exc).__name__}: {self.redact(str(exc))})"
            else:
                status = response.status_code
                if status < 400:
                    try:
                        return response.json()
                    except ValueError:
                        raise RemoteError(
                            f"{self.name}: {method} {path} answered non-JSON: {self.redact(response.text[:300])!r}",
                            status,
                        ) from None
                detail = self.redact(response.text[:500])
                if status in (401, 403):
                    hint = f"; check {self.key_hint}" if self.key_hint else ""
                    raise AuthError(
                        f"{self.name}: authentication failed (HTTP {status}) at {self.base_url}{hint}", status
                    )
                if status not in RETRY_STATUS:
                    raise RemoteError(f"{self.name}: {method} {path} failed with HTTP {status}: {detail}", status)
                last = f"HTTP {status}: {detail}"
                retry_after = parse_retry_after(response.headers.get("retry-after"))
            if attempt == self.retry.max_retries:
                break
            self.usage.add_retry()
            time.sleep(self.retry.delay(attempt, retry_after))
        raise RemoteError(
            f"{self.name}: {method} {path} gave up after {self.retry.max_retries + 1} attempts; last error: {last}"
        )

    def _send(self, method: str, path: str, body: dict | None) -> httpx.Response:
        with self._slots:
            with self._lock:
                self.in_flight += 1
                self.max_in_flight = max(self.max_in_flight, self.in_flight)
            try:
                return self._client.request(method, path, json=body)
            finally:
                with self._lock:
                    self.in_flight -= 1

    def set_base_url(self, base_url: str) -> None:
        """Point the client at a new address (a relaunched server)."""
        self.base_url = base_url.rstrip("/")
        self._client.base_url = self.base_url

    def close(self) -> None:
        """Close the connection pool."""
        self._client.close()
