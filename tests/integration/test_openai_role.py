"""A Plan/Act run whose actor role is an `openai` engine: frozen, served over HTTP, the planner trains.

The endpoint is a loopback OpenAI-compatible server (tests/servers/loopback.py; no internet here) that
answers with a real model: the HF engine over a tiny Llama built like the run's own actor.
"""

from __future__ import annotations

import os
import threading

import pytest

from planact.config import RunConfig
from planact.engines.base import SamplingParams
from planact.engines.hf import HFEngine
from planact.models import load_model, materialize_tiny

from ..servers.loopback import openai_server
from .conftest import SMOKE, cli_env, read_state, run_cli


def hf_answer(model_dir):
    """An `Answer` for the loopback server: sample from the HF engine with the request's settings."""
    model, tok = load_model(model_dir)
    engine = HFEngine(model, tok, name="served")
    lock = threading.Lock()  # one generation at a time in the server's threads

    def answer(prompt: str, n: int, body: dict):
        params = SamplingParams(temperature=float(body.get("temperature", 1.0)), top_p=float(body.get("top_p", 1.0)),
                                max_new_tokens=int(body.get("max_tokens", 16)), n=n, seed=body.get("seed"))
        with lock:
            (group,) = engine.generate([prompt], params)
        return [(c.text, c.finish_reason, c.logprobs) for c in group]

    return answer


@pytest.mark.slow
def test_run_with_a_frozen_openai_actor_trains_only_the_planner(prefect_api, tmp_path):
    actor_spec = RunConfig().actor.tiny
    served = materialize_tiny(actor_spec, tmp_path / "served-actor", seed=2)
    with openai_server(hf_answer(served), key="sk-loopback") as srv:
        rc, out = run_cli(["--config", SMOKE, "--set", f"checkpoint.root={tmp_path}", "--set", "run_name=api",
                           "--set", "actor.engine=openai", "--set", "actor.train=false",
                           "--set", f"actor.openai.base_url={srv.url}/v1", "--set", "actor.openai.model=tiny-actor",
                           "--set", "actor.openai.mode=completions", "--set", "actor.openai.api_key_env=LOOPBACK_KEY"],
                          tmp_path / "cli.log", env=cli_env(LOOPBACK_KEY="sk-loopback"))
    assert rc == 0, out[-4000:]
    state = read_state(tmp_path / "api")
    assert state["last_completed_round"] == 2
    assert out.count("actor is frozen (train: false): skipping its training this round") == 2
    assert all(row["actor/loss"] is None for row in state["table"])  # never trained
    assert (tmp_path / "api" / "checkpoints" / "round_00002" / "planner").is_dir()
    assert not (tmp_path / "api" / "checkpoints" / "round_00002" / "actor").exists()
    completions = [r for r in srv.requests if r["path"] == "/v1/completions"]
    assert completions and all(r["body"]["model"] == "tiny-actor" for r in completions)
    assert {r["body"]["temperature"] for r in completions} >= {0.0, 1.0}  # rollouts sample, greedy eval does not
    assert "sk-loopback" not in out


def test_api_key_from_a_prefect_secret_block(prefect_api, monkeypatch):
    from prefect.blocks.system import Secret

    from flows.runtime import load_api_secrets
    from planact.config import check_runtime, load_config

    Secret(value="sk-from-block").save("planact-test-key", overwrite=True)
    monkeypatch.delenv("PLANACT_TEST_KEY", raising=False)
    cfg = load_config(SMOKE, ["actor.engine=anthropic", "actor.train=false", "actor.anthropic.api_key_env=PLANACT_TEST_KEY",
                              "actor.anthropic.api_key_secret=planact-test-key"])
    check_runtime(cfg)  # a named secret satisfies the pre-flight check; the flow loads it
    assert load_api_secrets(cfg) == ["PLANACT_TEST_KEY"]
    assert os.environ["PLANACT_TEST_KEY"] == "sk-from-block"
    assert "sk-from-block" not in cfg.model_dump_json()  # the key never enters the config (or the UI form)
