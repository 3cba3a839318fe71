"""Config: defaults valid, bad values fail naming the field, overrides and YAML work."""

from pathlib import Path

import pytest

from aflow_rl.config import AFlowConfig, load_aflow_config
from graph_planner.config import load_repair_config
from graph_planner.corpus.history_spec import load_history_config
from graph_planner.corpus.spec import load_corpus_config
from planact.config import ConfigError, RunConfig, flatten, load_config

ROOT = Path(__file__).resolve().parents[2]


def test_defaults_and_shipped_configs_validate():
    cfg = RunConfig()
    # configs/demo.yaml spells out the embedded defaults: a partial config (a deployment parameter, a
    # notebook's dict) therefore always means "the demo, except ...".
    assert flatten(load_config(ROOT / "configs" / "demo.yaml")) == flatten(cfg)
    assert cfg.planner.tiny.hidden_size > cfg.actor.tiny.hidden_size  # planner larger than actor by default
    shipped = sorted(p.name for p in (ROOT / "configs").glob("*.yaml"))
    assert {
        "demo.yaml",
        "smoke.yaml",
        "gpu-sglang.yaml",
        "api-openai.yaml",
        "api-anthropic.yaml",
        "aflow-demo.yaml",
        "aflow-openai.yaml",
        "aflow-anthropic.yaml",
        "repair-demo.yaml",
        "repair-smoke.yaml",
        "repair-gpu.yaml",
    } <= set(shipped)
    loaders = {
        "aflow-": load_aflow_config,
        "repair-eval": load_repair_config,
        "repair-corpus": load_corpus_config,
        "repair-rl-corpus": load_corpus_config,
        "repair-history": load_history_config,
    }
    for name in shipped:  # AFlow configs are AFlowConfig, repair-* the code-repair configs, the rest RunConfig
        load = next((f for prefix, f in loaders.items() if name.startswith(prefix)), load_config)
        load(ROOT / "configs" / name)
    # the repair-evaluate deployment's default is the shipped repair-eval.yaml; the corpus has 8 packages
    assert load_repair_config(ROOT / "configs" / "repair-eval.yaml").split == "heldout"
    corpus = load_corpus_config(ROOT / "configs" / "repair-corpus.yaml")
    assert len(corpus.packages) >= 6 and {p.split for p in corpus.packages} == {"train", "heldout"}
    assert all(len(p.sha256) == 64 for p in corpus.packages)


def test_repair_configs_name_the_bad_field(tmp_path):
    with pytest.raises(ConfigError, match="episode.test_runs"):
        load_repair_config(None, ["episode.test_runs=-1"])
    bad = tmp_path / "corpus.yaml"
    bad.write_text("packages:\n  - {name: x, version: '1', sha256: nothex}\n")
    with pytest.raises(ConfigError, match="packages.0.sha256"):
        load_corpus_config(bad)
    bad.write_text("kinds: [teleport]\npackages: []\n")
    with pytest.raises(ConfigError, match="kinds"):
        load_corpus_config(bad)
    # configs/aflow-demo.yaml is the aflow-optimize deployment's default: the embedded AFlowConfig().
    assert load_aflow_config(ROOT / "configs" / "aflow-demo.yaml") == AFlowConfig()


def test_every_sdist_pin_follows_one_rule():
    # A dependency is always pinned; a corpus package or a release may leave the pin empty (a local folder or an
    # unpinned trial); a pin given anywhere is 64 lowercase hex digits, with the same message.
    from graph_planner.corpus.history_spec import Release
    from graph_planner.corpus.spec import PackageRef, PackageSpec

    pin = "0123456789abcdef" * 4
    for model, fields in (
        (PackageRef, {"name": "x", "version": "1"}),
        (PackageSpec, {"name": "x", "version": "1"}),
        (Release, {"version": "1"}),
    ):
        assert model(**fields, sha256=pin).sha256 == pin
        for bad in (pin.upper(), pin[:-1], "nothex"):
            with pytest.raises(ValueError, match="a sha256 is 64 lowercase hex digits"):
                model(**fields, sha256=bad)
    assert PackageSpec(name="x", version="1").sha256 == Release(version="1").sha256 == ""
    with pytest.raises(ValueError, match="a sha256 is 64 lowercase hex digits"):
        PackageRef(name="x", version="1", sha256="")


def test_invalid_value_names_the_field():
    with pytest.raises(ConfigError, match=r"rounds"):
        load_config(None, ["rounds=-3"])
    with pytest.raises(ConfigError, match=r"planner\.rl\.lr"):
        load_config(None, ["planner.rl.lr=0"])


def test_unknown_key_is_rejected_with_its_path():
    with pytest.raises(ConfigError, match=r"actor\.sampling\.temprature"):
        load_config(None, ["actor.sampling.temprature=0.5"])


