"""The original ScheduleMesh's public API on a real local Ray, written from its API reference: the result
shapes of RayScheduler (success and failure), the running-task registry and its preemption, submission
with preemption (plain and through placement-group pools), ScheduleMesh proxies, SimpleScheduler,
AgentActor's simulated tasks, MetricsReportingAgent, the head and shutdown.

One Ray instance for the module (8 logical CPUs, 4 GiB of logical memory, 2 units of `fpga`).
"""

from __future__ import annotations

import os
import re

import pytest
import ray

from schedulemesh import RayScheduler, ScheduleMesh, SimpleScheduler, SimpleTaskSpec
from schedulemesh.core.actors.head import ScheduleMeshHead
from schedulemesh.core.agent_actor import AgentActor

from .conftest import LOOPBACK_RAY
from .polling import eventually
from .sm_agents import NamedEcho, OriginalStyle

AGENT_KEYS = {
    "name",
    "labels",
    "resources",
    "actor_class_path",
    "actor_init_args",
    "actor_init_kwargs",
    "handle",
    "options",
    "status",
}
POOL_KEYS = {
    "name",
    "labels",
    "capacity",
    "target_agents",
    "placement_strategy",
    "used_resources",
    "reserved_resources",
    "available_resources",
    "default_agent_resources",
}


@pytest.fixture(scope="module")
def rs():
    os.environ.update(LOOPBACK_RAY)
    ray.init(
        address="local",
        num_cpus=8,
        resources={"fpga": 2},
        _memory=4 * 2**30,
        include_dashboard=False,
        namespace="sm-original",
    )
    sched = RayScheduler("sm-original-sup")
    sched.pg_pools.ready_timeout_s = 3.0  # an unplaceable group is known to be so within seconds here
    yield sched
    if not sched._closed:
        sched.shutdown()
    ray.shutdown()


def _cleanup(rs, *pools):
    for task_id, task in list(rs.running.items()):
        if task.pool_name in pools:
            rs.unregister_task(task_id)
    for agent in rs.list_agents()["agents"]:
        if agent["pool"] in pools:
            rs.delete_agent(agent["name"], force=True)
    for pool in pools:
        rs.pg_pools.destroy_pool(pool)
        rs.scheduler.delete_pool(pool, force=True)


def test_pools_agents_and_their_result_shapes(rs):
    made = rs.create_pool("infer", {"role": "inference"}, {"cpu": 1.0, "memory": 256.0}, target_agents=2)
    assert made["success"] and POOL_KEYS <= set(made["pool"]) and "cluster" in made
    pool = made["pool"]
    assert pool["capacity"]["cpu"] == 2.0 and pool["default_agent_resources"]["cpu"] == 1.0
    assert pool["placement_strategy"] == "STRICT_PACK"
    flat = rs.create_pool("flat", {"role": "batch"}, {"cpu": 1.0, "fpga": 1.0})
    assert flat["pool"]["capacity"]["cpu"] == 1.0 and flat["pool"]["default_agent_resources"] is None
    dup = rs.create_pool("infer", {}, {"cpu": 1.0})
    assert dup == {"success": False, "error": dup["error"]} and "exists" in dup["error"]
    huge = rs.create_pool("huge", {}, {"cpu": 6.0})  # 8 CPUs, 3 committed already
    assert not huge["success"] and "Insufficient cluster capacity" in huge["error"]
    assert not rs.get_pool("nowhere")["success"] and rs.get_pool("infer")["success"]
    assert {"infer", "flat"} <= {p["name"] for p in rs.list_pools()["pools"]}

    a = rs.create_agent(
        "infer-0",
        "infer",
        OriginalStyle,
        actor_args=["hi"],
        actor_kwargs={"interval": 0.0},
        ray_options={"max_restarts": 0},
    )
    assert a["success"], a
    agent = a["agent"]
    assert AGENT_KEYS <= set(agent) and agent["status"] == "running"
    assert agent["actor_class_path"].endswith("sm_agents.OriginalStyle")
    assert agent["actor_init_args"] == ["hi"] and agent["actor_init_kwargs"] == {"interval": 0.0}
    assert agent["options"]["num_cpus"] == 1.0 and agent["options"]["max_restarts"] == 0
    assert ray.get(agent["handle"].greet.remote()) == "hi from infer-0"
    assert rs.get_pool("infer")["pool"]["used_resources"]["cpu"] == 1.0
    custom = rs.create_agent("flat-0", "flat", OriginalStyle, resources={"cpu": 0.5, "fpga": 1.0})
    assert custom["success"] and custom["agent"]["resources"]["custom"] == {"fpga": 1.0}
    assert not rs.create_agent("flat-1", "flat", OriginalStyle, resources={"cpu": 0.1, "fpga": 1.0})["success"]
    assert not rs.create_agent("infer-0", "infer", OriginalStyle)["success"]  # duplicate
    assert not rs.create_agent("x", "nowhere", OriginalStyle)["success"]

    listed = rs.list_agents("infer", include_handle=True)
    assert listed["success"] and [x["name"] for x in listed["agents"]] == ["infer-0"]
    assert listed["agents"][0]["handle"] is not None and rs.list_agents()["agents"][0]["handle"] is None
    assert rs.update_agent_metrics("infer-0", {"queue_length": 2})["success"]
    assert not rs.update_agent_metrics("ghost", {})["success"]

    health = rs.ensure_agent_health(timeout=120.0)
    assert set(health) == {"stale", "recovered", "recreated", "timestamp"} and "infer-0" in health["stale"]
    assert health["recovered"] == [] and health["recreated"] == []

    assert rs.delete_agent("infer-0") == {"success": True, "agent": "infer-0"}
    assert rs.get_pool("infer")["pool"]["used_resources"]["cpu"] == 0.0
    assert not rs.delete_agent("infer-0")["success"] and rs.delete_agent("infer-0", force=True)["success"]
    _cleanup(rs, "infer", "flat")


