"""Loopback HTTP stand-ins for services that cannot run here (OpenAI, Anthropic: no internet; SGLang: no GPU).

Each implements the documented request/response shapes (SGLang's native API; OpenAI chat and
text completions; Anthropic messages), records every request, can be told to fail the next requests
(status + Retry-After, or a delay longer than the client's timeout), checks the API key like the real
service, and measures how many requests it served at once.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# (prompt, n, body) -> [(text, finish_reason, token logprobs)] * n
Answer = Callable[[str, int, dict], list[tuple[str, str, list[float]]]]


def echo_answer(prompt: str, n: int, body: dict) -> list[tuple[str, str, list[float]]]:
    """Answer i is 'echo:<prompt>:<i>' with one logprob per character."""
    return [(f"echo:{prompt}:{i}", "stop", [-0.5] * len(f"echo:{prompt}:{i}")) for i in range(n)]


class LoopbackServer:
    """A threaded HTTP server on 127.0.0.1:<free port> with scripted failures and request records."""

    def __init__(
        self,
        routes: dict[tuple[str, str], Callable[[dict, dict], dict]],
        credentials: dict[str, str] | None = None,
        delay_s: float = 0.0,
        host: str = "127.0.0.1",
        port: int = 0,
        error: Callable[[int, str], dict] | None = None,
    ):
        self.routes = routes
        self.error = error or (lambda status, message: {"error": {"message": message}})
        self.credentials = credentials  # header -> value; any one of them authenticates (None: no key needed)
        self.delay_s = delay_s
        self.requests: list[dict] = []
        self.failures: list[tuple[int, dict, float]] = []  # (status, headers, delay) for the next requests
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_GET(self):
                self._handle("GET")

            def do_POST(self):
                self._handle("POST")

            def _handle(self, method: str):
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}") if length else {}
                with server._lock:
                    server.requests.append(
                        {
                            "method": method,
                            "path": self.path,
                            "body": body,
                            "headers": {k.lower(): v for k, v in self.headers.items()},
                        }
                    )
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                    failure = server.failures.pop(0) if server.failures else None
                try:
                    reply = self._answer(method, body, failure)
                finally:
                    # Out of flight before the answer is written: once the client has read it, it may send
                    # its next request, and counting both at once would report a concurrency it never had.
                    with server._lock:
                        server.in_flight -= 1
                self._send(*reply)

            def _answer(self, method: str, body: dict, failure) -> tuple[int, dict, dict | None]:
                if failure is not None:
                    status, headers, delay = failure
                    time.sleep(delay)
                    return status, server.error(status, f"injected {status}"), headers
                if server.credentials is not None and not any(
                    self.headers.get(h) == v for h, v in server.credentials.items()
                ):
                    # Like OpenAI's real answer, echo part of the key sent: the client must never show it.
                    sent = next((self.headers[h] for h in server.credentials if self.headers.get(h)), "")
                    return 401, server.error(401, f"Incorrect API key provided: {sent[:12]}***"), None
                route = server.routes.get((method, self.path.split("?")[0]))
                if route is None:
                    return 404, server.error(404, f"no route {method} {self.path}"), None
                time.sleep(server.delay_s)
                status, payload = route(body, dict(self.headers))
                return status, payload, None

            def _send(self, status: int, payload: dict, headers: dict | None = None):
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer((host, port), Handler)  # raises "Address already in use" if taken
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.url = f"http://{host}:{self.port}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def fail_next(self, status: int, times: int = 1, retry_after: str | None = None, delay_s: float = 0.0) -> None:
        """Answer the next `times` requests with `status` (and Retry-After), after `delay_s`."""
        headers = {"retry-after": retry_after} if retry_after is not None else {}
        self.failures.extend([(status, headers, delay_s)] * times)

    def __enter__(self) -> LoopbackServer:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def openai_server(answer: Answer = echo_answer, key: str | None = "sk-test-openai", **kw) -> LoopbackServer:
    """OpenAI-compatible /v1/chat/completions and /v1/completions."""

    def chat(body: dict, headers: dict) -> tuple[int, dict]:
        if missing := _missing(body, "model", "messages"):
            return 400, openai_error(400, f"Missing required parameter: '{missing}'.")
        prompt = body["messages"][-1]["content"]
        outs = answer(prompt, int(body.get("n", 1)), body)
        choices = [
            {
                "index": i,
                "finish_reason": fin,
                "message": {"role": "assistant", "content": text},
                "logprobs": (
                    {
                        "content": [
                            {"token": ch, "logprob": lp, "bytes": None, "top_logprobs": []} for ch, lp in zip(text, lps)
                        ]
                    }
                    if body.get("logprobs")
                    else None
                ),
            }
            for i, (text, fin, lps) in enumerate(outs)
        ]
        return 200, {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body["model"],
            "choices": choices,
            "usage": _usage(prompt, outs),
        }

    def completions(body: dict, headers: dict) -> tuple[int, dict]:
        if missing := _missing(body, "model", "prompt"):
            return 400, openai_error(400, f"Missing required parameter: '{missing}'.")
        prompt = body["prompt"]
        outs = answer(prompt, int(body.get("n", 1)), body)
        choices = [
            {
                "index": i,
                "text": text,
                "finish_reason": fin,
                "logprobs": (
                    {
                        "tokens": list(text),
                        "token_logprobs": lps,
                        "top_logprobs": None,
                        "text_offset": list(range(len(text))),
                    }
                    if body.get("logprobs")
                    else None
                ),
            }
            for i, (text, fin, lps) in enumerate(outs)
        ]
        return 200, {
            "id": "cmpl-1",
            "object": "text_completion",
            "created": int(time.time()),
            "model": body["model"],
            "choices": choices,
            "usage": _usage(prompt, outs),
        }

    return LoopbackServer(
        {("POST", "/v1/chat/completions"): chat, ("POST", "/v1/completions"): completions},
        credentials={"authorization": f"Bearer {key}"} if key else None,
        error=openai_error,
        **kw,
    )


def openai_error(status: int, message: str) -> dict:
    """OpenAI's error body: {"error": {"message", "type", "param", "code"}}."""
    kind = {
        400: "invalid_request_error",
        401: "invalid_request_error",
        404: "invalid_request_error",
        429: "rate_limit_error",
    }.get(status, "server_error")
    code = {401: "invalid_api_key", 429: "rate_limit_exceeded"}.get(status)
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


