"""prefect.yaml end to end: a real Prefect server, work pool, `prefect deploy --all`, a process worker,
`prefect deployment run`, a real MLflow tracking server; and the two-job deployments meeting on one Ray
cluster. Everything started here is stopped here.

Same seed, same machine: the deployed training run has a twin started from the training CLI with the same
config at the same time (two actor engine replicas, so generation fans out over Ray); every metric except
wall-clock timings must match exactly, step by step, and so must the rollouts each round logged. (It was
test_determinism.py's two CLI runs, 2026-11-29: the deployment run serves as one twin, one whole run less.)
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from planact.config import load_config

from .conftest import BIN, REPO, SMOKE, cli_env, kill_tree, read_state, smoke_args, start_cli

PREFECT = str(BIN / "prefect")


def _prefect(*args: str, env: dict, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([PREFECT, *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def worker(prefect_api, mlflow_server, tmp_path_factory):
    """The `planact` pool, every deployment of prefect.yaml, and a worker polling every second.

    One for the module: `prefect deploy --all` and a worker start cost ~30 s, and a process worker serves
    flow runs one after another (and side by side) as it would in production."""
    env = cli_env(
        PREFECT_API_URL=prefect_api,
        PLANACT_ROOT=str(REPO),
        MLFLOW_TRACKING_URI=mlflow_server,
        PREFECT_WORKER_QUERY_SECONDS="1",
        RAY_AUTH_MODE="token",
    )
    _prefect("work-pool", "create", "planact", "--type", "process", "--overwrite", env=env)
    out = _prefect("deploy", "--all", "--no-prompt", env=env)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    log = open(tmp_path_factory.mktemp("prefect-worker") / "worker.log", "w")
    proc = subprocess.Popen(
        [PREFECT, "worker", "start", "--pool", "planact"],
        cwd=REPO,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        yield env
    finally:
        kill_tree(proc.pid)


def _params(tmp_path, run: str, *overrides: str) -> str:
    cfg = load_config(SMOKE, [f"checkpoint.root={tmp_path}", f"run_name={run}", *overrides])
    return cfg.model_dump_json()


def _run(deployment: str, config_json: str, env: dict, wait: bool = True) -> subprocess.CompletedProcess:
    args = ["deployment", "run", deployment, "--param", f"config={config_json}"]
    return _prefect(*args, *(["--watch", "--watch-timeout", "480"] if wait else []), env=env, timeout=600)


def _flow_run(flow_run_id: str, api: str):
    """The flow run and its artifacts, read from the server at `api` (named, not taken from this process's
    settings: a client that found none started an ephemeral server of its own, which raced another worker's
    for its port and timed out in a suite run)."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with temporary_settings(updates={PREFECT_API_URL: api}), get_client(sync_client=True) as client:
        run = client.read_flow_run(flow_run_id)
        artifacts = client.read_artifacts(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id])))
    return run, artifacts


def _run_id(stdout: str) -> str:
    for line in stdout.splitlines():
        if "UUID:" in line:
            return line.split("UUID:")[1].strip().split()[0]
    raise AssertionError(f"no flow run id in: {stdout[-1500:]}")


# The twins' config: the smoke run with two actor engine replicas (the determinism check's fan-out over Ray).
TWIN = ("actor.resources.replicas=2",)


def _timing(key: str) -> bool:
    """Wall-clock figures (seconds, rates) differ run to run by nature."""
    return key.startswith("time/") or key.endswith(("_s", "per_s", "_seconds"))


def _history(client: MlflowClient, run_id: str, download_to: Path) -> tuple[dict, list]:
    """A run's metric histories (timings left out) and its logged rollouts."""
    run = client.get_run(run_id)
    metrics = {
        k: [(m.step, m.value) for m in sorted(client.get_metric_history(run_id, k), key=lambda m: m.step)]
        for k in run.data.metrics
        if not _timing(k)
    }
    rollouts = json.loads(Path(client.download_artifacts(run_id, "rollouts.json", str(download_to))).read_text())
    return metrics, rollouts