def test_task_queues_choose_agents_by_labels_and_strategy(rs):
    rs.create_pool("q", {"role": "q"}, {"cpu": 2.0})
    for i in range(2):
        assert rs.create_agent(f"q-{i}", "q", OriginalStyle, resources={"cpu": 0.5})["success"]
    empty = rs.choose_task("q")
    assert empty == {"success": False, "queue_length": 0}
    sub = rs.submit_task("q", {"x": 1}, priority=1.0)
    assert sub["success"] and re.fullmatch(r"task-[0-9a-f]{8}", sub["task_id"])
    assert sub["strategy"] == "least_busy" and sub["queue_length"] == 1 and sub["submit_latency_ms"] >= 0
    rs.submit_task("q", {"x": 2}, priority=9.0, strategy="round_robin", task_id="urgent")
    with pytest.raises(ValueError, match="unknown strategy"):
        rs.submit_task("q", {}, strategy="telepathy")
    got = rs.choose_task("q")
    assert got["success"] and got["task_id"] == "urgent" and got["task"] == {"x": 2}
    assert got["strategy"] == "round_robin" and got["agent"]["name"] in {"q-0", "q-1"} and got["queue_length"] == 1
    assert "schedule_latency_ms" in got
    rs.submit_task("q", {}, priority=99.0, labels={"gpu": "a100"}, task_id="picky")
    miss = rs.choose_task("q")
    assert not miss["success"] and "error" in miss and miss["queue_length"] == 2  # stays queued
    assert not rs.submit_task("nowhere", {})["success"]
    _cleanup(rs, "q")


