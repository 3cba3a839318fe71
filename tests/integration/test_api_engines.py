"""OpenAI and Anthropic engines (on the official `openai` / `anthropic` SDKs) against loopback stand-ins
of their HTTP APIs (no internet here).

The stand-ins (tests/servers/loopback.py) implement the documented request/response shapes and error
bodies strictly enough for the SDKs to parse them, check keys like the real services (and, like
OpenAI, echo part of a wrong key back), and fail on command, so the SDKs' retries, Retry-After,
timeouts, auth errors and our concurrency limit are exercised over real HTTP.
"""

from __future__ import annotations

import time

import pytest

from planact.engine_config import AnthropicConfig, OpenAIConfig
from planact.engines.api import AnthropicEngine, OpenAIEngine
from planact.engines.base import SamplingParams
from planact.engines.remote import AuthError, RemoteError

from ..servers.loopback import anthropic_server, openai_server

OPENAI_KEY = "sk-test-openai"
ANTHROPIC_KEY = "sk-ant-test"


@pytest.fixture(autouse=True)
def keys(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    monkeypatch.setenv("ANTHROPIC_API_KEY", ANTHROPIC_KEY)


def _openai(server, **kw) -> OpenAIEngine:
    return OpenAIEngine(OpenAIConfig(base_url=server.url + "/v1", model="gpt-test", **kw))


def test_openai_chat_request_and_parsing():
    with openai_server() as srv:
        eng = _openai(
            srv,
            system_prompt="be brief",
            stop=["\n\n"],
            logprobs=True,
            prices={"input_per_mtok": 2.0, "output_per_mtok": 10.0},
        )
        out = eng.generate(["hi", "yo"], SamplingParams(temperature=0.7, top_p=0.9, max_new_tokens=16, n=2, seed=3))
    (req,) = [r for r in srv.requests if r["body"]["messages"][-1]["content"] == "hi"]  # sent concurrently
    assert req["path"] == "/v1/chat/completions" and req["headers"]["authorization"] == f"Bearer {OPENAI_KEY}"
    body = req["body"]
    assert body["model"] == "gpt-test" and body["n"] == 2 and body["max_tokens"] == 16 and body["seed"] == 3
    assert body["temperature"] == 0.7 and body["top_p"] == 0.9 and body["stop"] == ["\n\n"] and body["logprobs"]
    assert body["messages"] == [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]
    assert [[c.text for c in group] for group in out] == [["echo:hi:0", "echo:hi:1"], ["echo:yo:0", "echo:yo:1"]]
    assert out[0][0].finish_reason == "stop" and out[0][0].logprobs == [-0.5] * len("echo:hi:0")
    usage = eng.health()["usage"]
    assert usage["requests"] == 2 and usage["prompt_tokens"] == 4 and usage["completion_tokens"] == 36
    assert usage["cost_usd"] == pytest.approx((4 * 2.0 + 36 * 10.0) / 1e6)


def test_openai_text_completions_and_length_finish():
    def answer(prompt, n, body):
        return [("abc", "length", [-1.0, -2.0, -3.0])] * n

    with openai_server(answer) as srv:
        eng = _openai(srv, mode="completions", logprobs=True)
        (group,) = eng.generate(["2+2="], SamplingParams(n=3, max_new_tokens=3))
    body = srv.requests[0]["body"]
    assert srv.requests[0]["path"] == "/v1/completions" and body["prompt"] == "2+2=" and body["logprobs"] == 1
    assert [c.finish_reason for c in group] == ["length"] * 3 and group[2].logprobs == [-1.0, -2.0, -3.0]


def test_retries_honour_retry_after_then_succeed():
    with openai_server() as srv:
        eng = _openai(srv)
        srv.fail_next(429, times=2, retry_after="0.3")
        t0 = time.perf_counter()
        out = eng.generate(["x"], SamplingParams())
        elapsed = time.perf_counter() - t0
        srv.fail_next(503, times=1)  # no Retry-After: jittered exponential backoff
        eng.generate(["y"], SamplingParams())
    assert out[0][0].text == "echo:x:0"
    assert elapsed >= 0.6  # two waits of the server's Retry-After
    assert eng.usage.retries == 3 and len(srv.requests) == 5
    # The SDK did the retrying: it stamps each attempt with its retry number.
    assert [r["headers"].get("x-stainless-retry-count") for r in srv.requests] == ["0", "1", "2", "0", "1"]


def test_retries_give_up_with_the_last_error():
    with openai_server() as srv:
        eng = _openai(srv, max_retries=2)
        srv.fail_next(500, times=5)
        with pytest.raises(RemoteError, match=r"gave up after 3 attempts; last error: HTTP 500"):
            eng.generate(["x"], SamplingParams())
        srv.failures.clear()
        srv.fail_next(400)  # a client error is not retried
        with pytest.raises(RemoteError, match="HTTP 400"):
            eng.generate(["x"], SamplingParams())
    assert len(srv.requests) == 4


@pytest.mark.serial  # asserts a wall-clock limit: run with the machine to itself
def test_timeouts_are_retried_then_reported():
    with openai_server(delay_s=3.0) as srv:
        eng = _openai(srv, timeout_s=0.3, max_retries=1)
        t0 = time.perf_counter()
        with pytest.raises(RemoteError, match="gave up after 2 attempts; last error: timed out"):
            eng.generate(["x"], SamplingParams())
        elapsed = time.perf_counter() - t0
    assert elapsed < 2.5 and len(srv.requests) == 2  # two attempts, neither waited for the slow server


def test_auth_error_names_the_variable_never_the_key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-WRONG-secret-value")
    with openai_server() as srv:
        eng = _openai(srv)
        with pytest.raises(AuthError) as err:
            eng.generate(["x"], SamplingParams())
    text = f"{err.value} {err.value!r}"
    assert "$OPENAI_API_KEY" in text and "401" in text
    assert "sk-WRONG-secret-value" not in text and "sk-WRONG" not in text  # the server echoed a prefix back
    assert err.value.__cause__ is None and err.value.__suppress_context__  # no SDK traceback carrying the body
    assert len(srv.requests) == 1  # auth failures are not retried


def test_missing_key_fails_before_any_request(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY")
    with pytest.raises(RuntimeError, match=r"\$OPENAI_API_KEY is not set"):
        OpenAIEngine(OpenAIConfig(base_url="http://127.0.0.1:9/v1", model="m"))


def test_concurrency_limit_is_honoured():
    with openai_server(delay_s=0.2) as srv:
        eng = _openai(srv, concurrency=3)
        eng.generate([f"p{i}" for i in range(12)], SamplingParams())
    assert srv.max_in_flight == 3 and eng.max_in_flight == 3 and len(srv.requests) == 12


def test_connection_errors_are_retried_then_reported():
    with openai_server() as srv:
        url = srv.url
    eng = OpenAIEngine(OpenAIConfig(base_url=url + "/v1", model="m", max_retries=2))
    with pytest.raises(RemoteError, match="gave up after 3 attempts; last error: connection failed"):
        eng.generate(["x"], SamplingParams())


def test_anthropic_messages_request_parsing_and_overload_retry():
    def answer(prompt, n, body):
        return [("long answer", "length", [])]

    with anthropic_server(answer) as srv:
        eng = AnthropicEngine(
            AnthropicConfig(
                base_url=srv.url,
                model="claude-test",
                system_prompt="sys",
                stop=["END"],
                prices={"input_per_mtok": 3.0, "output_per_mtok": 15.0},
            )
        )
        srv.fail_next(529, retry_after="0")
        (group,) = eng.generate(["hello"], SamplingParams(n=2, max_new_tokens=32, temperature=0.5))
    req = srv.requests[-1]
    assert req["path"] == "/v1/messages"
    assert ANTHROPIC_KEY in (req["headers"].get("x-api-key"), req["headers"].get("authorization", "")[len("Bearer ") :])
    assert req["headers"]["anthropic-version"] == "2023-06-01"
    assert req["body"] == {
        "model": "claude-test",
        "max_tokens": 32,
        "temperature": 0.5,
        "system": "sys",
        "stop_sequences": ["END"],
        "messages": [{"role": "user", "content": "hello"}],
    }
    assert len(srv.requests) == 3  # one overloaded answer, then one request per sample (no `n` in the API)
    assert [c.finish_reason for c in group] == ["length", "length"] and group[0].text == "long answer"
    assert eng.usage.as_dict()["cost_usd"] == pytest.approx((2 * 5 * 3.0 + 2 * 11 * 15.0) / 1e6)


def test_anthropic_bad_key_is_an_auth_error(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-nope")
    with anthropic_server() as srv:
        eng = AnthropicEngine(AnthropicConfig(base_url=srv.url, model="m"))
        with pytest.raises(AuthError, match=r"\$ANTHROPIC_API_KEY") as err:
            eng.generate(["x"], SamplingParams())
    assert "sk-ant-nope" not in str(err.value)


def test_anthropic_stop_sequence_and_no_key_for_a_local_server():
    with anthropic_server(lambda prompt, n, body: [("part", "stop_sequence", [])], key=None) as srv:
        eng = AnthropicEngine(AnthropicConfig(base_url=srv.url, model="m", api_key_env="", stop=["###"]))
        (group,) = eng.generate(["x"], SamplingParams(n=1))
        assert group[0].finish_reason == "stop" and group[0].text == "part"
    sent = srv.requests[0]["headers"]
    assert "x-api-key" not in sent and "authorization" not in sent  # no key configured: no auth header at all


def test_openai_no_key_sends_no_authorization_header():
    with openai_server(key=None) as srv:
        eng = OpenAIEngine(OpenAIConfig(base_url=srv.url + "/v1", model="m", api_key_env=""))
        eng.generate(["x"], SamplingParams())
    assert "authorization" not in srv.requests[0]["headers"]


def test_old_backoff_settings_are_dropped_with_a_warning():
    with pytest.warns(UserWarning, match="SDKs apply their own backoff"):
        cfg = OpenAIConfig(model="m", backoff_base_s=0.5, backoff_max_s=30.0)
    assert "backoff_base_s" not in cfg.model_dump()
