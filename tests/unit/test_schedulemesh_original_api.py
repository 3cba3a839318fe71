"""The original ScheduleMesh's pure parts, written from its API reference: aggressiveness levels, the
preemption decision, the single priority queue, strategy objects and their registry, the config file."""

from __future__ import annotations

import importlib

import pytest

from schedulemesh.config.policy import (
    PreemptionAggressiveness,
    normalize_aggressiveness,
    resolve_preemption_aggressiveness,
)
from schedulemesh.core.actors.control.scheduler_actor import PriorityTaskQueue
from schedulemesh.core.config import get_scheduling_config, reset_scheduling_config
from schedulemesh.core.scheduling import (
    LabelRoundRobinStrategy,
    SchedulingStrategy,
    available_strategies,
    create_strategy,
    register_strategy,
    unregister_strategy,
)
from schedulemesh.rules import PreemptionPolicy, RunningTask, candidates
from schedulemesh.simple import SimpleTaskSpec

MODULES = [
    "schedulemesh",
    "schedulemesh.core",
    "schedulemesh.core.controllers",
    "schedulemesh.core.controllers.ray_scheduler",
    "schedulemesh.core.controllers.schedule_mesh",
    "schedulemesh.core.scheduling",
    "schedulemesh.core.config",
    "schedulemesh.core.agents",
    "schedulemesh.core.agent_actor",
    "schedulemesh.core.actors.head",
    "schedulemesh.core.actors.control.scheduler_actor",
    "schedulemesh.config.policy",
    "schedulemesh.simple",
]
NAMES = {
    "schedulemesh": ["RayScheduler", "ScheduleMesh", "SimpleScheduler", "SimpleTaskSpec", "__version__"],
    "schedulemesh.core": ["RayScheduler"],
    "schedulemesh.core.controllers": ["RayScheduler", "ScheduleMesh"],
    "schedulemesh.core.agents": ["MetricsReportingAgent", "AgentActor"],
    "schedulemesh.core.actors.head": ["ScheduleMeshHead"],
    "schedulemesh.core.actors.control.scheduler_actor": ["PriorityTaskQueue"],
}


@pytest.mark.parametrize("module", MODULES)
def test_every_module_and_name_of_the_reference_imports(module):
    """Each name the reference documents is there, is planact's own (not a stray import of the same name),
    and every module that re-exports a name hands out the one object."""
    mod = importlib.import_module(module)
    for name in NAMES.get(module, []):
        obj = getattr(mod, name)
        if name == "__version__":
            assert isinstance(obj, str) and obj[:1].isdigit(), obj
            continue
        assert callable(obj), name
        assert obj.__module__.startswith("schedulemesh"), (name, obj.__module__)
        assert obj is _first_definition(name), f"{module}.{name} is another object than its other exports"


def _first_definition(name: str):
    """The object the first module of MODULES that exports `name` holds under it."""
    for module in MODULES:
        if name in NAMES.get(module, []):
            return getattr(importlib.import_module(module), name)
    raise KeyError(name)


def test_aggressiveness_levels_aliases_and_env_values(monkeypatch):
    assert PreemptionAggressiveness.HIGH.thresholds == (0.1, 0.5)
    assert PreemptionAggressiveness.LOW.thresholds == (1.0, 3.0)
    assert normalize_aggressiveness("Urgent") is PreemptionAggressiveness.HIGH
    assert normalize_aggressiveness("default") is PreemptionAggressiveness.MEDIUM
    assert normalize_aggressiveness("batch") is PreemptionAggressiveness.LOW
    assert normalize_aggressiveness("sometimes") is None
    monkeypatch.setenv("SM_LEVEL", "high")
    level, hint = resolve_preemption_aggressiveness("env:SM_LEVEL")
    assert level is PreemptionAggressiveness.HIGH and "SM_LEVEL" in hint
    level, hint = resolve_preemption_aggressiveness("env:SM_MISSING")
    assert level is None and "SM_MISSING" in hint