def test_running_task_registry_decides_executes_and_counts_preemptions(rs):
    rs.create_pool("train", {"stage": "train"}, {"cpu": 1.0}, target_agents=2)
    reg = rs.register_running_task(
        "low", "agent-low", "train", 1.0, labels={"tier": "batch"}, estimated_duration=100.0, payload={"step": 7}
    )
    state = reg["task_state"]
    assert reg["success"] and state["resources"] == {"cpu": 1.0} and state["payload"] == {"step": 7}
    assert {
        "task_id",
        "agent_name",
        "pool_name",
        "priority",
        "labels",
        "start_time",
        "estimated_duration",
        "last_preemption_reason",
    } <= set(state)
    rs.register_running_task("mid", "agent-mid", "train", 4.5)
    ev = rs.evaluate_preemption(5.0, "train")
    assert ev["should_preempt"] and [c["task_id"] for c in ev["candidates"]] == ["low"]  # Δ=0.5 < 1.0 for mid
    assert {"task_id", "agent_name", "pool_name", "priority", "preempt_score", "reason"} <= set(ev["candidates"][0])
    assert "evaluation_latency_ms" in ev

    saved_by, restored = [], []
    rs.register_state_handlers(
        "train", lambda t: saved_by.append(t.task_id) or {"checkpoint": "ckpt-7"}, restored.append
    )
    done = rs.preempt_task(incoming_task_priority=5.0, incoming_task_pool="train")
    assert done["success"] and done["chosen_candidate"]["task_id"] == "low"
    assert done["execution"]["saved_state"]["checkpoint"] == "ckpt-7" and done["execution"]["cancel_success"]
    assert saved_by == ["low"]
    assert rs.restore_task(done["execution"]["saved_state"])["success"] and restored[0]["checkpoint"] == "ckpt-7"
    assert rs.restore_task({"pool_name": "unhandled"})["success"]
    nothing = rs.preempt_task(incoming_task_priority=1.0, incoming_task_pool="train")
    assert not nothing["success"] and "reason" in nothing and "evaluation" in nothing

    assert (
        rs.update_preemption_policy(preemption_aggressiveness="high", cancel_timeout=5)["policy"][
            "same_pool_priority_threshold"
        ]
        == 0.5
    )
    assert rs.evaluate_preemption(5.0, "train")["candidates"][0]["task_id"] == "mid"  # Δ=0.5 now enough
    assert rs.execute_preemption("mid")["success"] and not rs.execute_preemption("mid")["success"]
    stats = rs.get_preemption_stats()
    assert stats["total_preemptions"] == 2 and stats["same_pool_preemptions"] == 2
    assert stats["cross_pool_preemptions"] == 0 and stats["running_tasks"] == 0
    assert {"timestamp", "task_id", "preemptor_task_id", "saved_state", "cancel_success", "reason"} <= set(
        stats["recent_preemptions"][0]
    )
    assert rs.unregister_task("mid") == {"success": False, "error": "Task 'mid' not found"}
    rs.update_preemption_policy(preemption_aggressiveness="medium")
    _cleanup(rs, "train")


def test_submit_with_preemption_frees_the_victims_quota_and_tells_its_agent(rs):
    rs.create_pool("gen", {"stage": "gen"}, {"cpu": 1.0}, target_agents=1)
    first = rs.submit_task_with_preemption(
        task_id="batch-1", pool_name="gen", resources={"cpu": 1.0}, actor_class=OriginalStyle, priority=1.0
    )
    assert first["success"] and re.fullmatch(r"gen-agent-[0-9a-f]{6}", first["agent"]["name"])
    assert first["agent"]["labels"]["pool"] == "gen"
    victim = first["agent"]["name"]
    ray.get(first["agent"]["handle"].process.remote("work", task_id="batch-1", simulated_duration=60.0))
    # Not registered as running: without a registration there is nothing to preempt.
    blocked = rs.submit_task_with_preemption(
        task_id="urgent-1", pool_name="gen", resources={"cpu": 1.0}, actor_class=OriginalStyle, priority=9.0
    )
    assert blocked["success"] is False and blocked["reason"] == "empty_candidates"
    rs.register_running_task("batch-1", victim, "gen", 1.0)
    won = rs.submit_task_with_preemption(
        task_id="urgent-1",
        pool_name="gen",
        resources={"cpu": 1.0},
        actor_class=OriginalStyle,
        priority=9.0,
        agent_name="urgent-agent",
    )
    assert won["success"] and won["agent"]["name"] == "urgent-agent"
    names = [a["name"] for a in rs.list_agents("gen")["agents"]]
    assert names == ["urgent-agent"]  # the victim's agent was deleted, its quota reused
    recent = rs.get_preemption_stats()["recent_preemptions"][-1]
    assert recent["task_id"] == "batch-1" and recent["preemptor_task_id"] == "urgent-1" and recent["cancel_success"]
    bad = rs.submit_task_with_preemption(task_id="x", pool_name="gen")
    assert not bad["success"] and "resources" in bad["error"]
    _cleanup(rs, "gen")


