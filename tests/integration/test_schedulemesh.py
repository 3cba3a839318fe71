"""schedulemesh on a real local Ray: pools, ledgers, agents, supervision, dispatch, placement groups.

One Ray instance for the module (4 logical CPUs, 2 units of a custom resource `zone_a`); each test has
its own namespace, so its own supervisor, and deletes what it created.
"""

from __future__ import annotations

import itertools
import os
import signal
import socket
import time

import psutil
import pytest
import ray

from schedulemesh import (
    STRATEGIES,
    AgentCreationError,
    AlreadyExists,
    InsufficientCapacity,
    InvalidOptions,
    PoolNotFound,
    Scheduler,
)
from schedulemesh.records import load_state

from .conftest import LOOPBACK_RAY
from .polling import eventually, holds_for
from .sm_agents import Broken, Echo, Evictable, Plain, SelfNamed, TaskWorker


def _alive(pid: int) -> bool:
    """Whether a process with this pid still exists."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


_ns = itertools.count()


@pytest.fixture(scope="module")
def local_ray():
    os.environ.update(LOOPBACK_RAY)
    ray.init(
        address="local",
        num_cpus=4,
        resources={"zone_a": 2},
        include_dashboard=False,
        namespace="sm-tests",
        _system_config={"num_workers_soft_limit": 32},
    )
    yield
    ray.shutdown()


def _scheduler(**kw) -> Scheduler:
    return Scheduler(namespace=f"sm-test-{os.getpid()}-{next(_ns)}", **kw)


@pytest.fixture
def sched(local_ray):
    # ready_timeout_s bounds a worker's start, not anything a test asserts: 20 s was overrun once in CI when
    # a recreated agent's fresh Ray worker started while the other xdist worker kept both cores busy.
    # stale_after_s=3 condemned four healthy, just-started agents at once in CI; 6 s still lets the
    # silence tests finish in seconds.
    s = _scheduler(check_interval_s=0.2, stale_after_s=6.0, ready_timeout_s=90.0, heartbeat_interval_s=0.2)
    yield s
    for pool in s.list_pools():
        s.delete_pool(pool["name"], force=True)
    ray.kill(s.supervisor)


def test_pool_lifecycle_and_ledger(sched):
    info = sched.create_pool("gen", {"role": "actor"}, {"cpu": 0.5, "memory": 64}, target_agents=2)
    assert info["capacity"] == {"cpu": 1.0, "memory": 128.0} and info["free"] == info["capacity"]
    sched.create_pool("train", {"role": "trainer"}, {"cpu": 1})
    assert [p["name"] for p in sched.list_pools({"role": "actor"})] == ["gen"]
    with pytest.raises(AlreadyExists):
        sched.create_pool("gen", {}, {"cpu": 1})
    assert sched.create_pool("gen", {}, {"cpu": 1}, exist_ok=True)["capacity"] == {"cpu": 1.0, "memory": 128.0}

    for i in range(2):
        sched.create_agent(f"gen-{i}", "gen", Echo, actor_args=(i,))
    pool = sched.get_pool("gen")
    assert pool["used"] == {"cpu": 1.0, "memory": 128.0} and pool["reserved"] == {} and pool["free"] == {}
    assert pool["agents"] == ["gen-0", "gen-1"]
    assert sched.get_agent("gen-1").call("whoami")["value"] == 1

    with pytest.raises(InvalidOptions, match="still has agents"):
        sched.delete_pool("gen")
    sched.delete_agent("gen-0")
    assert sched.get_pool("gen")["used"] == {"cpu": 0.5, "memory": 64.0}
    sched.delete_pool("gen", force=True)
    with pytest.raises(PoolNotFound, match="no pool named 'gen'"):
        sched.get_pool("gen")
    assert [p["name"] for p in sched.list_pools()] == ["train"]


def test_capacity_exhaustion_says_which_resource_and_by_how_much(sched):
    sched.create_pool("small", {}, {"cpu": 1})
    sched.create_agent("a", "small", Echo, resources={"cpu": 0.75})
    with pytest.raises(InsufficientCapacity) as err:
        sched.create_agent("b", "small", Echo, resources={"cpu": 0.5})
    assert "Insufficient pool 'small' capacity for requested resources: cpu short by 0.25" in str(err.value)
    assert sched.get_pool("small")["reserved"] == {}  # the refused request holds nothing
    with pytest.raises(InsufficientCapacity, match="cluster .*cpu short by 96"):
        sched.create_pool("huge", {}, {"cpu": 100})
    with pytest.raises(InsufficientCapacity, match="zone_b short by 1"):
        sched.create_pool("nowhere", {}, {"zone_b": 1})


def test_custom_resources_reach_the_actor(sched):
    sched.create_pool("zone", {"zone": "a"}, {"cpu": 0.25, "zone_a": 1}, target_agents=2)
    ref = sched.create_agent("z0", "zone", Echo)
    assert ref.call("whoami")["resources"] == {"CPU": 0.25, "zone_a": 1.0}
    sched.create_agent("z1", "zone", Echo)
    with pytest.raises(InsufficientCapacity, match="zone_a short by 1"):
        sched.create_agent("z2", "zone", Echo, resources={"zone_a": 1})


def test_ray_options_pass_through_max_restarts_really_restarts(sched):
    sched.create_pool("p", {}, {"cpu": 1})
    # max_task_retries -1: the call is retried until the restarted actor answers (with a single retry, a
    # loaded machine's slow restart spent it while the actor was still coming back: a CI flake)
    ref = sched.create_agent(
        "r", "p", Echo, actor_args=("kept",), ray_options={"max_restarts": 1, "max_task_retries": -1}
    )
    pid = ref.call("whoami")["pid"]
    os.kill(pid, signal.SIGKILL)
    after = ref.call("whoami", timeout=60)  # Ray itself restarts the actor and retries the call
    assert after["pid"] != pid and after["value"] == "kept"
    # The supervisor learns of Ray's restart from the next heartbeat.
    info = eventually(lambda: (i := sched.agent_info("r"))["ray_restarts"] == 1 and i)
    assert info and info["recreations"] == 0  # Ray's restart, not the supervisor's
    with pytest.raises(InvalidOptions, match="unknown ray_options key 'max_restart'"):
        sched.create_agent("bad", "p", Echo, ray_options={"max_restart": 1})
    # The guide's num_gpus in ray_options is part of the request, so the ledger and the node check see it.
    with pytest.raises(InsufficientCapacity, match="gpu short by 1"):
        sched.create_agent("bad", "p", Echo, ray_options={"num_gpus": 1})


def test_constructor_failure_rolls_back(sched):
    sched.create_pool("p", {}, {"cpu": 1})
    with pytest.raises(AgentCreationError, match="constructor of Broken failed: RuntimeError: model file missing"):
        sched.create_agent("broken", "p", Broken, resources={"cpu": 1})
    pool = sched.get_pool("p")
    assert pool["used"] == {} and pool["reserved"] == {} and pool["agents"] == []
    assert sched.list_agents() == []
    # the name and the capacity are free again
    assert sched.create_agent("broken", "p", Echo, resources={"cpu": 1}, actor_args=(7,)).call("whoami")["value"] == 7


def test_labels_and_every_dispatch_strategy(sched):
    sched.create_pool("gen", {"role": "actor"}, {"cpu": 0.25}, target_agents=4)
    for i, zone in enumerate(["x", "x", "y", "y"]):
        sched.create_agent(f"g{i}", "gen", Echo, labels={"zone": zone}, ray_options={"max_concurrency": 2})
    sched.create_pool("other", {"role": "planner"}, {"cpu": 0.25})
    sched.create_agent("planner-0", "other", Plain, actor_args=(1,))

    assert sched.agent_info("g0")["labels"] == {"role": "actor", "zone": "x"}
    assert [a["name"] for a in sched.list_agents(labels={"zone": "y"})] == ["g2", "g3"]
    picks = [sched.choose(pool="gen").name for _ in range(5)]
    assert picks == ["g0", "g1", "g2", "g3", "g0"]
    assert {sched.choose(labels={"zone": "y"}, strategy="random").name for _ in range(20)} == {"g2", "g3"}
    zones = [sched.choose(pool="gen", strategy="label_round_robin", label_key="zone").name for _ in range(4)]
    assert zones == ["g0", "g2", "g1", "g3"]
    # Without label_key the label that differs among the candidates ("zone") is the one rotated over.
    inferred = [sched.choose(pool="gen", strategy="label_round_robin").name for _ in range(4)]
    assert inferred == ["g0", "g2", "g1", "g3"]
    # An unknown strategy is refused where it is chosen, even for a selector that matches no agent.
    with pytest.raises(InvalidOptions, match="unknown strategy 'fastest'"):
        sched.choose(pool="gen", labels={"zone": "nowhere"}, strategy="fastest")

    # least_busy / power_of_two read the load the agents report in their heartbeats
    busy = [sched.get_agent(n).handle.work.remote(4.0) for n in ("g0", "g1", "g2")]
    deadline = time.time() + 3
    while time.time() < deadline and sum(a["load"] for a in sched.list_agents("gen")) < 3:
        time.sleep(0.1)
    assert sched.choose(pool="gen", strategy="least_busy").name == "g3"
    assert "g3" in {sched.choose(pool="gen", strategy="power_of_two").name for _ in range(20)}
    ray.get(busy)
    assert set(STRATEGIES) == {"round_robin", "least_busy", "random", "power_of_two", "label_round_robin"}

    out = sched.broadcast("whoami", labels={"role": "actor"})
    assert sorted(out) == ["g0", "g1", "g2", "g3"] and len({v["pid"] for v in out.values()}) == 4


def test_supervisor_recreates_a_sigkilled_agent(sched):
    sched.create_pool("p", {}, {"cpu": 0.5}, target_agents=1)
    ref = sched.create_agent("victim", "p", Echo, actor_args=({"model": "m"},))
    pid = ref.call("whoami")["pid"]
    t0 = time.perf_counter()
    os.kill(pid, signal.SIGKILL)
    info = sched.wait_alive("victim", min_incarnation=1, timeout_s=30)
    recovery = time.perf_counter() - t0
    print(
        f"\nschedulemesh: SIGKILL -> agent recreated and answering in {recovery:.2f}s "
        f"(supervisor's own recreation {info['last_recovery_s']:.2f}s)"
    )
    after = ref.call("whoami")
    assert after["pid"] != pid and after["value"] == {"model": "m"}  # same class and constructor arguments
    assert info["recreations"] == 1
    assert sched.get_pool("p")["used"] == {"cpu": 0.5}  # the ledger still counts it once
    assert [e["kind"] for e in sched.events()] == ["recreated"]


def test_silent_agent_is_replaced(sched):
    sched.create_pool("p", {}, {"cpu": 0.5})
    ref = sched.create_agent("quiet", "p", Echo)
    pid = ref.call("whoami")["pid"]
    ref.call("go_silent")
    info = sched.wait_alive("quiet", min_incarnation=1, timeout_s=90)  # a new process: slow on loaded CI
    assert info["pid"] != pid and "no heartbeat" in sched.events()[0]["why"]


def test_plain_class_is_supervised_and_graceful_stop_runs_on_stop(sched, tmp_path):
    sched.create_pool("p", {}, {"cpu": 1})
    plain = sched.create_agent("plain", "p", Plain, actor_kwargs={"x": 5})
    assert plain.call("get") == 5
    deadline = time.time() + 30  # it heartbeats (every 0.2 s; the first may be late on a loaded machine)
    while "pid" not in sched.agent_info("plain")["report"] and time.time() < deadline:
        time.sleep(0.2)
    assert sched.agent_info("plain")["report"]["pid"] == sched.agent_info("plain")["pid"]
    marker = tmp_path / "stopped"
    sched.create_agent("stoppable", "p", Echo, actor_kwargs={"marker": str(marker)})
    sched.delete_agent("stoppable")
    assert marker.read_text() == "stopped stoppable"
    with pytest.raises(ValueError):
        ray.get_actor("stoppable", namespace=sched.namespace)


def test_placement_groups_gang_place_and_infeasible_gangs_fail_fast(local_ray):
    # A generous timeout: an agent's process can take seconds to start on a loaded 2-core machine; the
    # infeasible STRICT_SPREAD gang must fail at once anyway, without waiting for it.
    s = _scheduler(ready_timeout_s=60.0)
    try:
        s.create_pool("gang", {}, {"cpu": 0.5}, target_agents=2, placement_strategy="STRICT_PACK")
        a = s.create_agent("t0", "gang", Echo).call("whoami")
        b = s.create_agent("t1", "gang", Echo).call("whoami")
        assert a["placement_group"] and a["placement_group"] == b["placement_group"]
        assert a["node_id"] == b["node_id"]
        assert {s.agent_info("t0")["bundle"], s.agent_info("t1")["bundle"]} == {0, 1}
        t0 = time.monotonic()
        with pytest.raises(InsufficientCapacity, match="STRICT_SPREAD needs 2 nodes, the cluster has 1"):
            s.create_pool("spread", {}, {"cpu": 0.5}, target_agents=2, placement_strategy="STRICT_SPREAD")
        assert time.monotonic() - t0 < 10
        assert [p["name"] for p in s.list_pools()] == ["gang"]
    finally:
        for p in s.list_pools():
            s.delete_pool(p["name"], force=True)
        ray.kill(s.supervisor)


def test_rendezvous_port_is_bindable_on_the_agent_node(sched):
    sched.create_pool("p", {}, {"cpu": 0.5})
    sched.create_agent("rank0", "p", Echo)
    ip, port = sched.rendezvous("rank0")
    assert ip and 1024 < port < 65536
    with socket.socket() as s:  # single node: the agent's node is ours
        s.bind(("", port))


def test_restarted_supervisor_restores_pools_and_agents_from_its_state_file(local_ray, tmp_path):
    state = tmp_path / "mesh.pkl"
    ns = f"sm-state-{os.getpid()}"
    s = Scheduler(namespace=ns, state_path=state)
    s.create_pool("p", {"role": "actor"}, {"cpu": 0.5}, target_agents=2)
    s.create_agent("keep-0", "p", Echo, actor_args=(0,))
    s.create_agent("keep-1", "p", Echo, actor_args=(1,))
    old = {a["name"]: a["pid"] for a in s.list_agents()}
    ray.kill(s.supervisor, no_restart=True)  # the agents die with their owner
    assert eventually(lambda: all(not _alive(pid) for pid in old.values()), timeout=30)
    s2 = Scheduler(namespace=ns, state_path=state)
    try:
        assert s2.status["pools"] == 1 and s2.status["agents"] == 2
        assert s2.get_pool("p")["used"] == {"cpu": 1.0}
        for name, pid in old.items():
            who = s2.get_agent(name).call("whoami")
            assert who["pid"] != pid and who["value"] == int(name[-1])
    finally:
        s2.delete_pool("p", force=True)
        ray.kill(s2.supervisor)


def test_higher_priority_pool_preempts_a_lower_one_and_tells_the_victim_first(sched, tmp_path):
    free_cpu = ray.available_resources().get("CPU", 0)
    sched.create_pool("batch", {"tier": "low"}, {"cpu": free_cpu}, priority=0)
    markers = []
    for i in range(int(free_cpu)):  # fill the whole cluster with low-priority agents
        markers.append(tmp_path / f"victim-{i}")
        sched.create_agent(f"low-{i}", "batch", Evictable, resources={"cpu": 1}, actor_args=(str(markers[-1]),))
    sched.create_pool("serving", {"tier": "high"}, {"cpu": 2}, priority=10)
    ref = sched.create_agent("high-0", "serving", Echo, resources={"cpu": 2}, actor_args=("served",))
    assert ref.call("whoami")["value"] == "served"
    preempted = [a["name"] for a in sched.list_agents("batch") if a["status"] == "preempted"]
    newest = [f"low-{i}" for i in range(int(free_cpu))][-2:]
    assert sorted(preempted) == newest  # the two newest low-priority agents made room, no more
    for i in range(int(free_cpu)):
        told = markers[i].exists()
        assert told == (f"low-{i}" in preempted)
        if told:
            assert "preempted by agent 'high-0' of pool 'serving' (priority 10)" in markers[i].read_text()
    assert sched.get_pool("batch")["used"] == {"cpu": free_cpu - 2}
    assert [e["agent"] for e in sched.events() if e["kind"] == "preempted"] == newest[::-1]
    # Not revived: the victims stay preempted through ten supervisor checks.
    assert holds_for(
        lambda: all(a["status"] == "preempted" for a in sched.list_agents("batch") if a["name"] in preempted), 2.0
    )


def test_an_agent_may_assign_its_own_name_and_labels(sched):
    """Regression: the guide's agents do `self.name = name`; that used to fail ('property has no setter')."""
    sched.create_pool("p", {"team": "a"}, {"cpu": 0.25})
    ref = sched.create_agent("guide-agent", "p", SelfNamed, actor_kwargs={"suffix": "-display", "tier": "gold"})
    me = ref.call("identity")
    assert me["name"] == "guide-agent-display" and me["labels"] == {"team": "a", "tier": "gold"} and me["supervised"]
    # The supervisor still knows it by its agent name and heartbeats keep it alive under that name.
    assert eventually(lambda: "pid" in sched.agent_info("guide-agent")["report"], timeout=30)  # a beat arrived
    info = sched.agent_info("guide-agent")
    assert info["status"] == "alive" and info["labels"] == {"team": "a"}