@pytest.fixture(scope="module")
def deployed(worker, mlflow_server, tmp_path_factory):
    """The smoke config run twice side by side: once as a deployment run through the worker, once from the
    training CLI (its own folder and MLflow store). Yields the deployment's `--watch` output, its seconds,
    its folder and the CLI twin's folder."""
    root = tmp_path_factory.mktemp("deployed")
    twin_root = tmp_path_factory.mktemp("cli-twin")
    # The twin first: its driver starts while `prefect deployment run` creates the flow run and the worker
    # picks it up (each run mostly waits on its start-up; this also shows two runs do not disturb each other).
    twin = start_cli(smoke_args(twin_root, "run_name=deployed", *TWIN), twin_root / "cli.log", env=cli_env())
    try:
        t0 = time.perf_counter()
        out = _run("plan-act-training/plan-act-train", _params(root, "deployed", *TWIN), worker)
        elapsed = time.perf_counter() - t0
        rc = twin.wait(timeout=600)
    finally:
        kill_tree(twin.pid)
    assert rc == 0, (twin_root / "cli.log").read_text()[-3000:]
    return out, elapsed, root, twin_root


@pytest.mark.slow
def test_deployment_run_from_the_cli_with_mlflow_links_both_ways(worker, deployed, mlflow_server):
    env = worker
    bad = _run("plan-act-training/plan-act-train", json.dumps({"rounds": -1}), env, wait=False)
    assert bad.returncode != 0 and "config.rounds" in bad.stdout + bad.stderr  # rejected at creation, field named

    out, elapsed, root, _ = deployed
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    print(f"\ndeployment run: request -> completed in {elapsed:.1f}s")

    flow_run_id = _run_id(out.stdout)
    run, artifacts = _flow_run(flow_run_id, env["PREFECT_API_URL"])
    assert run.state.is_completed()
    md = next(a for a in artifacts if a.type == "markdown")
    assert "MLflow run:" in md.data and mlflow_server in md.data  # flow run -> MLflow

    client = MlflowClient(mlflow_server)
    (mrun,) = client.search_runs(
        [client.get_experiment_by_name("planact").experiment_id], f"tags.`prefect.flow_run_id` = '{flow_run_id}'"
    )  # MLflow -> flow run
    assert [m.step for m in client.get_metric_history(mrun.info.run_id, "planner/reward_mean")] == [1, 2]
    assert mrun.info.run_id in md.data
    assert read_state(root / "deployed")["last_completed_round"] == 2


@pytest.mark.slow
def test_same_seed_twice_gives_identical_metric_histories(deployed, mlflow_server):
    out, _, root, twin_root = deployed
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    (m1, r1), (m2, r2) = (
        _history(client, read_state(folder / "deployed")["mlflow_run_id"], folder)
        for client, folder in (
            (MlflowClient(mlflow_server), root),
            (MlflowClient(f"sqlite:///{twin_root / 'mlflow.db'}"), twin_root),
        )
    )
    assert len(m1) >= 30 and "heldout/pass_at_1" in m1 and "actor/loss" in m1  # losses, rewards, held-out figures
    assert m1 == m2, sorted(k for k in m1 if m1[k] != m2.get(k))
    assert r1 and r1 == r2  # the logged rollouts: same prompts, same sampled texts


@pytest.mark.slow
def test_two_job_deployments_meet_at_the_barrier(worker, ray_head, tmp_path):
    env = worker
    common = (f"ray.address={ray_head}", "barrier.timeout_s=300", "barrier.namespace=two-job-deploy")
    planner = _run(
        "plan-act-training/plan-act-planner", _params(tmp_path, "dep2", "agent_role=planner", *common), env, wait=False
    )
    actor = _run(
        "plan-act-training/plan-act-actor", _params(tmp_path, "dep2", "agent_role=actor", *common), env, wait=False
    )
    assert planner.returncode == 0 and actor.returncode == 0, planner.stderr + actor.stderr
    ids = [_run_id(planner.stdout), _run_id(actor.stdout)]
    deadline = time.time() + 480
    while time.time() < deadline:
        states = [_flow_run(i, env["PREFECT_API_URL"])[0].state for i in ids]
        if all(s.is_final() for s in states):
            break
        time.sleep(2)
    assert all(s.is_completed() for s in states), [s.message for s in states]
    ps, as_ = read_state(tmp_path / "dep2", "planner"), read_state(tmp_path / "dep2", "actor")
    assert ps["last_completed_round"] == 2 and as_["last_completed_round"] == 2
    assert all(row["fallback"] == 0.0 for row in ps["table"] + as_["table"])  # they met every round
    assert ps["mlflow_run_id"] != as_["mlflow_run_id"]  # one MLflow run per flow run
    assert all(row["planner/loss"] is not None for row in ps["table"])  # planner trained on the actor's feedback
    assert all(row["actor/reward_mean"] is not None for row in as_["table"])
    for role in ("planner", "actor"):
        assert (tmp_path / "dep2" / "checkpoints" / "round_00002" / role).is_dir()


