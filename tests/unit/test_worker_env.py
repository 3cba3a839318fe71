"""What the run's Ray workers are given as runtime_env: nothing they would inherit anyway from a private Ray."""

from __future__ import annotations

from planact.config import load_config
from planact.ray_setup import worker_runtime_env


def test_a_private_ray_passes_no_env_vars_its_workers_inherit(monkeypatch):
    monkeypatch.setenv("PREFECT_API_URL", "http://127.0.0.1:4200/api")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    local = load_config(None, ["ray.runtime_env={'env_vars': {'OPENAI_API_KEY': '${OPENAI_API_KEY}'}}"])
    # Every value equals the driver's own: a runtime_env here would only start each worker through an
    # extra interpreter.
    assert worker_runtime_env(local, {"PREFECT_API_URL": "http://127.0.0.1:4200/api"}) is None
    # A value the driver does not have still reaches the workers, beside the rest of the configured env.
    cfg = load_config(None, ["ray.runtime_env={'env_vars': {'MODE': 'fast'}, 'working_dir': '.'}"])
    assert worker_runtime_env(cfg, {"PREFECT_API_URL": "http://127.0.0.1:4200/api"}) == {
        "working_dir": ".",
        "env_vars": {"MODE": "fast"},
    }


def test_a_joined_cluster_gets_every_variable_its_workers_need(monkeypatch):
    monkeypatch.setenv("PREFECT_API_URL", "http://127.0.0.1:4200/api")
    cfg = load_config(None, ["ray.address=auto"])
    # Workers on other nodes do not share this process's environment.
    assert worker_runtime_env(cfg, {"PREFECT_API_URL": "http://127.0.0.1:4200/api"}) == {
        "env_vars": {"PREFECT_API_URL": "http://127.0.0.1:4200/api"}
    }
