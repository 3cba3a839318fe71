"""A run on a multi-process, two-node Ray cluster joined by address:

* a run whose agent-calling stages are Ray tasks in the cluster's worker processes, its actor role pinned to
  the second node: the tasks import the installed project. It also survives SIGKILL of its actor-engine
  agent: the schedulemesh supervisor recreates it (restored from the last checkpoint), the task that hit
  the dead agent retries, the run completes. A second driver (a subprocess) asks the run's supervisor where
  the actor engine lives, kills it and times its replacement.

(A 24-round run beside it showed the console of a long run until 2026-12-01: ~90 CPU-s for what
test_console.py shows of the progress display's line budget and the end-to-end CLI run of test_deployments.py
shows of the libraries' notes, with registration on.)

`ray start` cannot add a second node on loopback on these machines (Ray rewrites 127.0.0.1 to the primary
interface's address for non-head nodes), so the cluster is ray.cluster_utils.Cluster: a separate GCS and
one raylet process per node, the same processes `ray start` launches.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from .conftest import LOOPBACK_RAY, NO_PRESTART, PY, REPO, cli_env, kill_tree, read_state, smoke_args, start_cli

NS = "recovery-test"
KILLER = """
import json, os, signal, sys, time, psutil, ray
from schedulemesh import Scheduler
ray.init(address=sys.argv[1], namespace=sys.argv[2])
sched = Scheduler(namespace=sys.argv[2])
before = sched.agent_info(sys.argv[3])
# Ray titles an actor process after the method it runs: kill it in the middle of a generate call.
proc = psutil.Process(before["pid"])
while "generate" not in " ".join(proc.cmdline()):
    time.sleep(0.005)
t0 = time.perf_counter()
os.kill(before["pid"], signal.SIGKILL)
after = sched.wait_alive(sys.argv[3], min_incarnation=1, timeout_s=120)
print("RESULT " + json.dumps({"before": before["pid"], "after": after["pid"], "recreations": after["recreations"],
                              "seconds": time.perf_counter() - t0}))
"""


@pytest.fixture(scope="module")
def two_node_cluster():
    os.environ.update(LOOPBACK_RAY)
    from ray.cluster_utils import Cluster

    head = {"num_cpus": 2, "include_dashboard": False, "_system_config": NO_PRESTART}
    cluster = Cluster(initialize_head=True, head_node_args=head)
    cluster.add_node(num_cpus=2, resources={"node2": 1})
    try:
        yield cluster
    finally:
        cluster.shutdown()


@pytest.fixture(scope="module")
def runs(prefect_api, two_node_cluster, tmp_path_factory):
    """The cluster run, with its actor engine killed after round 2 by a second driver."""
    tmp = tmp_path_factory.mktemp("cluster")
    (tmp / "b").mkdir()
    address = two_node_cluster.address
    cluster_args = smoke_args(
        tmp / "b",
        "run_name=cluster",
        "rounds=4",
        f"ray.address={address}",
        f"barrier.namespace={NS}",
        # The agent-calling stages as Ray tasks (the default runs them as flow threads): the cluster's
        # worker processes must import the installed project to run them.
        "ray.agent_stages=ray",
        "actor.resources.custom={node2: 0.5}",  # pin the actor role to the second node
    )
    env = cli_env()
    # cwd outside the repo: no implicit imports
    cluster_run = start_cli(cluster_args, tmp / "cluster.log", env=env, cwd=tmp / "b")
    try:
        deadline = time.time() + 400
        while read_state(tmp / "b" / "cluster").get("last_completed_round", -1) < 2:
            assert cluster_run.poll() is None and time.time() < deadline, (tmp / "cluster.log").read_text()[-3000:]
            time.sleep(0.2)
        killed_after = read_state(tmp / "b" / "cluster")["last_completed_round"]
        out = subprocess.run(
            [PY, "-c", KILLER, address, NS, "cluster:actor:0"],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert out.returncode == 0, out.stderr[-3000:]
        kill = json.loads(next(ln for ln in out.stdout.splitlines() if ln.startswith("RESULT "))[7:])
        print(
            f"\nactor engine (pid {kill['before']}) killed mid-generate after round {killed_after}; recreated as pid "
            f"{kill['after']} and answering after {kill['seconds']:.2f}s"
        )
        cluster_rc = cluster_run.wait(timeout=400)
    finally:
        kill_tree(cluster_run.pid)
    return {
        "dir": tmp,
        "cluster": two_node_cluster,
        "cluster_rc": cluster_rc,
        "cluster_out": (tmp / "cluster.log").read_text(),
        "kill": kill,
    }


@pytest.mark.slow
def test_flow_runs_on_cluster_workers_importing_installed_project(runs):
    out = runs["cluster_out"]
    assert runs["cluster_rc"] == 0, out[-3000:]
    state = read_state(runs["dir"] / "b" / "cluster")
    assert state["last_completed_round"] == 4
    workers = state["workers"]
    assert workers, "the fan-out tasks reported where they ran"
    for w in workers:
        assert w["pid"] != os.getpid() and w["pythonpath"] == ""
        assert Path(w["planact_file"]).resolve().is_relative_to(REPO) or "site-packages" in w["planact_file"]
    assert "ray.cluster" not in out
    cluster = runs["cluster"]
    worker_node = next(n for n in cluster.list_all_nodes() if n is not cluster.head_node)
    assert worker_node.node_id  # the second node is part of the cluster the actor role was pinned to


@pytest.mark.slow
def test_run_survives_sigkill_of_its_actor_engine(runs):
    log, kill = runs["cluster_out"], runs["kill"]
    assert runs["cluster_rc"] == 0, log[-4000:]
    state = read_state(runs["dir"] / "b" / "cluster")
    assert state["last_completed_round"] == 4
    assert [row["round"] for row in state["table"]] == [1, 2, 3, 4]
    assert kill["after"] != kill["before"] and kill["recreations"] == 1
    assert "Retry 1/2" in log  # the task that was talking to the killed engine ran again
