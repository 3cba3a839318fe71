"""A run's tiny starting models are built once, in the driver, before any agent starts."""

from planact.config import load_config
from planact.workers import initial_model_path, prebuild_initial_models


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
