"""prefect.yaml end to end: a real Prefect server, work pool, `prefect deploy --all`, a process worker,
`prefect deployment run`, a real MLflow tracking server; and the two-job deployments meeting on one Ray
cluster. Everything started here is stopped here.

Same seed, same machine: the deployed training run has a twin started from the training CLI with the same
config at the same time (two actor engine replicas, so generation fans out over Ray); every metric except
wall-clock timings must match exactly, step by step, and so must the rollouts each round logged. (It was
test_determinism.py's two CLI runs, 2026-11-29: the deployment run serves as one twin, one whole run less.)
A third twin runs the same config without Prefect (RunController over PlainStages, 2026-11-30): the same
numbers again, so the plain path that notebooks and benchmarks may take is the flow's, not a copy of it.
The CLI twin is also the end-to-end run (was test_flow_end_to_end.py's own run, 2026-11-29: another whole
run less): three rounds, an AFlow search after the last, both roles registered, its pages opened in a browser
and its checkpoint re-evaluated.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from planact.config import load_config
from planact.experience import ExperienceStore

from .browser import page_text
from .conftest import BIN, PY, REPO, SMOKE, cli_env, kill_tree, read_state, run_cli, smoke_args, start_cli

PREFECT = str(BIN / "prefect")


def _prefect(*args: str, env: dict, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([PREFECT, *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def worker(prefect_api, mlflow_server, tmp_path_factory):
    """The `planact` pool, every deployment of prefect.yaml, and a worker polling every 3 seconds.

    One for the module: `prefect deploy --all` and a worker start cost ~30 s, and a process worker serves
    flow runs one after another (and side by side) as it would in production. (Polling every second cost the
    server ~1.3 CPU-s a minute, ~25 CPU-s over the module; every 3 s, a third of that, ~1 s more per run.)"""
    env = cli_env(
        PREFECT_API_URL=prefect_api,
        PLANACT_ROOT=str(REPO),
        MLFLOW_TRACKING_URI=mlflow_server,
        PREFECT_WORKER_QUERY_SECONDS="3",
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


# The twins' config: the smoke run with two actor engine replicas (the determinism check's fan-out over Ray),
# three rounds (the end-to-end checks: a round after round 2's pipelining settles, an AFlow search after round 3).
TWIN = ("rounds=3", "actor.resources.replicas=2")


def _e2e(mlflow_server: str) -> tuple[str, ...]:
    """The CLI twin's own settings: none changes a metric of the rounds (the AFlow search runs after round 3's
    evaluation and logs only aflow/*; registration is after the last round). 40 AFlow problems, not 250: its test
    score is taken on the 4/5 never used for selection, 200 problems otherwise."""
    return (
        f"tracking.tracking_uri={mlflow_server}",
        "tracking.register_models=true",
        "aflow.every_rounds=3",
        "aflow.optimise.search.max_rounds=2",
        "aflow.optimise.limit=8",
        "aflow.optimise.problems=40",
        "aflow.optimise.search.validation_repeats=1",
    )


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


# The same run without Prefect (planact.controller.RunController over flows.stages.PlainStages): no flow run and
# no task runs, the stages called in its own process; the run the docs offer for notebooks and benchmarks.
PLAIN = """
import sys
from flows.stages import PlainStages
from planact.config import load_config
from planact.controller import RunController
cfg = load_config(sys.argv[1], sys.argv[2:])
RunController(cfg, PlainStages(cfg)).run()
"""


@pytest.fixture(scope="module")
def deployed(worker, mlflow_server, tmp_path_factory):
    """The same training config run three times side by side: as a deployment run through the worker, from the
    training CLI (its own folder; the end-to-end run) and as plain calls without Prefect. Yields the deployment's
    `--watch` output, its seconds, its folder, the CLI twin's folder, the CLI's console output and the plain
    run's folder."""
    root = tmp_path_factory.mktemp("deployed")
    twin_root = tmp_path_factory.mktemp("cli-twin")
    plain_root = tmp_path_factory.mktemp("plain-twin")
    # The twins first: their drivers start while `prefect deployment run` creates the flow run and the worker
    # picks it up (each run mostly waits on its start-up; this also shows the runs do not disturb each other).
    twin = start_cli(
        smoke_args(twin_root, "run_name=e2e", *TWIN, *_e2e(mlflow_server)), twin_root / "cli.log", env=cli_env()
    )
    plain_args = [f"checkpoint.root={plain_root}", "run_name=e2e", *TWIN, f"tracking.tracking_uri={mlflow_server}"]
    plain = None
    try:
        t0 = time.perf_counter()
        out = _run("plan-act-training/plan-act-train", _params(root, "e2e", *TWIN), worker)
        elapsed = time.perf_counter() - t0
        # the plain twin after the deployment run: two runs at a time here, not three (a suite run beside this
        # file timed out starting a Ray node when three started together)
        plain = subprocess.Popen(
            [PY, "-c", PLAIN, SMOKE, *plain_args],
            cwd=REPO,
            env=cli_env(),
            stdout=open(plain_root / "plain.log", "w"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        rc = twin.wait(timeout=900)
        plain_rc = plain.wait(timeout=900)
    finally:
        kill_tree(twin.pid)
        if plain is not None:
            kill_tree(plain.pid)
    log = (twin_root / "cli.log").read_text()
    assert rc == 0, log[-3000:]
    assert plain_rc == 0, (plain_root / "plain.log").read_text()[-3000:]
    return out, elapsed, root, twin_root, log, plain_root


@pytest.mark.slow
def test_deployment_run_from_the_cli_with_mlflow_links_both_ways(worker, deployed, mlflow_server):
    env = worker
    bad = _run("plan-act-training/plan-act-train", json.dumps({"rounds": -1}), env, wait=False)
    assert bad.returncode != 0 and "config.rounds" in bad.stdout + bad.stderr  # rejected at creation, field named

    out, elapsed, root, *_ = deployed
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
    assert [m.step for m in client.get_metric_history(mrun.info.run_id, "planner/reward_mean")] == [1, 2, 3]
    assert mrun.info.run_id in md.data
    assert read_state(root / "e2e")["last_completed_round"] == 3


@pytest.mark.slow
def test_same_seed_thrice_gives_identical_metric_histories(deployed, mlflow_server):
    """The deployment run, the CLI run and the run without Prefect: every figure the same, step by step."""
    out, _, root, twin_root, _, plain_root = deployed
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    client = MlflowClient(mlflow_server)
    (m1, r1), (m2, r2), (m3, r3) = (
        _history(client, read_state(folder / "e2e")["mlflow_run_id"], folder)
        for folder in (root, twin_root, plain_root)
    )
    assert m3 == m1, sorted(k for k in m1.keys() | m3.keys() if m1.get(k) != m3.get(k))  # plain calls, same numbers
    assert r3 == r1
    assert len(m1) >= 30 and "heldout/pass_at_1" in m1 and "actor/loss" in m1  # losses, rewards, held-out figures
    # Only the CLI twin ran the AFlow search (after round 3's figures were logged): its aflow/* figures aside.
    assert {"aflow/best_validation", "aflow/test_score"} <= m2.keys()
    m2 = {k: v for k, v in m2.items() if not k.startswith("aflow/")}
    assert m1 == m2, sorted(k for k in m1.keys() | m2.keys() if m1.get(k) != m2.get(k))
    assert r1 and r1 == r2  # the logged rollouts: same prompts, same sampled texts


@pytest.mark.slow
def test_flow_tracks_both_roles_and_links_prefect_and_mlflow(deployed, prefect_api, mlflow_server, tmp_path):
    """The CLI twin end to end (was test_flow_end_to_end.py's own run): what it printed, its state and experience,
    its MLflow run and nested AFlow search, its Prefect flow run and task runs, both UIs in a browser, the
    registered roles, and the evaluate flow reproducing its held-out figures."""
    _, _, _, root, out, _ = deployed
    assert "finished in" in out and "pass@1" in out  # the final summary table

    run_dir = root / "e2e"
    state = read_state(run_dir)
    assert state["last_completed_round"] == 3
    # Experience of every round and role is in the run's durable pool.
    pool = ExperienceStore(run_dir / "experience")
    for r in (1, 2, 3):
        for role in ("planner", "actor"):
            items = pool.query(run="e2e", round=r, role=role)
            assert items and {"prompt_ids", "token_ids", "logprobs", "reward", "advantage"} <= items[0]["data"].keys()

    client = MlflowClient(mlflow_server)
    run = client.get_run(state["mlflow_run_id"])
    assert run.info.status == "FINISHED"
    assert run.data.params["planner.rl.eps_clip"] == "0.2"
    flow_run_id = run.data.tags["prefect.flow_run_id"]
    for key in (
        "planner/reward_mean",
        "actor/reward_mean",
        "success",
        "planner/loss",
        "actor/entropy",
        "actor/grad_norm",
        "time/round_s",
        "barrier_wait_s",
        "fallback",
    ):
        steps = [m.step for m in client.get_metric_history(run.info.run_id, key)]
        assert steps == [1, 2, 3], key
    assert [m.step for m in client.get_metric_history(run.info.run_id, "heldout/pass_at_1")] == [0, 1, 2, 3]
    artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {"config.resolved.yaml", "rollouts.json", "final_checkpoint"} <= artifacts
    # aflow.every_rounds=3: an AFlow search around round 3's checkpoint ran as a sub-flow, its MLflow run nested here.
    (nested,) = client.search_runs([run.info.experiment_id], f"tags.`mlflow.parentRunId` = '{run.info.run_id}'")
    assert nested.data.tags["workload"] == "aflow" and nested.info.run_name == "e2e-aflow-r3"
    assert [m.step for m in client.get_metric_history(nested.info.run_id, "score")] == [1, 2]
    assert [m.step for m in client.get_metric_history(run.info.run_id, "aflow/best_validation")] == [3]
    ckpt = {a.path for a in client.list_artifacts(run.info.run_id, "final_checkpoint")}
    assert {"final_checkpoint/planner", "final_checkpoint/actor"} <= ckpt

    # The Prefect side: the flow run completed and carries a markdown artifact linking the MLflow run.
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (
        ArtifactFilter,
        ArtifactFilterFlowRunId,
        FlowRunFilter,
        FlowRunFilterId,
        FlowRunFilterParentFlowRunId,
    )
    from prefect.settings import PREFECT_API_URL, temporary_settings

    # The server named, as _flow_run does: a client without one starts an ephemeral server of its own.
    with temporary_settings(updates={PREFECT_API_URL: prefect_api}), get_client(sync_client=True) as client_p:
        fr = client_p.read_flow_run(flow_run_id)
        assert fr.state.is_completed()
        arts = client_p.read_artifacts(
            artifact_filter=ArtifactFilter(flow_run_id=ArtifactFilterFlowRunId(any_=[fr.id]))
        )
        md = [a for a in arts if a.type == "markdown"]
        assert md and run.info.run_id in md[0].data and "| round |" in md[0].data
        # Prefect's routine state lines stay off the console (also those Ray forwards from workers) but
        # still reach the UI's logs; the rounds' own progress lines are printed.
        messages = [log.message for page in range(0, 2000, 200) for log in client_p.read_logs(limit=200, offset=page)]
        assert any(m.startswith("Finished in state Completed") for m in messages)
        assert "Finished in state" not in out and "Created task run" not in out
        assert "[####################] round 3/3: success" in out and "| held-out pass@1 " in out
        # Registration on (both roles) and an AFlow sub-flow: the libraries' routine notes stay off the console
        # too, and the whole run prints a screenful. (How few lines a long run prints: test_console.py.)
        for noise in (
            "FutureWarning",
            "model card could not be retrieved",
            "license information",
            "infer the model output signature",
        ):
            assert noise not in out, noise
        assert len(out.splitlines()) < 60, out
        # One flow run per training run: its rounds are named task runs in it, not a sub-flow each; the only
        # sub-flow is the AFlow search (aflow.every_rounds=3), which does work of its own.
        subflows = client_p.read_flow_runs(
            flow_run_filter=FlowRunFilter(parent_flow_run_id=FlowRunFilterParentFlowRunId(any_=[fr.id]))
        )
        assert len(subflows) == 1 and subflows[0].parameters["config"]["run_name"] == "e2e-aflow-r3"
        task_runs = client_p.read_task_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[fr.id])))
        names = {t.name for t in task_runs}
        for r in (1, 2, 3):
            assert {
                f"round-{r}/{stage}"
                for stage in (
                    "planner-generate",
                    "barrier",
                    "actor-execute-0",
                    "score",
                    "experience",
                    "train-planner",
                    "train-actor",
                )
            } <= names
        assert {
            "round-0/warm-start-planner",
            "round-0/warm-start-actor",
            "round-0/evaluate",
            "round-3/checkpoint",
        } <= names
        assert all(t.state.is_completed() for t in task_runs if t.name.startswith("round-"))

    # What a person sees in a real browser (headless Chromium), with screenshots kept under the run folder.
    ui = run_dir / "ui"
    ui.mkdir()
    prefect_ui = prefect_api.removesuffix("/api")
    assert f"prefect_flow_run: {prefect_ui}/runs/flow-run/{flow_run_id}" in out  # the CLI names the run's page
    page = page_text(f"{prefect_ui}/runs/flow-run/{flow_run_id}", ui / "prefect-flow-run.png")
    assert fr.name in page and "Completed" in page and "plan-act-training" in page, page[:3000]
    page = page_text(f"{prefect_ui}/runs/flow-run/{flow_run_id}?tab=Task+Runs", ui / "prefect-task-runs.png")
    for stage in ("train-planner", "train-actor", "planner-generate"):  # the rounds' task runs, by round and stage
        assert f"round-3/{stage}" in page, (stage, page[:3000])
    (url,) = re.findall(r"^mlflow_url: (\S+)", out, re.M)  # the link the CLI printed, as a user would open it
    assert url.startswith(mlflow_server) and run.info.run_id in url
    page = page_text(url, ui / "mlflow-run.png")
    assert "e2e" in page and "Finished" in page, page[:3000]
    assert "Model registry" in page and "Judges" not in page  # the model-training view, not the GenAI one
    assert fr.name in page  # the Description links the Prefect flow run
    for key in (
        "planner/reward_mean",
        "actor/reward_mean",
        "planner/loss",
        "actor/loss",
        "heldout/pass_at_1",
        "success",
    ):
        assert key in page, (key, page[:3000])

    # Both trained roles were registered from the final checkpoint, tagged with the run and its held-out figures.
    trained = client.get_metric_history(run.info.run_id, "heldout/pass_at_1")[-1].value
    for role in ("planner", "actor"):
        v = client.get_model_version(f"e2e-{role}", "1")
        assert v.run_id == run.info.run_id and v.tags["planact.round"] == "3"
        assert v.tags["planact.checkpoint"].endswith("round_00003")
        assert float(v.tags["heldout/pass_at_1"]) == pytest.approx(trained, abs=1e-6)
    assert run.data.tags["planact.registered.actor"] == "models:/e2e-actor/1"
    # An MLflow user loads the registered actor as a transformers pipeline and generates with it.
    import mlflow.transformers
    from safetensors.torch import load_file

    from planact.registry import tracking

    with tracking(mlflow_server):  # never left behind: later notebook kernels would inherit it
        pipe = mlflow.transformers.load_model("models:/e2e-actor/1")
    final = run_dir / "checkpoints" / "round_00003"
    prompt = (final / "actor" / "input_example.txt").read_text()
    (answer,) = pipe(prompt, max_new_tokens=6, min_new_tokens=2, do_sample=False, return_tensors=True)
    prompt_ids = pipe.tokenizer(prompt)["input_ids"]
    assert len(answer["generated_token_ids"]) >= len(prompt_ids) + 2  # it generated (special tokens included)
    loaded, saved = pipe.model.state_dict(), load_file(final / "actor" / "model.safetensors")
    assert saved.keys() <= loaded.keys() and all(loaded[k].equal(saved[k]) for k in saved)  # the trained weights

    # The evaluate flow (the `evaluate` deployment) scores a run's last checkpoint or registered versions, per
    # role. One run does both (2026-11-29; two runs before, ~40 CPU-s each): the planner comes from the
    # registry (the resolution is the same for either role), the actor from the last checkpoint. Same weights,
    # same seeds -> every held-out figure the training run logged after round 3.
    cache = tmp_path / "model-cache"
    rc, out = run_cli(
        smoke_args(root, "run_name=e2e", *TWIN, f"tracking.tracking_uri={mlflow_server}")
        + ["--param", "planner_model=models:/e2e-planner/1"],
        tmp_path / "eval.log",
        env=cli_env(PLANACT_MODEL_CACHE=str(cache)),
        module="flows.evaluate",
    )
    assert rc == 0 and "held-out:" in out, out[-3000:]
    (erun,) = client.search_runs([run.info.experiment_id], "tags.`planact.source_run` = 'e2e'")
    assert erun.data.tags["planact.checkpoint"].endswith("round_00003")
    assert erun.data.tags["planact.models"] == "planner models:/e2e-planner/1"
    assert erun.data.metrics["heldout/pass_at_1"] == pytest.approx(trained, abs=1e-9)
    logged = {k: client.get_metric_history(run.info.run_id, k)[-1].value for k in erun.data.metrics}
    assert logged and erun.data.metrics == pytest.approx(logged, abs=1e-9)
    # What the planner loaded from the registry is bit for bit the trained checkpoint.
    (resolved,) = (cache / "e2e-planner").iterdir()
    a = load_file(resolved / "model.safetensors")
    b = load_file(final / "planner" / "model.safetensors")
    assert a.keys() == b.keys() and all(a[k].equal(b[k]) for k in a)


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
        problems=40,  # the best round's test score is taken on the 4/5 never used for selection: 32, not 200
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
    # the episodes phase is not silent: a progress artifact on the task run, k of n as each episode ends
    (progress,) = [a for a in artifacts if a.type == "progress" and (a.key or "").startswith("episodes")]
    assert float(progress.data) == 100.0 and "rule agent episodes" in progress.description, progress

    from mlflow import MlflowClient

    client = MlflowClient(mlflow_server)
    (mrun,) = client.search_runs(
        [client.get_experiment_by_name("planact-repair").experiment_id], f"tags.`prefect.flow_run_id` = '{flow_run_id}'"
    )
    assert {"solve_rate", "mean_test_runs", "mean_seconds", "tasks"} <= set(mrun.data.metrics)
    assert mrun.data.metrics["tasks"] == len((corpus / "heldout.jsonl").read_text().splitlines())
    assert {"telemetry", "summary.json"} <= {a.path for a in client.list_artifacts(mrun.info.run_id)}
