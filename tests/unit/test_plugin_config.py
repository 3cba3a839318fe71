"""Plug-ins own their config sections: planact builds `env.<kind>` and its top-level sections from entry points."""

from __future__ import annotations

import pickle
import subprocess
import sys

import pytest

from aflow_rl.config import AFlowConfig
from aflow_rl.hook import AFlowHookConfig
from graph_planner.corpus.mutate import TOKEN_LEVEL
from graph_planner.env_config import TOKEN_KINDS, RepairEnvConfig
from planact import plugins
from planact.config import ConfigError, RunConfig, load_config


def test_installed_sections_build_the_run_config():
    assert plugins.sections("env") == {"repair": RepairEnvConfig}
    assert plugins.sections() == {"aflow": AFlowHookConfig}
    assert set(plugins.env_kinds()) == {"synthetic", "repair"}
    schema = RunConfig.model_json_schema()  # the Prefect parameter form
    env = schema["$defs"]["EnvConfig"]["properties"]
    assert env["kind"]["enum"] == ["repair", "synthetic"] and list(env)[0] == "kind"
    assert "repair" in env and "aflow" in schema["properties"]
    cfg = RunConfig()
    assert cfg.env.settings() is None and cfg.plugin_sections() == [cfg.aflow]
    assert pickle.loads(pickle.dumps(cfg)) == cfg  # Ray ships it to the workers


def test_repair_section_keeps_its_paths_and_one_definition():
    cfg = load_config(None, ["env.kind=repair", "env.repair.test_cpu_s=5", "env.repair.kinds=[binop]"])
    assert cfg.env.settings() is cfg.env.repair and cfg.env.repair.test_cpu_s == 5.0
    assert TOKEN_KINDS is TOKEN_LEVEL and RunConfig().env.repair.kinds == list(TOKEN_LEVEL)
    with pytest.raises(ConfigError, match="env.kind"):
        load_config(None, ["env.kind=teleport"])
    with pytest.raises(ConfigError, match="env.repair.workers"):
        load_config(None, ["env.repair.workers=0"])
    with pytest.raises(ConfigError, match="env.repair.nope"):
        load_config(None, ["env.repair.nope=1"])
    # the section's cross-section rule runs for a repair run only
    load_config(None, ["planner.engine=openai", "planner.train=false"])
    with pytest.raises(ConfigError, match="planner.engine must be 'hf'"):
        load_config(None, ["env.kind=repair", "planner.engine=openai", "planner.train=false"])


def test_aflow_hook_defaults_once_and_fills_the_run():
    hook = RunConfig().aflow
    assert hook.every_rounds == 0 and not hook.due(3)
    assert (hook.optimise.search.max_rounds, hook.optimise.limit, hook.optimise.task_runner) == (3, 20, "threads")
    assert hook.optimise.policy == AFlowConfig().policy  # every other default is AFlowConfig's
    # setting one field of the search keeps the hook's other defaults
    cfg = load_config(None, ["aflow.every_rounds=2", "aflow.optimise.search.validation_repeats=1"])
    assert (cfg.aflow.optimise.search.max_rounds, cfg.aflow.optimise.search.validation_repeats) == (3, 1)
    assert cfg.aflow.due(4) and not cfg.aflow.due(3)
    run = cfg.aflow.search_config(cfg, 4, "/ck/round_4", "/runs/demo/aflow", "sqlite:///m.db")
    assert (run.run_name, run.seed, run.root, run.executor.checkpoint) == (
        "demo-aflow-r4",
        0,
        "/runs/demo/aflow",
        "/ck/round_4",
    )
    assert run.tracking.experiment == "planact" and run.search.max_rounds == 3
    assert RunConfig.model_validate(cfg.model_dump()) == cfg  # a validated config re-validates (the flow does)
    with pytest.raises(ConfigError, match="aflow.optimise.seed is filled from the Plan/Act run"):
        load_config(None, ["aflow.optimise.seed=3"])
    with pytest.raises(ConfigError, match="aflow.optimise.search.max_rounds"):
        load_config(None, ["aflow.optimise.search.max_rounds=0"])
    with pytest.raises(ConfigError, match="multiple of checkpoint.every"):
        load_config(None, ["aflow.every_rounds=3", "checkpoint.every=2"])
    # a setting the hook held before its search became an AFlow config points to its new place
    with pytest.raises(ConfigError, match=r"aflow.max_rounds is now aflow.optimise.search.max_rounds"):
        load_config(None, ["aflow.max_rounds=2"])


def test_sections_declare_their_resume_rules():
    from planact.resume import MOVED, shapes_run

    assert not shapes_run("aflow.every_rounds") and not shapes_run("aflow.optimise.search.max_rounds")
    assert shapes_run("env.repair.test_cpu_s")  # a repair setting shapes the run
    assert MOVED["env.repair.test_timeout_s"] == "env.repair.test_cpu_s"
    assert MOVED["aflow.policy"] == "aflow.optimise.policy.enabled"


def test_planact_loads_plug_ins_only_through_entry_points():
    # importing planact's run config pulls the plug-ins' config modules in, and nothing heavier of them
    code = (
        "import sys, planact.config; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('graph_planner', 'aflow_rl')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    loaded = set(eval(out.stdout))  # noqa: S307 - our own printed list
    assert loaded <= {
        "graph_planner",
        "graph_planner.env_config",
        "graph_planner.corpus",
        "graph_planner.corpus.mutate",
        "graph_planner.pyparse",
        "aflow_rl",
        "aflow_rl.config",
        "aflow_rl.hook",
    }, loaded