def test_a_dead_agent_that_is_not_recreated_frees_its_share(sched):
    """Regression: at target without the dead agent, supervision stopped it but kept its ledger entry."""
    sched.create_pool("p", {}, {"cpu": 1.0}, target_agents=1)
    a = sched.create_agent("a", "p", Echo, resources={"cpu": 0.5})
    sched.create_agent("b", "p", Echo, resources={"cpu": 0.5})
    assert sched.get_pool("p")["used"] == {"cpu": 1.0}
    os.kill(a.call("whoami")["pid"], signal.SIGKILL)
    deadline = time.time() + 30
    while time.time() < deadline and sched.agent_info("a")["status"] != "stopped":
        time.sleep(0.2)
    assert sched.agent_info("a")["status"] == "stopped"  # b alone meets target_agents=1: a stays down ...
    assert sched.get_pool("p")["used"] == {"cpu": 0.5}  # ... and gives its share back
    assert "stopped" in [e["kind"] for e in sched.events()]
    sched.create_agent("c", "p", Echo, resources={"cpu": 0.5})  # the freed share is usable again
    for name in ("a", "b", "c"):  # deleting the stopped record does not release its share twice
        sched.delete_agent(name)
    pool = sched.get_pool("p")
    assert pool["used"] == {} and pool["reserved"] == {} and pool["free"] == {"cpu": 1.0}  # ledger empty