def test_cross_field_rules():
    with pytest.raises(ConfigError, match="min_ops"):
        load_config(None, ["env.min_ops=3", "env.max_ops=2"])
    with pytest.raises(ConfigError, match="divisible"):
        load_config(None, ["planner.tiny.hidden_size=30", "planner.tiny.num_heads=4"])
    with pytest.raises(ConfigError, match="run_name"):
        load_config(None, ["run_name=../escape"])
    # FSDP shards a trainer group: it needs one, and its KL reference is not sharded.
    with pytest.raises(ConfigError, match=r"actor.*trainer_workers >= 2"):
        load_config(None, ["actor.resources.fsdp=true"])
    with pytest.raises(ConfigError, match=r"planner.*kl_coef"):
        load_config(
            None, ["planner.resources.fsdp=true", "planner.resources.trainer_workers=2", "planner.rl.kl_coef=0.1"]
        )
    assert load_config(None, ["actor.resources.fsdp=true", "actor.resources.trainer_workers=2"]).actor.resources.fsdp
    # A packed row under a dense mask costs the square of its length: packing asks for varlen attention.
    with pytest.raises(ConfigError, match=r"actor.*rl.packed needs resources.attention: varlen"):
        load_config(None, ["actor.rl.packed=true", "actor.resources.attention=eager"])
    with pytest.raises(ConfigError, match=r"planner.*warm_start.packed needs resources.attention: varlen"):
        load_config(None, ["planner.warm_start.packed=true", "planner.resources.attention=sdpa"])
    assert load_config(None, ["actor.rl.packed=true"]).actor.attention_kernel == "varlen"  # auto picks it
    # Pipelined rounds train while the engines generate: a trainer sharing an engine's weights is refused.
    with pytest.raises(ConfigError, match=r"planner.resources.colocate_trainer must be false"):
        load_config(None, ["pipeline.max_staleness=1"])
    for value in (2, 3):  # only what is built is admitted: 0 or 1
        with pytest.raises(ConfigError, match="pipeline.max_staleness"):
            load_config(None, [f"pipeline.max_staleness={value}"])
    apart = ["planner.resources.colocate_trainer=false", "actor.resources.colocate_trainer=false"]
    assert load_config(None, ["pipeline.max_staleness=1", *apart]).pipeline.max_staleness == 1


def test_a_partial_role_section_keeps_that_roles_defaults():
    # Setting one field of a role must not swap the role's other defaults for another role's.
    base = load_config(None, [])
    one = load_config(None, ["actor.resources.replicas=2", "planner.resources.torch_threads=2"])
    assert one.actor.tiny == base.actor.tiny and one.actor.group_size == base.actor.group_size
    assert one.planner.group_size == base.planner.group_size and one.planner.rl.lr == base.planner.rl.lr
    assert one.actor.resources.replicas == 2 and one.planner.resources.torch_threads == 2


def test_overrides_parse_yaml_scalars_and_nest():
    cfg = load_config(
        ROOT / "configs" / "demo.yaml",
        ["rounds=4", "planner.rl.lr=1e-5", "ray.address=auto", "barrier.fallback_on_timeout=false"],
    )
    assert cfg.rounds == 4 and cfg.planner.rl.lr == 1e-5 and cfg.ray.address == "auto"
    assert cfg.barrier.fallback_on_timeout is False


def test_missing_file_and_bad_override_syntax():
    with pytest.raises(ConfigError, match="not found"):
        load_config("nope.yaml")
    with pytest.raises(ConfigError, match="key.path=value"):
        load_config(None, ["rounds"])


def test_flatten_gives_dotted_params():
    flat = flatten(RunConfig())
    assert flat["planner.rl.eps_clip"] == 0.2
    assert "barrier.timeout_s" in flat


def test_api_engine_roles_must_be_frozen_and_find_their_key(monkeypatch):
    from planact.preflight import check_runtime

    with pytest.raises(ConfigError, match=r"actor.*cannot be trained: set train: false"):
        load_config(None, ["actor.engine=openai"])
    cfg = load_config(None, ["actor.engine=anthropic", "actor.train=false"])
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(ConfigError, match=r"actor\.anthropic\.api_key_env: \$ANTHROPIC_API_KEY is not set"):
        check_runtime(cfg)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    check_runtime(cfg)
    check_runtime(load_config(None, ["actor.engine=openai", "actor.train=false", "actor.openai.api_key_env=''"]))