def test_placement_group_pools_reserve_reuse_and_preempt(rs):
    with pytest.raises(ValueError, match="exceeds"):
        rs.create_pool(
            "pg",
            {},
            {"cpu": 1.0},
            target_agents=2,
            pg_pool_config={"enable": True, "high_priority_pg_specs": [{"cpu": 2.0}]},
        )
    made = rs.create_pool(
        "pg",
        {"stage": "pg"},
        {"cpu": 1.0},
        target_agents=3,
        pg_pool_config={"enable": True, "high_priority_pg_specs": [{"cpu": 1.0}], "max_dynamic_pgs": 1},
    )
    assert made["success"] and len(made["pg_pool_config_result"]["high_priority_pgs"]) == 1
    hp = rs.submit_task_with_pg_preemption(
        task_id="hp-1", pool_name="pg", resources={"cpu": 1.0}, actor_class=OriginalStyle, priority=9.0
    )
    assert hp["success"] and hp["placement_group"]["priority_tier"] == "high" and hp["agent"]["name"] == "hp-1"
    assert hp["task_state"]["task_id"] == "hp-1"
    placed = ray.get(
        hp["agent"]["handle"].__ray_call__.remote(lambda self: ray.get_runtime_context().get_placement_group_id())
    )
    assert placed is not None
    low = rs.submit_task_with_pg_preemption(
        task_id="low-1", pool_name="pg", resources={"cpu": 1.0}, actor_class=OriginalStyle, priority=1.0
    )
    assert low["success"] and low["placement_group"]["priority_tier"] == "normal"
    # The one dynamic group is taken: a second normal task preempts the low one and reuses its group.
    mid = rs.submit_task_with_pg_preemption(
        task_id="mid-1", pool_name="pg", resources={"cpu": 1.0}, actor_class=OriginalStyle, priority=5.0
    )
    assert mid["success"], mid
    assert mid["placement_group"]["pg_id"] == low["placement_group"]["pg_id"]
    stats = rs.get_pg_pool_stats("pg")
    assert "success" not in stats and stats["total_pgs"] == 2 and stats["high_priority_pgs"] == 1
    assert stats["dynamic_pgs"] == 1 and stats["allocated_pgs"] == 2 and stats["total_reuse_count"] == 1
    assert "pg" in rs.get_pg_pool_stats()["pools"]
    assert sorted(a["name"] for a in rs.list_agents("pg")["agents"]) == ["hp-1", "mid-1"]
    short = rs.submit_task_with_pg_preemption(
        task_id="too-big", pool_name="pg", resources={"cpu": 2.0}, actor_class=OriginalStyle, priority=9.0
    )
    assert not short["success"] and "reason" not in short  # a quota shortfall never preempts
    again = rs.configure_pg_pool("pg", high_priority_pg_specs=[], max_dynamic_pgs=2)
    assert again["success"] and again["high_priority_pgs"] == []
    assert not rs.configure_pg_pool("nowhere")["success"]
    _cleanup(rs, "pg")


def test_schedule_mesh_is_synchronous_over_every_selection(rs):
    rs.create_pool("mesh", {"team": "m"}, {"cpu": 1.0})
    for i, zone in enumerate(["x", "y"]):
        rs._spawn(f"mesh-{i}", "mesh", NamedEcho, {"cpu": 0.25}, None, (), {}, {"zone": zone})
    mesh = ScheduleMesh(rs, default_pool="mesh")
    one = mesh.choose().generate("p", n=1)  # the configured default strategy (least_busy)
    assert one == {"method": "generate", "args": ["p"], "kwargs": {"n": 1}, "agent": "mesh-0"}
    assert mesh.choose(pool="mesh").invoke("generate", "q")["args"] == ["q"]
    every = mesh.all(labels={"team": "m"}).ping()  # pool labels count as the agents'
    assert sorted(r["agent"] for r in every) == ["mesh-0", "mesh-1"]
    assert [r["agent"] for r in mesh.all(labels={"pool": "mesh", "zone": "y"}).ping()] == ["mesh-1"]
    rr = mesh.choose(strategy="round_robin")
    assert sorted(rr.ping()["agent"] for _ in range(2)) == ["mesh-0", "mesh-1"]  # picked per call
    for strategy in ("least_busy", "random", "power_of_two", "label_round_robin"):
        assert mesh.choose(labels={"zone": "x"}, strategy=strategy).ping()["agent"] == "mesh-0"
    with pytest.raises(ValueError, match="unknown strategy"):
        mesh.choose(strategy="telepathy")
    with pytest.raises(RuntimeError, match="no agent"):
        mesh.all(labels={"zone": "z"})

    shard = mesh.shard()
    assert [(r["agent"], r["args"]) for r in shard.run(["a", "b"], 3)] == [("mesh-0", ["a", 3]), ("mesh-1", ["b", 3])]
    assert [r["args"] for r in shard.run(shards=[1, 2], k=0)] == [[1], [2]]
    with pytest.raises(ValueError, match="one shard per agent"):
        shard.run(["only-one"])
    by_record = mesh.shard(dispatch_fn=lambda agents, a, kw: [(agents[1], ("r",), {}), (0, ("i",), {"x": 1})])
    assert [(r["agent"], r["args"], r["kwargs"]) for r in by_record.run()] == [
        ("mesh-1", ["r"], {}),
        ("mesh-0", ["i"], {"x": 1}),
    ]
    with pytest.raises(ValueError, match="index 5"):
        mesh.shard(dispatch_fn=lambda agents, a, kw: [(5, (), {})]).run()
    with pytest.raises(ValueError, match="no call"):
        mesh.shard(dispatch_fn=lambda agents, a, kw: []).run()
    _cleanup(rs, "mesh")


