"""SIGKILL a (pipelined) training run after round k completed; the same command resumes at k+1 in the same MLflow run.

The actor is an `openai` engine, frozen (`actor.train: false`), served over HTTP by a loopback stand-in
(tests/servers/loopback.py: no internet here) that answers with a real tiny Llama. So the same runs also
show: a frozen role is skipped by training and stays frozen across a resume; an API role's key comes from
a Prefect Secret block and appears nowhere a run writes (it was test_openai_role.py's own run until
2026-11-30). The planner trains in a group of two sharded ranks (FSDP2), so they also show a trainer group
restored from a checkpoint. (Two ranks against one process, data-parallel and sharded, and a killed rank:
test_trainer_group.py.)
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import tempfile
import time
import uuid
from pathlib import Path

import psutil
import pytest
from mlflow.tracking import MlflowClient

from planact.config import RunConfig
from planact.experience import ExperienceStore
from planact.models import materialize_tiny

from ..servers.loopback import openai_server
from .api_actor import files_holding, hf_answer, prefect_records, save_secret
from .conftest import cli_env, read_state, run_cli, smoke_args, start_cli


@pytest.mark.slow
def test_sigkill_then_resume_without_duplicate_steps(prefect_api, tmp_path):
    """The runs' API key comes from a Prefect Secret block, other keys sit in the environment. Neither canary may
    appear anywhere the runs write: MLflow (the SQLite store and the artifact folder), the run folder
    (checkpoints, state, experience, telemetry), the console and Prefect's logs, the Prefect server's
    runs/parameters/logs/artifacts, Ray's logs."""
    block_key = f"sk-canary-block-{uuid.uuid4().hex}"
    env_key = f"sk-canary-env-{uuid.uuid4().hex}"
    save_secret(prefect_api, "planact-canary", block_key)
    ray_tmp = Path(tempfile.mkdtemp(prefix="rc", dir="/tmp"))  # short: Ray's socket paths have a length limit
    served = materialize_tiny(RunConfig().actor.tiny, tmp_path / "served-actor", seed=2)
    env = cli_env(OPENAI_API_KEY=env_key, ANTHROPIC_API_KEY=env_key, HF_TOKEN=env_key, RAY_TMPDIR=str(ray_tmp))
    env.pop("LOOPBACK_KEY", None)  # only the Secret block can provide it
    try:
        with openai_server(hf_answer(served), key=block_key) as srv:
            _kill_then_resume(tmp_path, srv, env)
        completions = [r for r in srv.requests if r["path"] == "/v1/completions"]
        assert completions and all(r["body"]["model"] == "tiny-actor" for r in completions)
        assert {r["body"]["temperature"] for r in completions} >= {0.0, 1.0}  # rollouts sample, greedy eval does not
        # The canaries: the block's key was really used (the server refuses any other) ...
        assert (tmp_path / "mlflow.db").is_file() and list(ray_tmp.rglob("*.log"))
        # ... and is nowhere a run writes; neither is the environment's.
        prefect_text = prefect_records(prefect_api)
        # Positive controls: the same searches do find what the runs did write (the config's model name).
        assert "tiny-actor" in prefect_text and files_holding(tmp_path / "mlflow.db", b"tiny-actor")
        logs = "".join(f.read_text() for f in tmp_path.glob("*.log"))
        for canary in (block_key, env_key):
            assert canary not in logs
            assert files_holding(tmp_path, canary.encode()) == []
            assert files_holding(ray_tmp, canary.encode()) == []
            assert canary not in prefect_text
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)