@pytest.mark.slow
def test_aflow_deployment_searches_and_logs_to_mlflow(worker, mlflow_server, aflow_executor, tmp_path):
    from aflow_rl.config import AFlowConfig

    env = worker
    bad = _run("aflow-optimize/aflow-optimize", json.dumps({"search": {"max_rounds": 0}}), env, wait=False)
    assert bad.returncode != 0 and "config.search.max_rounds" in bad.stdout + bad.stderr

    cfg = AFlowConfig(
        run_name="dep-aflow",
        root=str(tmp_path),
        limit=8,
        executor={"checkpoint": aflow_executor},
        shards=1,
        search={"max_rounds": 3, "validation_repeats": 1},
    )
    t0 = time.perf_counter()
    out = _run("aflow-optimize/aflow-optimize", cfg.model_dump_json(), env)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    print(f"\naflow deployment run: request -> completed in {time.perf_counter() - t0:.1f}s")
    flow_run_id = _run_id(out.stdout)
    run, artifacts = _flow_run(flow_run_id, env["PREFECT_API_URL"])
    md = next(a for a in artifacts if a.type == "markdown")
    assert run.state.is_completed() and "Best round" in md.data and mlflow_server in md.data

    from mlflow import MlflowClient

    client = MlflowClient(mlflow_server)
    (mrun,) = client.search_runs(
        [client.get_experiment_by_name("planact-aflow").experiment_id], f"tags.`prefect.flow_run_id` = '{flow_run_id}'"
    )
    assert [m.step for m in client.get_metric_history(mrun.info.run_id, "score")] == [1, 2, 3]
    assert {"best", "std", "acceptance_rate", "test_score"} <= set(mrun.data.metrics)
    names = {a.path for a in client.list_artifacts(mrun.info.run_id)}
    assert {"search_tree.png", "search_tree.dot", "best_workflow", "workflows"} <= names
    assert (tmp_path / "dep-aflow" / "PLANACT" / "workflows" / "round_3" / "experience.json").is_file()
    pool = tmp_path / "aflow-experience" / "pool.jsonl"
    assert len(pool.read_text().splitlines()) == 2  # one experience item per expansion, in the shared pool


@pytest.mark.slow
def test_repair_evaluate_deployment_runs_the_rule_agent_and_logs_to_mlflow(worker, mlflow_server, tmp_path):
    from graph_planner.config import RepairEvalConfig

    from .repair_fixture import build_minilib

    env = worker
    bad = _run("repair-evaluate/repair-evaluate", json.dumps({"episode": {"test_runs": -1}}), env, wait=False)
    assert bad.returncode != 0 and "config.episode.test_runs" in bad.stdout + bad.stderr
    corpus = build_minilib(tmp_path)
    cfg = RepairEvalConfig(run_name="dep-repair", root=str(tmp_path / "runs"), corpus_dir=str(corpus), workers=2)
    out = _run("repair-evaluate/repair-evaluate", cfg.model_dump_json(), env)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    flow_run_id = _run_id(out.stdout)
    run, artifacts = _flow_run(flow_run_id, env["PREFECT_API_URL"])
    md = next(a for a in artifacts if a.type == "markdown")
    assert run.state.is_completed() and "solve rate" in md.data and "| minilib |" in md.data

    from mlflow import MlflowClient

    client = MlflowClient(mlflow_server)
    (mrun,) = client.search_runs(
        [client.get_experiment_by_name("planact-repair").experiment_id], f"tags.`prefect.flow_run_id` = '{flow_run_id}'"
    )
    assert {"solve_rate", "mean_test_runs", "mean_seconds", "tasks"} <= set(mrun.data.metrics)
    assert mrun.data.metrics["tasks"] == len((corpus / "heldout.jsonl").read_text().splitlines())
    assert {"telemetry", "summary.json"} <= {a.path for a in client.list_artifacts(mrun.info.run_id)}
