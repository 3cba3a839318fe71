"""A Plan/Act run whose actor role is an `openai` engine: frozen, served over HTTP, the planner trains.

The endpoint is a loopback OpenAI-compatible server (tests/servers/loopback.py; no internet here) that
answers with a real model: the HF engine over a tiny Llama built like the run's own actor.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import threading
import uuid
from pathlib import Path

import pytest

from planact.config import RunConfig
from planact.engines.base import SamplingParams
from planact.engines.hf import HFEngine
from planact.models import load_model, materialize_tiny

from ..servers.loopback import openai_server
from .conftest import SMOKE, cli_env, read_state, run_cli, smoke_args


def hf_answer(model_dir):
    """An `Answer` for the loopback server: sample from the HF engine with the request's settings."""
    model, tok = load_model(model_dir)
    engine = HFEngine(model, tok, name="served")
    lock = threading.Lock()  # one generation at a time in the server's threads

    def answer(prompt: str, n: int, body: dict):
        params = SamplingParams(
            temperature=float(body.get("temperature", 1.0)),
            top_p=float(body.get("top_p", 1.0)),
            max_new_tokens=int(body.get("max_tokens", 16)),
            n=n,
            seed=body.get("seed"),
        )
        with lock:
            (group,) = engine.generate([prompt], params)
        return [(c.text, c.finish_reason, c.logprobs) for c in group]

    return answer


def _prefect_records(api: str) -> str:
    """Everything the Prefect server holds about runs, as text: flow/task runs (parameters), logs, artifacts."""
    import httpx

    out = []
    with httpx.Client(base_url=api, timeout=30) as client:
        for what in ("flow_runs", "task_runs", "logs", "artifacts"):
            offset = 0
            while True:
                page = client.post(f"/{what}/filter", json={"limit": 200, "offset": offset}).json()
                out.append(json.dumps(page))
                if len(page) < 200:
                    break
                offset += 200
    return "\n".join(out)


def _files_holding(root: Path, needle: bytes) -> list[str]:
    """Files under `root` whose bytes contain `needle` (sqlite databases, artifacts, logs, checkpoints)."""
    hits = []
    for f in [root] if root.is_file() else root.rglob("*"):
        if f.is_file() and not f.is_symlink():
            try:
                if needle in f.read_bytes():
                    hits.append(str(f))
            except OSError:
                pass
    return hits


@pytest.mark.slow
def test_run_with_a_frozen_openai_actor_trains_only_the_planner_and_leaks_no_key(prefect_api, tmp_path):
    """A frozen API actor; its key comes from a Prefect Secret block, other keys sit in the environment.
    Neither canary may appear anywhere the run writes: MLflow (params, tags, metrics, artifacts: the
    SQLite store and the artifact folder), the run folder (checkpoints, state, experience, telemetry),
    the console and Prefect's logs, the Prefect server's runs/parameters/logs/artifacts, Ray's logs."""
    from prefect.blocks.system import Secret

    block_key = f"sk-canary-block-{uuid.uuid4().hex}"
    env_key = f"sk-canary-env-{uuid.uuid4().hex}"
    Secret(value=block_key).save("planact-canary", overwrite=True)
    ray_tmp = Path(tempfile.mkdtemp(prefix="rc", dir="/tmp"))  # short: Ray's socket paths have a length limit
    actor_spec = RunConfig().actor.tiny
    served = materialize_tiny(actor_spec, tmp_path / "served-actor", seed=2)
    env = cli_env(OPENAI_API_KEY=env_key, ANTHROPIC_API_KEY=env_key, HF_TOKEN=env_key, RAY_TMPDIR=str(ray_tmp))
    env.pop("LOOPBACK_KEY", None)  # only the Secret block can provide it
    try:
        with openai_server(hf_answer(served), key=block_key) as srv:
            rc, out = run_cli(
                smoke_args(
                    tmp_path,
                    "run_name=api",
                    "actor.engine=openai",
                    "actor.train=false",
                    f"actor.openai.base_url={srv.url}/v1",
                    "actor.openai.model=tiny-actor",
                    "actor.openai.mode=completions",
                    "actor.openai.api_key_env=LOOPBACK_KEY",
                    "actor.openai.api_key_secret=planact-canary",
                ),
                tmp_path / "cli.log",
                env=env,
            )
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

        # The canaries: the block's key was really used (the server refuses any other) ...
        assert completions and (tmp_path / "mlflow.db").is_file() and list(ray_tmp.rglob("*.log"))
        # ... and is nowhere a run writes; neither is the environment's.
        prefect_text = _prefect_records(prefect_api)
        # Positive controls: the same searches do find what the run did write (the config's model name).
        assert "tiny-actor" in prefect_text and _files_holding(tmp_path / "mlflow.db", b"tiny-actor")
        for canary in (block_key, env_key):
            assert canary not in out
            assert _files_holding(tmp_path, canary.encode()) == []
            assert _files_holding(ray_tmp, canary.encode()) == []
            assert canary not in prefect_text
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)


def test_sandboxed_code_never_sees_the_keys(monkeypatch):
    """Model-written code runs with an allow-listed environment and its own /proc: no key reaches it,
    not through os.environ and not through any process's /proc/<pid>/environ."""
    import sandbox

    canary = f"sk-canary-{uuid.uuid4().hex}"
    for var in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "LOOPBACK_KEY", "HF_TOKEN", "PLANACT_ANYTHING"):
        monkeypatch.setenv(var, canary)
    probe = (
        "import os, glob\n"
        "print(dict(os.environ))\n"
        "for p in glob.glob('/proc/*/environ'):\n"
        "    try: print(p, open(p, 'rb').read())\n"
        "    except OSError as e: print(p, e)\n"
    )
    res = sandbox.run([sys.executable, "-c", probe])
    assert res.status == "ok" and "/proc/" in res.stdout and not res.truncated, res
    assert canary not in res.stdout + res.stderr


def test_api_key_from_a_prefect_secret_block(prefect_api, monkeypatch):
    from prefect.blocks.system import Secret

    from flows.runtime import load_api_secrets
    from planact.config import load_config
    from planact.preflight import check_runtime

    Secret(value="sk-from-block").save("planact-test-key", overwrite=True)
    monkeypatch.delenv("PLANACT_TEST_KEY", raising=False)
    cfg = load_config(
        SMOKE,
        [
            "actor.engine=anthropic",
            "actor.train=false",
            "actor.anthropic.api_key_env=PLANACT_TEST_KEY",
            "actor.anthropic.api_key_secret=planact-test-key",
        ],
    )
    check_runtime(cfg)  # a named secret satisfies the pre-flight check; the flow loads it
    assert load_api_secrets(cfg) == ["PLANACT_TEST_KEY"]
    assert os.environ["PLANACT_TEST_KEY"] == "sk-from-block"
    assert "sk-from-block" not in cfg.model_dump_json()  # the key never enters the config (or the UI form)
