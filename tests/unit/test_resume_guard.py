"""The resume guard: fields that shape a run's checkpoint or data may not change on resume; the rest may."""

from __future__ import annotations

import re

import pytest
import yaml

from planact import plugins
from planact.config import ConfigError, flatten, load_config
from planact.resume import ResumeRefused, check_resume, config_changes, shapes_run


def _stored(tmp_path, overrides=()):
    cfg = load_config(None, list(overrides))
    (tmp_path / "config.resolved.yaml").write_text(yaml.safe_dump(cfg.model_dump(), sort_keys=False))
    return cfg


def test_shaping_fields_are_refused_by_name(tmp_path):
    _stored(tmp_path)
    changed = load_config(
        None, ["actor.tiny.hidden_size=128", "env.max_len=9", "planner.rl.lr=1e-3", "seed=7", "actor.train=false"]
    )
    with pytest.raises(ResumeRefused) as err:
        check_resume(tmp_path, changed.model_dump())
    msg = str(err.value)
    for field in (
        "actor.tiny.hidden_size: 64 -> 128",
        "env.max_len: 7 -> 9",
        "planner.rl.lr",
        "seed: 0 -> 7",
        "actor.train: True -> False",
    ):
        assert field in msg
    assert isinstance(err.value, ConfigError)  # the CLI prints it as a config error, exit 2


def test_safe_changes_are_allowed_and_listed(tmp_path):
    _stored(tmp_path)
    more = load_config(
        None,
        [
            "rounds=99",
            "tracking.eval_every=3",
            "actor.resources.replicas=2",
            "tracking.tracking_uri=http://127.0.0.1:5999",
        ],
    )
    allowed = check_resume(tmp_path, more.model_dump())
    assert any(a.startswith("rounds:") for a in allowed) and any("eval_every" in a for a in allowed)
    assert any("actor.resources.replicas: 1 -> 2" == a for a in allowed)
    assert check_resume(tmp_path, load_config(None, []).model_dump()) == []  # unchanged: nothing to say
    assert check_resume(tmp_path / "fresh", more.model_dump()) == []  # no stored config: a new run


def test_what_may_change_is_an_allow_list():
    assert shapes_run("planner.train") and shapes_run("actor.rl.lr") and shapes_run("env.repair.corpus")
    assert not shapes_run("planner.resources.trainer_workers") and not shapes_run("rounds")
    assert not shapes_run("planner.warm_start.steps")  # already ran: changing it changes nothing
    # LoRA adapters shape the checkpoint: a resume that turned them on or resized them was let through.
    assert shapes_run("actor.lora.enabled") and shapes_run("planner.lora.rank")
    # A remote model's endpoint may move; the model, its stop words and system prompt may not change.
    assert not shapes_run("planner.openai.base_url") and shapes_run("planner.openai.model")
    # Its prices only change what the run's cost reads (they sit in a `prices` section: the allow-list named them
    # one level up, so a changed price was refused while the docs said it may change).
    assert not shapes_run("actor.anthropic.prices.output_per_mtok")
    assert not shapes_run("planner.openai.prices.input_per_mtok")
    assert shapes_run("actor.anthropic.system_prompt")
    # A field nobody has declared safe (a new one, or a name that only starts like an allowed one) is refused.
    assert shapes_run("a_new_field") and shapes_run("roundsx") and shapes_run("tracking")
    refused, allowed = config_changes({"rounds": 1, "seed": 1}, {"rounds": 2, "seed": 1, "a": {"b": 2}})
    assert refused == ["a.b: None -> 2"] and allowed == ["rounds: 1 -> 2"]


def test_a_changed_lora_setting_is_refused_on_resume(tmp_path):
    _stored(tmp_path)
    with pytest.raises(ResumeRefused, match=r"actor.lora.rank: 8 -> 16"):
        check_resume(tmp_path, load_config(None, ["actor.lora.rank=16"]).model_dump())