def test_policy_update_applies_aggressiveness_first_and_ignores_unknown_keys():
    policy = PreemptionPolicy()
    out = policy.update(preemption_aggressiveness="low", same_pool_priority_threshold=2.0, cancel_timeout=9)
    assert out["label_priority_threshold"] == 1.0 and out["same_pool_priority_threshold"] == 2.0
    assert "cancel_timeout" not in out
    with pytest.raises(ValueError, match="aggressiveness"):
        policy.update(preemption_aggressiveness="sometimes")


def _task(tid, pool, priority, labels=None, est=0.0, start=0.0, res=None):
    return RunningTask(tid, f"agent-{tid}", pool, priority, labels or {}, start, est, resources=res)


def test_same_and_cross_pool_thresholds_and_protection():
    policy = PreemptionPolicy()
    running = [_task("a", "p", 5.0, start=100.0), _task("b", "q", 1.0, start=100.0), _task("c", "p", 5.5, start=100.0)]
    found = candidates(policy, running, 6.0, "p", now=100.0)
    # Δ=1 in the same pool qualifies (threshold 1.0); Δ=5 across pools qualifies (threshold 5.0); Δ=0.5 does not.
    assert {c["task_id"]: c["reason"] for c in found} == {"a": "same_pool_preemption", "b": "cross_pool_preemption"}
    assert found[0]["task_id"] == "b"  # score Δ=5 beats Δ=1
    policy.update(protected_pools=["q"])
    assert [c["task_id"] for c in candidates(policy, running, 6.0, "p", now=100.0)] == ["a"]
    policy.update(protected_pools=[], enable_cross_pool_preemption=False)
    assert [c["task_id"] for c in candidates(policy, running, 6.0, "p", now=100.0)] == ["a"]


def test_more_remaining_work_is_preempted_first_and_half_elapsed_stands_in_for_no_estimate():
    policy = PreemptionPolicy()
    short = _task("short", "p", 1.0, est=10.0, start=0.0)
    long = _task("long", "p", 1.0, est=100.0, start=0.0)
    found = candidates(policy, [short, long], 3.0, "p", now=5.0)
    assert [c["task_id"] for c in found] == ["long", "short"]
    assert found[0]["preempt_score"] == pytest.approx(2.0 + 0.1 * 95.0)
    assert _task("x", "p", 1.0, start=0.0).remaining(10.0) == 5.0


def test_label_rules_preempt_at_a_small_deficit_across_pools_but_not_beyond_the_threshold():
    policy = PreemptionPolicy(label_preemption_rules={"tier": {"premium": ["batch"]}})
    victim = _task("v", "other", 5.2, labels={"tier": "batch"}, start=0.0, est=1.0)
    found = candidates(policy, [victim], 5.0, "mine", labels={"tier": "premium"}, now=1.0)
    assert found and found[0]["reason"] == "label_based_preemption" and found[0]["preempt_score"] == 0.5
    assert not candidates(
        policy, [_task("v", "other", 6.0, labels={"tier": "batch"})], 5.0, "mine", labels={"tier": "premium"}
    )  # deficit 1.0 > label threshold 0.5
    assert not candidates(policy, [victim], 5.0, "mine", labels={"tier": "standard"}, now=1.0)
    policy.update(enable_label_preemption=False)
    assert not candidates(policy, [victim], 5.0, "mine", labels={"tier": "premium"}, now=1.0)


def test_a_victim_holding_too_little_is_skipped_and_enough_known_resources_sort_first():
    policy = PreemptionPolicy()
    small = _task("small", "p", 1.0, res={"cpu": 1.0})
    big = _task("big", "p", 1.0, res={"cpu": 4.0})
    unknown = _task("unknown", "p", 1.0, est=1000.0)
    found = candidates(policy, [small, big, unknown], 5.0, "p", need={"cpu": 2.0}, now=0.0)
    assert [c["task_id"] for c in found] == ["big", "unknown"]
    lookup = candidates(policy, [unknown], 5.0, "p", need={"cpu": 2.0}, victim_resources=lambda t: {"cpu": 1.0})
    assert lookup == []


