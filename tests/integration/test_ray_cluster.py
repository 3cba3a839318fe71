"""The flow against a multi-process, two-node Ray cluster by address; tasks run in worker processes.

`ray start` cannot add a second node on loopback on these machines (Ray rewrites 127.0.0.1 to the primary
interface's address for non-head nodes), so the cluster is ray.cluster_utils.Cluster: a separate GCS and
one raylet process per node, the same processes `ray start` launches.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from .conftest import LOOPBACK_RAY, REPO, cli_env, read_state, run_cli, smoke_args


@pytest.fixture
def two_node_cluster():
    os.environ.update(LOOPBACK_RAY)
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 2, "include_dashboard": False})
    cluster.add_node(num_cpus=2, resources={"node2": 1})
    try:
        yield cluster
    finally:
        cluster.shutdown()


@pytest.mark.slow
def test_flow_runs_on_cluster_workers_importing_installed_project(prefect_api, two_node_cluster, tmp_path):
    worker_node = next(n for n in two_node_cluster.list_all_nodes() if n is not two_node_cluster.head_node)
    rc, out = run_cli(
        smoke_args(
            tmp_path,
            "run_name=cluster",
            f"ray.address={two_node_cluster.address}",
            # The agent-calling stages as Ray tasks (the default runs them as flow threads): the
            # cluster's worker processes must import the installed project to run them.
            "ray.agent_stages=ray",
            "actor.resources.custom={node2: 0.5}",
        ),  # pin the actor role to the second node
        tmp_path / "cli.log",
        env=cli_env(),
        cwd=tmp_path,
    )  # cwd outside the repo: no implicit imports
    assert rc == 0, out[-3000:]
    state = read_state(tmp_path / "cluster")
    assert state["last_completed_round"] == 2
    workers = state["workers"]
    assert workers, "the fan-out tasks reported where they ran"
    for w in workers:
        assert w["pid"] != os.getpid() and w["pythonpath"] == ""
        assert Path(w["planact_file"]).resolve().is_relative_to(REPO) or "site-packages" in w["planact_file"]
    assert "ray.cluster" not in out
    assert worker_node.node_id  # the second node is part of the cluster the actor role was pinned to