def test_a_run_stored_before_a_field_was_renamed_resumes():
    # env.repair.test_timeout_s became test_cpu_s (it is a CPU-seconds limit); the rename alone refuses nothing,
    # while a changed value under either name is still refused.
    old = {"env": {"repair": {"test_timeout_s": 30.0}}}
    assert config_changes(old, {"env": {"repair": {"test_cpu_s": 30.0}}}) == ([], [])
    refused, _ = config_changes(old, {"env": {"repair": {"test_cpu_s": 5.0}}})
    assert refused == ["env.repair.test_cpu_s: 30.0 -> 5.0"]


def test_a_run_stored_before_the_aflow_hook_moved_resumes():
    # aflow.max_rounds etc. became the hook's embedded AFlow config's (aflow.optimise...): read under the new
    # paths, an unchanged value shows no change, and the section stays one that may change.
    old = {"aflow": {"every_rounds": 0, "max_rounds": 3, "policy": True}}
    new = {"aflow": {"every_rounds": 0, "optimise": {"search": {"max_rounds": 3}, "policy": {"enabled": True}}}}
    assert config_changes(old, new) == ([], [])
    new["aflow"]["optimise"]["search"]["max_rounds"] = 5
    assert config_changes(old, new) == ([], ["aflow.optimise.search.max_rounds: 3 -> 5"])


# Every field a resume may change today, a role's once (`<role>.` stands for planner and actor). MAY_CHANGE
# admits whole sections by prefix (`ray.`, `<role>.resources.`, ...), so a field added to one of them later
# would be let through unexamined: this list is where someone says it is safe.
DECLARED_SAFE = {
    "": "rounds run_name",
    "<role>.anthropic": "api_key_env api_key_secret api_version base_url concurrency max_retries timeout_s",
    "<role>.anthropic.prices": "input_per_mtok output_per_mtok",
    "<role>.openai": "api_key_env api_key_secret base_url concurrency max_retries timeout_s",
    "<role>.openai.prices": "input_per_mtok output_per_mtok",
    "<role>.resources": "attention colocate_trainer custom device fsdp memory_mb num_cpus num_gpus replicas "
    "torch_threads trainer_placement trainer_timeout_s trainer_workers",
    "<role>.sglang": "concurrency extra_args host launch_command max_restarts mem_fraction_static request_timeout_s "
    "startup_timeout_s tp weights_dir",
    "<role>.warm_start": "batch_size enabled eval_every final_lr_ratio heldout lr micro_batch_size min_delta packed "
    "patience steps warmup_steps",
    "barrier": "fallback_on_timeout liveness_s namespace timeout_s",
    "checkpoint": "every root",
    "pipeline": "max_staleness",
    "ray": "address agent_ready_timeout_s agent_stages num_cpus runtime_env task_num_cpus",
    "tracking": "eval_every eval_samples experiment register_models rollout_rows tracking_uri",
    "tracking.model_names": "actor planner",
}


def test_every_field_a_resume_may_change_was_declared_safe():
    # A plug-in section that declares itself free to change (the AFlow hook) is its owner's call, not listed here.
    plugin_owned = tuple(
        f"{path}." for path, model in plugins.installed().items() if getattr(model, "resume_may_change", False)
    )
    may_change = set()
    for key in flatten(load_config(None, []).model_dump()):
        if shapes_run(key) or key.startswith(plugin_owned):
            continue
        key = re.sub(r"^(planner|actor)\.", "<role>.", key)
        may_change.add(key)
    declared = {
        f"{section}.{leaf}" if section else leaf for section, leaves in DECLARED_SAFE.items() for leaf in leaves.split()
    }
    assert may_change - declared == set(), (
        "a resume may change these fields, which nobody declared safe (a field added under a section that "
        "planact.resume.MAY_CHANGE admits by prefix): if it shapes the checkpoint or the data, list that section's "
        "safe fields one by one in MAY_CHANGE instead of its prefix; if not, add it to DECLARED_SAFE"
    )
    assert declared - may_change == set()  # a field renamed or now refused: the list follows