def test_ray_options_name_names_the_ray_actor_and_the_agent_keeps_its_own(sched):
    """The guide's `ray_options={"name": ...}` (reconnect by Ray name) used to be refused when it differed."""
    sched.create_pool("p", {}, {"cpu": 0.5})
    ref = sched.create_agent("worker-1", "p", Echo, actor_args=(7,), ray_options={"name": "persistent-agent"})
    assert ref.name == "worker-1" and ref.call("whoami")["value"] == 7
    direct = ray.get_actor("persistent-agent", namespace=sched.namespace)  # another driver reconnects so
    assert ray.get(direct.whoami.remote())["pid"] == ref.call("whoami")["pid"]
    assert sched.agent_info("worker-1")["ray_name"] == "persistent-agent"
    with pytest.raises(InvalidOptions, match="Ray name of agent 'worker-1'"):
        sched.create_agent("worker-2", "p", Echo, ray_options={"name": "persistent-agent"})
    os.kill(ref.call("whoami")["pid"], signal.SIGKILL)  # recreated under the same Ray name
    sched.wait_alive("worker-1", min_incarnation=1, timeout_s=30)
    assert sched.get_agent("worker-1").call("whoami")["value"] == 7
    sched.delete_agent("worker-1")
    assert sched.get_pool("p")["used"] == {}