def test_simple_scheduler_submits_registers_and_completes(rs):
    simple = SimpleScheduler(scheduler=rs)
    made = simple.ensure_pool("simple", labels={"k": "v"}, resources={"cpu": 1.0}, target_agents=1)
    assert made["success"] and made["created"] and simple.ensure_pool("simple")["created"] is False
    out = simple.submit_spec(
        SimpleTaskSpec("s-1", "simple", OriginalStyle, {"cpu": 1.0}, priority=2.0, estimated_duration=30.0)
    )
    assert out["success"] and out["task_state"]["estimated_duration"] == 30.0
    assert simple.stats()["running_tasks"] == 1
    assert simple.complete("s-1")["success"] and simple.stats()["running_tasks"] == 0
    assert [a["name"] for a in simple.list_agents("simple")["agents"]] == [out["agent"]["name"]]  # agent stays
    assert simple.configure_preemption(min_preempt_score=0.2)["policy"]["min_preempt_score"] == 0.2
    assert "pools" in simple.pg_pool_stats() and simple.list_pools()["success"]
    simple.configure_preemption(min_preempt_score=0.5)
    _cleanup(rs, "simple")


def test_agent_actor_simulated_tasks_and_metrics_reports(rs):
    rs.create_pool("act", {}, {"cpu": 1.0})
    handle = rs.create_agent("act-0", "act", OriginalStyle, resources={"cpu": 0.5}, actor_kwargs={"interval": 60.0})[
        "agent"
    ]["handle"]
    assert ray.get(handle.invoke.remote("m", 1, k=2)) == {"method": "m", "args": [1], "kwargs": {"k": 2}}
    assert ray.get(handle.process.remote("payload")) == {"method": "process", "kwargs": {"payload": "payload"}}
    ray.get(handle.process.remote("p", task_id="t1", priority=3.0, simulated_duration=30.0))
    ray.get(handle.process.remote("p", task_id="t2", simulated_duration=0.3))
    running = ray.get(handle.get_running_tasks.remote())
    assert running["agent_name"] == "act-0" and running["count"] == 2
    # t2's 0.3 s of simulated work ends; t1's 30 s does not.
    running = eventually(
        lambda: [t["task_id"] for t in ray.get(handle.get_running_tasks.remote())["running_tasks"]] == ["t1"]
    )
    assert running
    assert ray.get(handle.cancel.remote("t1"))["task_info"]["priority"] == 3.0
    assert not ray.get(handle.cancel.remote("t1"))["success"]
    assert ray.get(handle.push.remote({"queue_length": 5})) is True
    assert ray.get(handle.push.remote({"queue_length": 6})) is False  # within report_interval: throttled
    assert ray.get(handle.push.remote({"queue_length": 7}, True)) is True  # forced
    report = rs.list_agents("act")["agents"][0]["metrics"]
    assert report["queue_length"] == 7 and "timestamp" in report
    _cleanup(rs, "act")


def test_head_and_shutdown_end_what_they_own():
    head = ScheduleMeshHead("sm-original-head", namespace="sm-original")
    assert head.start() is True and head.running
    sched = head.scheduler
    assert sched.create_pool("h", {}, {"cpu": 0.5})["success"]
    attached = RayScheduler.attach("sm-original-head", namespace="sm-original")
    assert [p["name"] for p in attached.list_pools()["pools"]] == ["h"]
    attached.shutdown()  # not owned: the supervisor keeps running
    assert [p["name"] for p in sched.list_pools()["pools"]] == ["h"]
    with pytest.raises(RuntimeError):
        attached.list_pools()
    assert head.stop() is True
    with pytest.raises(RuntimeError):
        sched.get_pool("h")
    with pytest.raises(RuntimeError):
        sched.shutdown()