def _kill_then_resume(tmp_path, srv, env) -> None:
    """Start, SIGKILL after round 2, refuse a changed model, resume to round 4; check every round once."""
    args = smoke_args(
        tmp_path,
        "run_name=resume",
        "rounds=4",
        "actor.train=false",
        "actor.engine=openai",
        f"actor.openai.base_url={srv.url}/v1",
        "actor.openai.model=tiny-actor",
        "actor.openai.mode=completions",
        "actor.openai.api_key_env=LOOPBACK_KEY",
        "actor.openai.api_key_secret=planact-canary",
        # Pipelined rounds (the planner trains in its own actor while the next round generates): a kill
        # lands with a round generated and recorded but its predecessor's training not yet finished.
        "pipeline.max_staleness=1",
        "planner.resources.colocate_trainer=false",
        "planner.resources.trainer_workers=2",
        "planner.resources.fsdp=true",
        "ray.num_cpus=4",
    )
    proc = start_cli(args, tmp_path / "first.log", env=env)
    deadline = time.time() + 400
    k = -1
    while time.time() < deadline and proc.poll() is None:
        k = read_state(tmp_path / "resume").get("last_completed_round", -1)
        if k >= 2:
            break
        time.sleep(0.2)
    assert proc.poll() is None, (
        "the run finished before it could be killed: " + (tmp_path / "first.log").read_text()[-2000:]
    )
    # SIGKILL of the driver alone (as the OOM killer does): no cleanup handlers run, and what it started must
    # not outlive it: Ray's daemons share its fate, its agents and workers are removed by planact.reaper.
    started = {p.pid for p in psutil.Process(proc.pid).children(recursive=True)}
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    deadline = time.time() + 20
    while (
        left := [pid for pid in started if psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie"]
    ) and time.time() < deadline:
        time.sleep(0.5)
    assert not left, [" ".join(psutil.Process(pid).cmdline())[:60] for pid in left if psutil.pid_exists(pid)]
    state = read_state(tmp_path / "resume")
    k = state["last_completed_round"]
    assert 2 <= k < 4
    run_id = state["mlflow_run_id"]

    # Resume guard: a changed model spec is refused before any work, naming the field; nothing moves.
    rc, out = run_cli(args + ["--set", "planner.tiny.num_layers=3"], tmp_path / "refused.log", env=env)
    assert rc == 2 and "planner.tiny.num_layers: 2 -> 3" in out and "Traceback" not in out, out[-2000:]
    assert read_state(tmp_path / "resume") == state

    # A safe change (evaluation cadence) is allowed and reported.
    rc, out = run_cli(args + ["--set", "tracking.eval_every=2"], tmp_path / "second.log", env=env)
    assert rc == 0, out[-3000:]
    assert "resuming with changed settings (allowed): tracking.eval_every: 1 -> 2" in out
    m = re.search(r"resuming run 'resume' after round (\d+)", out)
    assert m and int(m.group(1)) == k
    assert f"round {k + 1}/4" in out and f"round {k}/4" not in out  # resumes at k+1, completed rounds not re-run
    assert "actor is frozen (train: false): skipping its training this round" in out

    state = read_state(tmp_path / "resume")
    assert state["mlflow_run_id"] == run_id and state["last_completed_round"] == 4
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    for key in ("time/round_s", "actor/reward_mean", "planner/loss"):  # (no actor/loss: the actor is frozen)
        steps = [x.step for x in client.get_metric_history(run_id, key)]
        assert sorted(steps) == [1, 2, 3, 4], (key, steps)  # every round once: no gaps, no duplicates
    assert client.get_run(run_id).info.status == "FINISHED"
    table = read_state(tmp_path / "resume")["table"]
    assert [r["round"] for r in table] == [1, 2, 3, 4]
    assert all(r["actor/loss"] is None and r["planner/loss"] is not None for r in table)  # frozen stays frozen
    last = tmp_path / "resume" / "checkpoints" / "round_00004"
    assert (last / "planner").is_dir() and not (last / "actor").exists()  # an API role has no weights to keep
    # Both runs trained the planner in its two ranks, each holding half of its parameters.
    assert {m.value for m in client.get_metric_history(run_id, "planner/trainer_workers")} == {2.0}
    assert {round(m.value, 1) for m in client.get_metric_history(run_id, "planner/param_share")} == {0.5}
    # Acknowledged experience of the rounds before the kill is still there.
    pool = ExperienceStore(tmp_path / "resume" / "experience")
    assert all(pool.query(run="resume", round=r, role="actor") for r in range(1, 5))
    stats = pool.stats()
    assert stats["rounds"] == 4 and stats["torn_lines"] == 0  # a re-run round replaced its items, none lost