def anthropic_error(status: int, message: str) -> dict:
    """Anthropic's error body: {"type": "error", "error": {"type", "message"}}."""
    kind = {
        400: "invalid_request_error",
        401: "authentication_error",
        403: "permission_error",
        404: "not_found_error",
        429: "rate_limit_error",
        529: "overloaded_error",
    }.get(status, "api_error")
    return {"type": "error", "error": {"type": kind, "message": message}}


def anthropic_server(answer: Answer = echo_answer, key: str | None = "sk-ant-test", **kw) -> LoopbackServer:
    """Anthropic POST /v1/messages (requires anthropic-version, like the real API; the key may come as
    x-api-key or, as anthropic>=2 sends it, Authorization: Bearer)."""
    finish = {"stop": "end_turn", "length": "max_tokens", "stop_sequence": "stop_sequence"}

    def messages(body: dict, headers: dict) -> tuple[int, dict]:
        if "anthropic-version" not in {k.lower() for k in headers}:
            return 400, anthropic_error(400, "anthropic-version: header is required")
        if missing := _missing(body, "model", "max_tokens", "messages"):
            return 400, anthropic_error(400, f"{missing}: Field required")
        prompt = body["messages"][-1]["content"]
        text, fin, _ = answer(prompt, 1, body)[0]
        # An answer that ends on a stop sequence reports which one, as the API does.
        stop_sequence = (body.get("stop_sequences") or [None])[0] if fin == "stop_sequence" else None
        return 200, {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": [{"type": "text", "text": text}],
            "stop_reason": finish.get(fin, "end_turn"),
            "stop_sequence": stop_sequence,
            "usage": {"input_tokens": len(prompt), "output_tokens": len(text)},
        }

    credentials = {"x-api-key": key, "authorization": f"Bearer {key}"} if key else None
    return LoopbackServer({("POST", "/v1/messages"): messages}, credentials=credentials, error=anthropic_error, **kw)


def _missing(body: dict, *fields: str) -> str | None:
    """The first required field the request body lacks (the real APIs answer 400 naming it)."""
    return next((f for f in fields if f not in body), None)


def _usage(prompt: str, outs: list) -> dict:
    completion = sum(len(t) for t, _, _ in outs)
    return {"prompt_tokens": len(prompt), "completion_tokens": completion, "total_tokens": len(prompt) + completion}