def test_secrets_never_sit_in_a_config_and_are_masked_where_they_slip_through():
    import pytest

    from planact.config import ConfigError, load_config
    from planact.secrets import redact
    from planact.tracking import safe_params

    with pytest.raises(ConfigError, match=r"ray.runtime_env.env_vars.OPENAI_API_KEY.*\$\{OPENAI_API_KEY\}"):
        load_config(None, ["ray.runtime_env={'env_vars': {'OPENAI_API_KEY': 'sk-live-123'}}"])
    with pytest.raises(ConfigError, match="tracking.tracking_uri: the URL holds a password"):
        load_config(None, ["tracking.tracking_uri=http://alice:pw123@127.0.0.1:5000"])
    cfg = load_config(None, ["ray.runtime_env={'env_vars': {'OPENAI_API_KEY': '${OPENAI_API_KEY}', 'MODE': 'fast'}}"])
    params = safe_params(cfg)
    assert params["planner.sampling.max_new_tokens"] == str(cfg.planner.sampling.max_new_tokens)  # not a secret
    assert params["ray.runtime_env.env_vars.MODE"] == "***"  # env_vars values never reach MLflow
    assert params["ray.runtime_env.env_vars.OPENAI_API_KEY"] == "***"
    assert redact({"uri": "postgresql://u:secretpw@db/x"}) == {"uri": "postgresql://***@db/x"}


def test_the_agents_ready_timeout_reaches_the_scheduler_and_is_validated(monkeypatch, tmp_path):
    """A loaded machine or a large model needs longer than 120 s to build an agent: the run config says so."""
    import planact.agents as agents

    seen = {}
    monkeypatch.setattr(agents, "Scheduler", lambda **kw: seen.update(kw) or "scheduler")
    cfg = load_config(None, ["ray.address=auto", "ray.agent_ready_timeout_s=300", f"checkpoint.root={tmp_path}"])
    assert agents.scheduler_for(cfg) == "scheduler" and seen["ready_timeout_s"] == 300.0
    with pytest.raises(ConfigError, match="ray.agent_ready_timeout_s"):
        load_config(None, ["ray.agent_ready_timeout_s=0"])


def test_the_repair_smollm_deployment_runs_exactly_its_config_file():
    """prefect.yaml's repair-smollm deployment repeats configs/repair-smollm.yaml as its parameters (a
    deployment cannot point at a file): the two must not drift apart."""
    from pathlib import Path

    import yaml

    from planact.config import load_config, validate_config

    root = Path(__file__).resolve().parents[2]
    deployments = {d["name"]: d for d in yaml.safe_load((root / "prefect.yaml").read_text())["deployments"]}
    params = deployments["repair-smollm"]["parameters"]["config"]
    assert validate_config(params) == load_config(root / "configs" / "repair-smollm.yaml")


def test_an_episodes_limits_are_its_config_with_a_memory_budget():
    # EnvLimits declares no setting of its own beside the working memory's: a new episode setting reaches the
    # environment without a second declaration, with its one default.
    from graph_planner.env import EnvLimits
    from graph_planner.env_config import EpisodeConfig
    from graph_planner.graph import Budget

    assert set(EnvLimits.model_fields) == set(EpisodeConfig.model_fields) | {"memory"}
    assert EnvLimits().model_dump(exclude={"memory"}) == EpisodeConfig().model_dump()
    limits = EnvLimits.from_episode(EpisodeConfig(test_cpu_s=5, steps=3), memory=Budget(nodes=2))
    assert (limits.test_cpu_s, limits.steps, limits.memory.nodes) == (5, 3, 2)
    with pytest.raises(ValueError, match="steps"):
        limits.steps = 0  # the episode config's bounds hold for the limits too


def test_an_mlflow_file_store_is_refused_before_any_work_naming_the_field(monkeypatch):
    """MLflow 3 raises on its file store only when the run opens it (after Prefect and Ray start): the config
    refuses `file:` URIs and bare paths first; a database or a server is taken, and MLflow's own opt-out works."""
    import pytest

    from planact.config import ConfigError, load_config

    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE", raising=False)
    for uri in ("file:///tmp/mlruns", "./mlruns", "/tmp/mlruns"):
        with pytest.raises(ConfigError, match=r"tracking.tracking_uri: .*file store.*sqlite:///"):
            load_config(None, [f"tracking.tracking_uri={uri}"])
    for uri in ("sqlite:////tmp/mlflow.db", "http://127.0.0.1:5000"):
        assert load_config(None, [f"tracking.tracking_uri={uri}"]).tracking.tracking_uri == uri
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    assert load_config(None, ["tracking.tracking_uri=./mlruns"]).tracking.tracking_uri == "./mlruns"


def test_a_file_store_named_by_the_environment_is_refused_before_the_run_starts(monkeypatch):
    """With tracking.tracking_uri empty the run uses $MLFLOW_TRACKING_URI: a file store there is refused by the
    pre-flight (which the CLI runs before it starts a Prefect server), naming the variable; a database is taken."""
    import pytest

    from planact.config import ConfigError, load_config
    from planact.preflight import check_runtime

    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE", raising=False)
    cfg = load_config(None, [])
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "file:///tmp/mlruns")
    with pytest.raises(ConfigError, match=r"\$MLFLOW_TRACKING_URI .*file store"):
        check_runtime(cfg)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "sqlite:////tmp/mlflow.db")
    check_runtime(cfg)
    # the config's own URI wins over the variable, so the variable is not judged then
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "./mlruns")
    check_runtime(load_config(None, ["tracking.tracking_uri=sqlite:////tmp/mlflow.db"]))