def test_task_queue_priorities_and_task_preemption_on_real_actors(sched):
    sched.create_pool("q", {}, {"cpu": 0.25})
    worker = sched.create_agent("w", "q", TaskWorker, ray_options={"max_concurrency": 4})
    low = sched.submit_task("q", {"seconds": 30}, priority=1, labels={"kind": "batch"})
    task = sched.choose_task("q", agent="w")
    assert task["task_id"] == low and sched.running_tasks("q")[0]["agent"] == "w"
    running = worker.handle.run.remote(low, 30)

    sched.set_preemption_policy(min_priority_gap=5, protected={"tier": "critical"})
    sched.submit_task("q", {"seconds": 0}, priority=3, task_id="not-enough")
    assert sched.evaluate_preemption("q") is None  # 3 - 1 < 5: the batch task keeps running
    sched.submit_task("q", {"seconds": 0}, priority=10, task_id="urgent")
    decision = sched.execute_preemption("q")
    assert decision["victim"]["task_id"] == low and decision["task"]["task_id"] == "urgent"
    assert ray.get(running, timeout=10) == "preempted"  # the agent stopped its task when told
    assert worker.call("preempted_told")[0][0] == low
    # The victim is back in the queue; the urgent task is handed out first, then the rest by priority.
    assert [t["task_id"] for t in sched.pending_tasks("q")] == ["urgent", "not-enough", low]
    assert sched.choose_task("q", agent="w")["task_id"] == "urgent"
    sched.complete_task("urgent")
    assert "task_preempted" in [e["kind"] for e in sched.events()]
    with pytest.raises(PoolNotFound):
        sched.submit_task("no-such-pool", None)


