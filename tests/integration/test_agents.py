"""Role agents on a real local Ray: replicas, a separate trainer, weight sync and plain rounds (the flow's round
without Prefect: flows.rounds.play_round(..., plain=True))."""

from __future__ import annotations

import os

import pytest
import ray
import torch

from flows.rounds import play_round
from planact import agents
from planact.config import load_config

from .conftest import LOOPBACK_RAY, SMOKE


@pytest.fixture
def local_ray():
    os.environ.update(LOOPBACK_RAY)
    ray.init(address="local", num_cpus=2, include_dashboard=False, namespace="planact-test")
    try:
        yield
    finally:
        ray.shutdown()


@pytest.mark.slow
def test_replicas_and_separate_trainer_stay_in_sync(local_ray, tmp_path):
    cfg = load_config(
        SMOKE,
        [
            f"checkpoint.root={tmp_path}",
            "run_name=agents",
            "actor.resources.replicas=2",
            "actor.resources.num_cpus=0.25",
            "planner.resources.colocate_trainer=false",
            "planner.resources.num_cpus=0.25",
        ],
    )
    planner = agents.create_role_group(cfg, "planner")
    actor = agents.create_role_group(cfg, "actor")
    assert planner.trainer not in planner.engines and len(actor.engines) == 2
    pids = {actor.worker(n).health()["pid"] for n in actor.engines}
    assert len(pids) == 2  # two engine processes: generation really fans out

    for g in (planner, actor):
        curve = agents.warm_start_and_sync(cfg, g, 0, 30)
        assert curve[-1]["step"] == 30
    versions = []
    for r in (1, 2):
        m = play_round(cfg, r, planner, actor, None, plain=True)["metrics"]
        assert 0.0 <= m["success"] <= 1.0 and m["time/round_s"] > 0 and m["time/barrier_s"] >= 0
        versions.append([g.worker(n).health()["weight_version"] for g in (planner, actor) for n in g.engines])
    for g in (planner, actor):
        ref, v = g.worker(g.trainer).get_weights()
        for n in g.engines:
            w, vn = g.worker(n).get_weights()
            assert vn == v and all(torch.equal(ref[k], w[k]) for k in ref)  # every engine serves the trained weights
    with pytest.raises(RuntimeError, match="cannot host"):
        agents.check_feasible(load_config(SMOKE, ["actor.resources.num_gpus=1"]), ["actor"])