def test_priority_task_queue_orders_by_priority_then_fifo_and_ages():
    q = PriorityTaskQueue(aging_factor=0.0)
    assert q.is_empty() and q.pop() is None and q.peek() is None
    q.push("low", 1.0)
    q.push("high-1", 5.0)
    q.push("high-2", 5.0)
    assert q.len() == 3 and len(q) == 3 and q.peek() == "high-1"
    snap = q.snapshot()
    assert [q.pop(), q.pop(), q.pop()] == ["high-1", "high-2", "low"] and q.is_empty()
    q.restore(snap)
    assert len(q) == 3
    aged = PriorityTaskQueue(aging_factor=1.0)
    aged.push("new-high", 5.0)
    aged.push("old-low", 1.0, submit_time=0.0)  # waited decades: aging lifts it past 5
    assert aged.pop() == "old-low"


def test_builtin_strategies_select_from_records_and_empty_is_an_error():
    agents = [
        {"name": "a", "labels": {"zone": "x"}, "metrics": {"queue_length": 3}},
        {"name": "b", "labels": {"zone": "y"}, "metrics": {"queue_length": 1}},
        {"name": "c", "labels": {"zone": "x"}},
    ]
    rr = create_strategy("round_robin")
    assert [rr.select(agents)["name"] for _ in range(4)] == ["a", "b", "c", "a"]
    assert create_strategy("least_busy").select(agents)["name"] == "c"  # no metrics: queue 0
    assert create_strategy("least_busy").select(agents[:2])["name"] == "b"
    assert create_strategy("least_busy").select([{"name": "z"}, {"name": "a"}])["name"] == "z"  # ties: first
    lrr = LabelRoundRobinStrategy(labels={"zone": "x"})
    assert [lrr.select(agents)["name"] for _ in range(3)] == ["a", "c", "a"]
    with pytest.raises(ValueError):
        LabelRoundRobinStrategy(labels={"zone": "nowhere"}).select(agents)
    for name in ("round_robin", "least_busy", "random", "power_of_two"):
        with pytest.raises(ValueError):
            create_strategy(name).select([])
    with pytest.raises(ValueError, match="unknown strategy"):
        create_strategy("nope")


class Last(SchedulingStrategy):
    def select(self, agents):
        if not agents:
            raise ValueError("empty")
        return agents[-1]


def test_register_replace_unregister_and_the_scheduler_dispatch_sees_it():
    from schedulemesh.dispatch import CUSTOM

    register_strategy("last_one", Last)
    try:
        assert "last_one" in available_strategies() and isinstance(create_strategy("last_one"), Last)
        assert CUSTOM["last_one"]([{"name": "a"}, {"name": "b"}], None)["name"] == "b"
        with pytest.raises(ValueError, match="registered already"):
            register_strategy("last_one", Last)
        register_strategy("last_one", lambda labels: Last(labels), replace=True)
    finally:
        unregister_strategy("last_one")
    assert "last_one" not in available_strategies() and "last_one" not in CUSTOM
    assert isinstance(create_strategy(Last), Last) and create_strategy(Last()).select([1, 2]) == 2


def test_config_file_sets_the_default_and_imports_strategies(tmp_path, monkeypatch):
    cfg = tmp_path / "sm.yaml"
    cfg.write_text(
        "scheduling:\n  default_strategy: last_from_config\n  strategies:\n"
        f"    - {{name: last_from_config, import: '{__name__}:Last', enabled: true}}\n"
        "    - {name: off, import: 'no.such:thing', enabled: false}\n"
    )
    monkeypatch.setenv("SCHEDULEMESH_CONFIG", str(cfg))
    reset_scheduling_config()
    try:
        config = get_scheduling_config()
        assert config.default_strategy == "last_from_config" and get_scheduling_config() is config
        assert isinstance(create_strategy("last_from_config"), Last)
    finally:
        monkeypatch.delenv("SCHEDULEMESH_CONFIG")
        reset_scheduling_config()
        unregister_strategy("last_from_config")
    assert get_scheduling_config().default_strategy == "least_busy"