def _gone(pid: int) -> bool:
    """The process has exited (a zombie its parent has not reaped yet counts as gone)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_heartbeat_reports_stay_bounded_while_the_supervisor_stalls(sched):
    """A stalled scheduler head (SIGSTOP: alive, answering nothing) must not pile up an agent's load reports:
    at most `max_pending_reports` wait, the rest are dropped and counted; once it resumes they drain."""
    sched.create_pool("hb", {}, {"cpu": 0.25}, target_agents=1)
    ref = sched.create_agent("beater", "hb", Echo)
    sup_pid = ray.get(sched.supervisor.__ray_call__.remote(lambda self: os.getpid()))
    os.kill(sup_pid, signal.SIGSTOP)
    t_stop = time.time()
    try:
        # heartbeat_interval_s=0.2: poll the agent (alive; only its head is stopped) until the queue is full
        # and beats are being dropped, not a fixed wait
        deadline = time.time() + 30
        stalled = ref.call("sm_pending_reports")
        while time.time() < deadline and (stalled["pending"] < Echo.max_pending_reports or stalled["dropped"] < 3):
            time.sleep(0.1)
            stalled = ref.call("sm_pending_reports")
        time.sleep(max(0.0, t_stop + 7.0 - time.time()))  # stalled longer than stale_after_s (6 s)
    finally:
        os.kill(sup_pid, signal.SIGCONT)
    assert stalled["pending"] == Echo.max_pending_reports and stalled["dropped"] >= 3
    deadline = time.time() + 10
    while ref.call("sm_pending_reports")["pending"] > 1 and time.time() < deadline:
        time.sleep(0.1)
    assert ref.call("sm_pending_reports")["pending"] <= 1  # drained: the head took the backlog
    while sched.agent_info("beater")["report"].get("dropped_reports", 0) < 3 and time.time() < deadline:
        time.sleep(0.1)  # the next fresh beat tells the head how many were dropped
    assert sched.agent_info("beater")["report"]["dropped_reports"] >= 3
    # a head stalled past stale_after_s did not condemn a healthy agent on waking: silence counts from then
    assert sched.agent_info("beater")["status"] == "alive" and sched.agent_info("beater")["incarnation"] == 0


def test_a_crashed_head_recovers_on_its_own_reattaches_survivors_and_keeps_its_queue(local_ray, tmp_path):
    """SIGKILL of the scheduler head (the supervisor's process; Ray restarts the actor): with no driver call,
    the restarted head re-attaches to the agent that outlived it (ray_options lifetime detached: same
    process, fresh metrics), recreates the one that died with it, requeues the task that agent was running
    and keeps the queue's order; dispatch and health checks work on the result.
    Before the fix the restarted head reloaded its state file and then did nothing: the dead agent stayed
    `alive` in its records and nothing was recreated until some driver built a new Scheduler."""
    s = _scheduler(state_path=tmp_path / "head.pkl", check_interval_s=0.2, heartbeat_interval_s=0.2)
    s.create_pool("p", {"role": "w"}, {"cpu": 0.25}, target_agents=2)
    try:
        s.create_agent("owned", "p", Echo, actor_args=(1,))
        s.create_agent("kept", "p", Echo, actor_args=(2,), ray_options={"lifetime": "detached"})
        pids = {a["name"]: a["pid"] for a in s.list_agents()}
        s.submit_task("p", "low", priority=1, task_id="low")
        s.submit_task("p", "high", priority=5, task_id="high")
        assert s.choose_task("p", "owned")["task_id"] == "high"
        s.submit_task("p", "mid", priority=3, task_id="mid")
        head = ray.get(s.supervisor.__ray_call__.remote(lambda self: os.getpid()))
        killed = time.time()
        os.kill(head, signal.SIGKILL)
        # No call reaches the head meanwhile: it must start itself. Its state file (read here without
        # asking the head) says when recovery is done; a loaded 2-core machine may need more than seconds.
        deadline = time.time() + 90
        while time.time() < deadline:
            time.sleep(0.5)
            try:
                saved = load_state(tmp_path / "head.pkl")[1]
            except Exception:  # mid-replace on some filesystems
                continue
            if saved["owned"].incarnation == 1 and saved["owned"].status == "alive":
                break
        events = s.events(killed)
        first_call = time.time()
        kinds = {(e["kind"], e["agent"]) for e in events}
        assert {("reattached", "kept"), ("recreated", "owned"), ("task_requeued", "owned")} <= kinds
        assert all(e["time"] < first_call for e in events)
        agents = {a["name"]: a for a in s.list_agents()}
        assert agents["kept"]["pid"] == pids["kept"] and agents["kept"]["incarnation"] == 0
        assert agents["owned"]["pid"] != pids["owned"] and agents["owned"]["incarnation"] == 1
        assert agents["kept"]["report"]["time"] > killed  # metrics flow to the restarted head
        assert s.get_agent("owned").call("whoami")["value"] == 1
        assert [t["task_id"] for t in s.pending_tasks("p")] == ["high", "mid", "low"]  # nothing lost, same order
        assert s.get_pool("p")["used"] == {"cpu": 0.5}
        # Metrics-driven dispatch on the recovered pool: pushed load steers least_busy.
        s.update_agent_metrics("owned", {"load": 9})
        assert s.choose("p", strategy="least_busy").name == "kept"
        # A health check on demand finds an agent killed after the restart, before the monitor would.
        os.kill(agents["kept"]["pid"], signal.SIGKILL)
        deadline = time.time() + 10
        while not _gone(agents["kept"]["pid"]) and time.time() < deadline:
            time.sleep(0.05)  # dead: the check below asks about a process that is gone
        checked = s.reconcile(stale_after_s=60)
        assert "kept" in checked["stale"] or s.agent_info("kept")["incarnation"] == 1
        assert s.wait_alive("kept", min_incarnation=1, timeout_s=30)["pid"] != pids["kept"]
    finally:
        s.delete_pool("p", force=True)
        ray.kill(s.supervisor)
