"""An OpenAI-compatible actor for runs in the tests, and searches for leaked keys.

The endpoint is a loopback OpenAI-compatible server (tests/servers/loopback.py; no internet here) that
answers with a real model: the HF engine over a tiny Llama.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

from planact.engines.base import SamplingParams
from planact.engines.hf import HFEngine
from planact.models import load_model


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


def prefect_records(api: str) -> str:
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


def files_holding(root: Path, needle: bytes) -> list[str]:
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


def save_secret(api: str, name: str, value: str) -> None:
    """Save a Prefect Secret block on the server at `api` (named, not taken from this process's settings: a
    worker whose Prefect settings were read before the server's URL was exported starts an ephemeral server,
    which timed out under a loaded suite run)."""
    from prefect.blocks.system import Secret
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with temporary_settings(updates={PREFECT_API_URL: api}):
        Secret(value=value).save(name, overwrite=True)