def test_simple_task_spec_gives_submit_keywords():
    spec = SimpleTaskSpec("t1", "train", object, {"cpu": 1.0})
    kw = spec.to_submission_kwargs()
    assert kw["task_id"] == "t1" and kw["pool"] == "train" and kw["priority"] == 5.0 and kw["auto_register"] is True


def test_a_strategy_disabled_in_the_config_is_neither_listed_nor_choosable(tmp_path, monkeypatch):
    from schedulemesh.core.controllers.ray_scheduler import check_strategy
    from schedulemesh.core.controllers.schedule_mesh import ScheduleMesh
    from schedulemesh.core.scheduling import RandomStrategy

    cfg = tmp_path / "sm.yaml"
    cfg.write_text(
        "scheduling:\n  strategies:\n"
        "    - {name: random, enabled: false}\n"
        f"    - {{name: kept_last, import: '{__name__}:Last', enabled: true}}\n"
    )
    monkeypatch.setenv("SCHEDULEMESH_CONFIG", str(cfg))
    reset_scheduling_config()
    try:
        # Nobody asked for the configuration: the registry reads it before it answers.
        assert "random" not in available_strategies() and "kept_last" in available_strategies()
        with pytest.raises(ValueError, match="unknown strategy"):
            create_strategy("random")
        with pytest.raises(ValueError, match="unknown strategy"):
            check_strategy("random")  # RayScheduler.submit_task's check
        with pytest.raises(ValueError, match="unknown strategy"):
            ScheduleMesh(scheduler=None).choose(strategy="random")
        assert check_strategy("round_robin") == "round_robin"
    finally:
        monkeypatch.delenv("SCHEDULEMESH_CONFIG")
        reset_scheduling_config()
        register_strategy("random", RandomStrategy)  # reset clears the cache only, as in the original
        unregister_strategy("kept_last")
    assert "random" in available_strategies()


def test_resource_dicts_take_custom_amounts_nested_or_top_level_and_give_them_nested():
    from schedulemesh.core.controllers.views import flat, shaped
    from schedulemesh.errors import InvalidOptions

    nested = {"cpu": 1, "memory": 1024, "gpu": 0, "custom": {"accelerator": 0.5}}
    assert flat(nested) == {"cpu": 1.0, "memory": 1024.0, "accelerator": 0.5}
    assert flat({"cpu": 1, "accelerator": 0.5}) == flat({"cpu": 1, "custom": {"accelerator": 0.5}})
    assert shaped(nested) == {"cpu": 1.0, "memory": 1024.0, "gpu": 0.0, "custom": {"accelerator": 0.5}}
    assert shaped({"cpu": 2, "fpga": 1}) == {"cpu": 2.0, "memory": 0.0, "gpu": 0.0, "custom": {"fpga": 1.0}}
    assert flat(None) is None and shaped(None)["custom"] == {}
    for bad in ({"cpu": -1}, {"custom": {"accelerator": -0.5}}, {"custom": 3}, {"a": 1, "custom": {"a": 2}}):
        with pytest.raises(InvalidOptions):
            flat(bad)


def test_agent_actor_answers_options_and_remote_and_stays_subclassable(caplog):
    import ray

    from schedulemesh.core.agent_actor import AgentActor

    assert callable(AgentActor.options) and callable(AgentActor.remote)

    class Guide(AgentActor):  # the agent-configuration guide subclasses it, then decorates
        pass

    with caplog.at_level("WARNING"):
        decorated = ray.remote(Guide)
    assert hasattr(decorated, "options") and "overwrites attribute" not in caplog.text
    with pytest.raises(AttributeError):
        AgentActor.no_such_thing  # noqa: B018
