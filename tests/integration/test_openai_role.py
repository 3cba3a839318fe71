"""API keys: model-written code never sees them; a Prefect Secret block supplies one.

(The run with a frozen OpenAI-engine actor, and the search for its keys everywhere a run writes, is the
resumed run of test_resume.py since 2026-11-30: one whole run less.)
"""

from __future__ import annotations

import os
import sys
import uuid

from .api_actor import save_secret
from .conftest import SMOKE


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
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from flows.runtime import load_api_secrets
    from planact.config import load_config
    from planact.preflight import check_runtime

    save_secret(prefect_api, "planact-test-key", "sk-from-block")
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
    with temporary_settings(updates={PREFECT_API_URL: prefect_api}):  # the server named (see save_secret)
        assert load_api_secrets(cfg) == ["PLANACT_TEST_KEY"]
    assert os.environ["PLANACT_TEST_KEY"] == "sk-from-block"
    assert "sk-from-block" not in cfg.model_dump_json()  # the key never enters the config (or the UI form)