def test_agent_actor_is_a_ray_actor_class_and_an_actor_class_argument(rs):
    solo = AgentActor.options(name="solo-agent", num_cpus=0).remote("solo-agent", {"pool": "none"})
    assert ray.get(solo.invoke.remote("m", 1, k=2)) == {"method": "m", "args": [1], "kwargs": {"k": 2}}
    assert ray.get(solo.get_running_tasks.remote()) == {"agent_name": "solo-agent", "running_tasks": [], "count": 0}
    bare = AgentActor.remote("bare", {})
    assert ray.get(bare.process.remote("p")) == {"method": "process", "kwargs": {"payload": "p"}}
    ray.kill(solo)
    ray.kill(bare)
    rs.create_pool("aa", {"role": "aa"}, {"cpu": 0.5})
    made = rs.create_agent("aa-0", "aa", AgentActor, resources={"cpu": 0.5})
    assert made["success"] and made["agent"]["actor_class_path"] == "schedulemesh.core.agent_actor.AgentActor"
    assert ray.get(made["agent"]["handle"].invoke.remote("x"))["method"] == "x"
    _cleanup(rs, "aa")


def test_custom_resources_nested_or_top_level_through_pools_and_agent_options(rs):
    nested = {"cpu": 0.5, "memory": 128, "gpu": 0, "custom": {"fpga": 0.5}}
    made = rs.create_pool("acc", {"hw": "fpga"}, nested, target_agents=2)
    assert made["success"], made
    pool = made["pool"]
    assert pool["capacity"]["custom"] == {"fpga": 1.0} and pool["capacity"]["cpu"] == 1.0
    assert pool["default_agent_resources"]["custom"] == {"fpga": 0.5}
    a = rs.create_agent("acc-0", "acc", OriginalStyle, resources=nested)["agent"]
    b = rs.create_agent("acc-1", "acc", OriginalStyle, resources={"cpu": 0.5, "memory": 128, "fpga": 0.5})["agent"]
    for agent in (a, b):
        assert agent["options"]["resources"] == {"fpga": 0.5} and agent["resources"]["custom"] == {"fpga": 0.5}
    held = ray.get(a["handle"].__ray_call__.remote(lambda self: ray.get_runtime_context().get_assigned_resources()))
    assert held["fpga"] == 0.5
    after = rs.get_pool("acc")["pool"]
    assert after["used_resources"]["custom"] == {"fpga": 1.0} and after["available_resources"]["custom"] == {}
    refused = rs.create_pool("neg", {}, {"cpu": 0.1, "custom": {"fpga": -1}})
    assert not refused["success"] and ">= 0" in refused["error"]
    _cleanup(rs, "acc")


def test_state_path_restore_brings_back_pools_queued_tasks_and_agents(rs, tmp_path):
    state = str(tmp_path / "sm.state")
    first = RayScheduler("sm-restore", state_path=state)
    assert first.create_pool("keep", {"role": "keep"}, {"cpu": 0.5}, target_agents=1, placement_strategy="PACK")[
        "success"
    ]
    old = first.create_agent("keep-0", "keep", OriginalStyle, actor_args=["hey"])["agent"]
    old_pid = ray.get(old["handle"].__ray_call__.remote(lambda self: os.getpid()))
    first.submit_task("keep", {"job": 1}, priority=2.0, strategy="round_robin", task_id="queued-1")
    first.shutdown()

    again = RayScheduler("sm-restore", state_path=state)
    pool = again.get_pool("keep")
    assert pool["success"] and pool["pool"]["placement_strategy"] == "PACK"
    assert pool["pool"]["used_resources"]["cpu"] == 0.5  # the ledger came back with the agent's share
    health = again.ensure_agent_health()
    assert "keep-0" in health["stale"] and health["recreated"] == ["keep-0"]
    agent = eventually(lambda: [a for a in again.list_agents("keep", include_handle=True)["agents"] if a["handle"]])[0]
    assert agent["status"] == "running" and agent["actor_init_args"] == ["hey"]
    assert ray.get(agent["handle"].greet.remote()) == "hey from keep-0"
    assert ray.get(agent["handle"].__ray_call__.remote(lambda self: os.getpid())) != old_pid
    got = again.choose_task("keep")
    assert got["success"] and got["task_id"] == "queued-1" and got["task"] == {"job": 1}
    assert got["strategy"] == "round_robin" and got["agent"]["name"] == "keep-0"
    assert again.ensure_agent_health()["recreated"] == []  # reported once
    again.shutdown()


def test_head_keeps_its_supervisor_handle_in_actor_between_start_and_stop():
    head = ScheduleMeshHead("sm-original-head2", namespace="sm-original")
    assert head._actor is None
    assert head.start() is True and head._actor is not None
    assert ray.get(head._actor.list_pools.remote()) == []
    assert head.stop() is True and head._actor is None
