"""MLflow Model Registry plumbing: names, URIs, registering a checkpoint into a local SQLite store and
loading it back as the same weights, and refusing a registered model that does not exist before work."""

from __future__ import annotations

import pytest
from safetensors.torch import load_file

from aflow_rl.config import LLMConfig
from aflow_rl.executor import ensure_planact_checkpoint
from planact.config import ConfigError, RunConfig
from planact.models import materialize_tiny
from planact.preflight import check_runtime
from planact.registry import (
    is_model_uri,
    model_version,
    register_checkpoint,
    registered_name,
    resolve_model,
)


def test_names_and_uris():
    cfg = RunConfig(run_name="demo")
    assert registered_name(cfg, "actor") == "demo-actor"
    cfg = RunConfig(run_name="demo", tracking={"model_names": {"planner": "my-planner"}})
    assert registered_name(cfg, "planner") == "my-planner" and registered_name(cfg, "actor") == "demo-actor"
    assert is_model_uri("models:/demo-actor/1") and not is_model_uri("runs/demo/checkpoints/round_00001/actor")
    with pytest.raises(ValueError, match="models:/<name>/<version-or-alias>"):
        model_version("models:/only-a-name")


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """A checkpoint folder with a tiny actor, registered twice over into a SQLite-backed registry."""
    root = tmp_path_factory.mktemp("registry")
    uri = f"sqlite:///{root / 'mlflow.db'}"
    cfg = RunConfig(run_name="reg", checkpoint={"root": str(root)}, tracking={"tracking_uri": uri})
    folder = root / "checkpoints" / "round_00003"
    materialize_tiny(cfg.actor.tiny, folder / "actor", seed=5)
    (folder / "actor" / "input_example.txt").write_text("12+34=")
    import os

    from mlflow import MlflowClient

    env = os.environ.get("MLFLOW_TRACKING_URI")
    run_id = MlflowClient(uri).create_run(MlflowClient(uri).create_experiment("reg")).info.run_id
    first = register_checkpoint(cfg, uri, run_id, folder, 3, {"pass@1": 0.5}, ["actor"])
    again = register_checkpoint(cfg, uri, run_id, folder, 3, {"pass@1": 0.5}, ["actor"])
    assert os.environ.get("MLFLOW_TRACKING_URI") == env  # registering left the process's tracking URI alone
    return cfg, uri, folder, first, again, root


def test_a_checkpoint_registers_once_with_its_tags(store):
    cfg, uri, folder, first, again, _ = store
    assert first == {"actor": 1} and again == {"actor": 1}  # a re-run does not register the same checkpoint twice
    from mlflow import MlflowClient

    v = MlflowClient(uri).get_model_version("reg-actor", "1")
    assert v.tags["heldout/pass_at_1"] == "0.5" and v.tags["planact.round"] == "3"
    assert v.tags["planact.checkpoint"] == str(folder)
    with pytest.raises(FileNotFoundError, match="planner: no saved model"):
        register_checkpoint(cfg, uri, "run", folder, 3, {}, ["planner"])


def test_a_registered_version_resolves_to_the_same_weights(store):
    cfg, uri, folder, _, _, root = store
    local = resolve_model("models:/reg-actor/latest", uri, cache_root=root / "cache")
    assert (local / "tokenizer.json").is_file()
    a, b = load_file(local / "model.safetensors"), load_file(folder / "actor" / "model.safetensors")
    assert a.keys() == b.keys() and all(a[k].equal(b[k]) for k in a)
    assert resolve_model(folder / "actor", uri) == folder / "actor"  # a folder stays a folder


def test_a_missing_registered_model_fails_before_any_work(store):
    cfg, uri, *_ = store
    bad = cfg.model_copy(update={"actor": cfg.actor.model_copy(update={"model_path": "models:/reg-actor/7"})})
    with pytest.raises(ConfigError, match=r"actor.model_path: models:/reg-actor/7 cannot be found"):
        check_runtime(bad)


def test_aflow_executor_takes_a_role_from_another_folder(store, tmp_path):
    *_, folder, _, _, root = store
    base = tmp_path / "ckpt"
    materialize_tiny(RunConfig().planner.tiny, base / "planner", seed=1)
    materialize_tiny(RunConfig().actor.tiny, base / "actor", seed=2)
    cfg = LLMConfig(checkpoint=str(base), actor_model=str(folder / "actor"))
    out = ensure_planact_checkpoint(cfg, tmp_path / "root")
    assert (out / "planner").resolve() == (base / "planner").resolve()
    assert (out / "actor").resolve() == (folder / "actor").resolve()
    assert ensure_planact_checkpoint(cfg, tmp_path / "root") == out  # assembled once
    with pytest.raises(FileNotFoundError, match="resolved by the flow"):
        ensure_planact_checkpoint(LLMConfig(actor_model="models:/reg-actor/1"), tmp_path / "root")
