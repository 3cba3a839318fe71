"""Trainer groups on real Ray actors: a role trained by 2 gloo ranks matches one process, survives a
SIGKILL of a rank mid-step (rolled back, rank recreated, group re-formed), syncs its engines, with full
copies per rank and sharded with FSDP2. (A Plan/Act run whose planner trains in two sharded ranks, killed and
resumed: test_resume.py.)"""

from __future__ import annotations

import os
import random
import signal
import time

import psutil
import pytest
import ray

from planact import agents
from planact.config import load_config
from planact.initial_models import initial_model_path
from planact.models import load_model
from planact.rl.trainer import RoleTrainer

from .conftest import SMOKE


def _samples(n: int, seed: int, longest: int) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        p, t = rng.randint(5, longest), rng.randint(2, longest)
        out.append(
            {
                "prompt_ids": [rng.randint(4, 20) for _ in range(p)],
                "token_ids": [rng.randint(4, 20) for _ in range(t)],
                "logprobs": [-rng.uniform(0.5, 3.0) for _ in range(t)],
                "advantage": rng.choice([-1.0, 1.0]),
                "sample_id": i,
            }
        )
    return out


def _cpu_seconds(pid: int) -> float:
    times = psutil.Process(pid).cpu_times()
    return times.user + times.system


def _max_diff(a: dict, b: dict) -> float:
    return max(float((a[k] - b[k]).abs().max()) for k in a)


@pytest.fixture(scope="module")
def local_ray():
    # One Ray for both modes (each test deletes its groups): a local Ray's start is ~5 CPU-s.
    # address="local": without it ray.init joins any cluster another test started on this machine.
    ray.init(address="local", num_cpus=4, include_dashboard=False)
    yield
    ray.shutdown()


@pytest.mark.slow
@pytest.mark.parametrize("fsdp", [False, True], ids=["data-parallel", "fsdp2"])
def test_two_ranks_match_one_process_and_survive_a_killed_rank(local_ray, tmp_path, fsdp):
    # fsdp2: gloo on CPU shards too (torch 2.13): parameters, gradients and AdamW state split over the
    # ranks, gathered back into rank 0's model after each step.
    cfg = load_config(
        SMOKE,
        [
            f"checkpoint.root={tmp_path}",
            "run_name=tg",
            "actor.resources.trainer_workers=2",
            "actor.resources.replicas=2",
            "actor.rl.num_minibatches=4",
            "actor.resources.trainer_timeout_s=150",  # a recreated rank can take a minute to start on loaded CI
            f"actor.resources.fsdp={str(fsdp).lower()}",
        ],
    )
    group = agents.create_role_group(cfg, "actor")
    assert len(group.ranks) == 1 and group.extra_sync == ("tg:actor:1",)
    model, tok = load_model(initial_model_path(cfg, "actor"))
    single = RoleTrainer(model, tok.pad_token_id, cfg.actor.rl, cfg.actor.sampling.temperature)

    first = _samples(64, 1, 30)
    metrics = agents.train_and_sync(group, first, "step-1")
    single.train_step(first)
    assert metrics["trainer_workers"] == 2 and metrics["ranks_resent"] == 1  # the new rank got rank 0's state
    assert metrics["param_share"] == pytest.approx(0.5 if fsdp else 1.0, abs=0.02)  # rank 0 trained on half
    weights, version = group.worker(group.trainer).get_weights()
    assert version == 1 and _max_diff(weights, model.state_dict()) < 1e-5
    engine_weights, engine_version = group.worker("tg:actor:1").get_weights()  # synced like today
    assert engine_version == 1 and _max_diff(engine_weights, weights) == 0.0
    # A second step starts from the optimizer state the first one left (gathered and re-sharded under FSDP).
    second = _samples(48, 3, 30)
    metrics = agents.train_and_sync(group, second, "step-1b")
    single.train_step(second)
    assert metrics["ranks_resent"] == 0  # in step: nothing re-sent
    weights, version = group.worker(group.trainer).get_weights()
    assert version == 2 and _max_diff(weights, model.state_dict()) < 1e-5

    # SIGKILL rank 1 in the middle of a long step (several minibatch updates): the step fails cleanly ...
    # 300 samples: ~2 CPU-s per rank per minibatch, so the 0.3 s kill below still lands mid-step; 1200
    # spent ~40 CPU-s more per mode (the ranks' retry and the one process) for the same check.
    big = _samples(300, 2, 60)
    rank = group.handle(group.ranks[0])
    pid = ray.get(rank.sm_ready.remote())["pid"]
    busy = _cpu_seconds(pid)
    pending = group.handle(group.trainer).train.remote(big, "step-2")
    # Killed once it has spent 0.3 s of CPU on this step (an idle rank spends none): mid-step on a quiet
    # machine and a loaded one alike, where a fixed sleep needed a step long enough for the slowest case.
    deadline = time.time() + 60
    while _cpu_seconds(pid) - busy < 0.3 and time.time() < deadline:
        time.sleep(0.02)
    os.kill(pid, signal.SIGKILL)
    with pytest.raises(ray.exceptions.RayTaskError, match="the step failed on a rank"):
        ray.get(pending, timeout=300)
    # ... and the retry (what the Prefect task does) waits for the recreated rank, re-forms the group,
    # re-sends the rolled-back state, and lands exactly where one process lands: nothing applied twice.
    metrics = agents.train_and_sync(group, big, "step-2-retry")
    single.train_step(big)
    assert metrics["ranks_resent"] == 1
    assert ray.get(group.handle(group.ranks[0]).sm_ready.remote())["pid"] != pid
    weights, version = group.worker(group.trainer).get_weights()
    assert version == 3 and _max_diff(weights, model.state_dict()) < 1e-5
    agents.delete_role_groups(cfg, [group])


def test_trainer_scaling_benchmark_tiny_mode():
    """benchmarks/trainer_scaling.py in its tiny mode, so the benchmark cannot rot: the scaling table and the
    switch sweep."""
    import subprocess
    import sys

    from .conftest import REPO

    # Both tables from one interpreter (its main() twice): one torch import and one forkserver preload of
    # torch and transformers instead of two.
    both = (
        "import sys; sys.path.insert(0, 'benchmarks'); import trainer_scaling as t; "
        "t.main(['--tiny']); print('=== sweep', flush=True); t.main(['--tiny', '--sweep'])"
    )
    out = subprocess.run(
        [sys.executable, "-c", both],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    scaling, _, swept = out.stdout.partition("=== sweep\n")
    rows = [line.split() for line in scaling.splitlines() if line.strip()[:1].isdigit()]
    assert [r[:2] for r in rows] == [["1", "dp"], ["2", "dp"], ["2", "fsdp"]]
    assert float(rows[0][3]) == 1.0 and all(
        float(r[2]) > 0 for r in rows
    )  # tokens/s and the ratio, measured in the run
    assert all(float(r[4]) < 1e-5 for r in rows)  # data-parallel and sharded steps equal one process's

    table = {line.split()[0]: line.split()[1:] for line in swept.splitlines() if line.startswith(("fp32", "+"))}
    # each switch measured in one run
    assert list(table) == ["fp32", "+bf16", "+fused_adamw", "+micro_batches", "+packed"]
    assert float(table["fp32"][1]) == 1.0 and all(float(v[0]) > 0 and float(v[3]) > 0 for v in table.values())
    assert float(table["+packed"][2]) < 1e-3  # the same update within bf16 tolerance
