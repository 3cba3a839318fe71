"""schedulemesh across processes and nodes.

* re-attach: a driver process creates pools and agents on a `ray start --head` cluster and exits; a new
  driver process sees the same pools and the same agent processes;
* placement: a three-node ray.cluster_utils.Cluster (a GCS and one raylet per node; `ray start` cannot add
  loopback worker nodes here) whose nodes carry different labels and custom resources.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest
import ray

from schedulemesh import Scheduler

from .conftest import LOOPBACK_RAY, PY, REPO, token_env
from .sm_agents import Echo

DRIVER = """
import json, sys, ray
from schedulemesh import Scheduler
from tests.integration.sm_agents import Echo
ray.init(address=sys.argv[1], namespace="reattach")
s = Scheduler(namespace="reattach")
if sys.argv[2] == "create":
    s.create_pool("gen", {"role": "actor"}, {"cpu": 0.5}, target_agents=2)
    for i in range(2):
        s.create_agent(f"gen-{i}", "gen", Echo, actor_args=(i,))
out = {"pools": s.list_pools(), "agents": {a["name"]: s.get_agent(a["name"]).call("whoami")["pid"]
                                            for a in s.list_agents()}}
print("RESULT " + json.dumps(out))
"""


def _driver(address: str, mode: str) -> dict:
    env = token_env()
    out = subprocess.run(
        [PY, "-c", DRIVER, address, mode], cwd=REPO, env=env, capture_output=True, text=True, timeout=180
    )
    assert out.returncode == 0, out.stderr[-3000:]
    line = next(ln for ln in out.stdout.splitlines() if ln.startswith("RESULT "))
    return json.loads(line[len("RESULT ") :])


@pytest.mark.slow
def test_new_driver_reattaches_to_pools_and_agents(ray_head):
    first = _driver(ray_head, "create")
    assert sorted(first["agents"]) == ["gen-0", "gen-1"]
    second = _driver(ray_head, "attach")  # the first driver process has exited
    assert second["agents"] == first["agents"]  # the very same agent processes answer
    pool = second["pools"][0]
    assert pool["name"] == "gen" and pool["used"] == {"cpu": 1.0} and pool["agents"] == ["gen-0", "gen-1"]


@pytest.fixture
def three_nodes():
    os.environ.update(LOOPBACK_RAY)
    from ray.cluster_utils import Cluster

    cluster = Cluster(
        initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False, "labels": {"zone": "head"}}
    )
    gpu_like = cluster.add_node(num_cpus=2, resources={"accel": 2}, labels={"zone": "b"})
    cpu_only = cluster.add_node(num_cpus=2, labels={"zone": "c"})
    ray.init(address=cluster.address, namespace="three-nodes")
    try:
        yield cluster, gpu_like, cpu_only
    finally:
        ray.shutdown()
        cluster.shutdown()


@pytest.mark.slow
def test_agents_land_on_the_nodes_their_pools_ask_for(three_nodes):
    cluster, gpu_like, cpu_only = three_nodes
    s = Scheduler(namespace="three-nodes")
    s.create_pool(
        "trainers", {"role": "trainer"}, {"cpu": 0.5, "accel": 1}, target_agents=2, placement_strategy="STRICT_PACK"
    )
    s.create_pool("engines", {"role": "engine"}, {"cpu": 0.5}, target_agents=2, node_labels={"zone": "c"})
    where = {}
    for i in range(2):
        where[f"t{i}"] = s.create_agent(f"t{i}", "trainers", Echo).call("whoami")["node_id"]
        where[f"e{i}"] = s.create_agent(f"e{i}", "engines", Echo).call("whoami")["node_id"]
    assert where["t0"] == where["t1"] == gpu_like.node_id  # custom resource + gang placement
    assert where["e0"] == where["e1"] == cpu_only.node_id  # node label selector
    # asking for a label no node has fails at once instead of pending forever
    s.create_pool("mars", {}, {"cpu": 0.5}, node_labels={"zone": "mars"})
    with pytest.raises(Exception, match="no alive node matches"):
        s.create_agent("m", "mars", Echo)
