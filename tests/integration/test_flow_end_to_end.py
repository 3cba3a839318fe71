"""The training flow end to end with a real Prefect server and a real MLflow tracking server."""

from __future__ import annotations

import re

import pytest
from mlflow.tracking import MlflowClient

from planact.experience import ExperienceStore

from .browser import page_text
from .conftest import SMOKE, cli_env, read_state, run_cli, smoke_args


@pytest.mark.slow
def test_flow_tracks_both_roles_and_links_prefect_and_mlflow(prefect_api, mlflow_server, tmp_path):
    rc, out = run_cli(
        smoke_args(
            tmp_path,
            "run_name=e2e",
            f"tracking.tracking_uri={mlflow_server}",
            "tracking.register_models=true",
            "rounds=3",
            "aflow.every_rounds=3",
            "aflow.optimise.search.max_rounds=2",
            "aflow.optimise.limit=8",
            "aflow.optimise.search.validation_repeats=1",
        ),
        tmp_path / "cli.log",
        env=cli_env(),
    )
    assert rc == 0, out[-3000:]
    assert "finished in" in out and "pass@1" in out  # the final summary table

    run_dir = tmp_path / "e2e"
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

    with get_client(sync_client=True) as client_p:
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
    final = tmp_path / "e2e" / "checkpoints" / "round_00003"
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
        smoke_args(tmp_path, "run_name=e2e", f"tracking.tracking_uri={mlflow_server}")
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


def test_invalid_config_fails_before_any_work(tmp_path):
    rc, out = run_cli(
        ["--config", SMOKE, "--set", "rounds=-1", "--set", f"checkpoint.root={tmp_path}"],
        tmp_path / "bad.log",
        timeout=120,
    )
    assert rc == 2
    assert "rounds" in out and "greater than or equal" in out
    assert not (tmp_path / "smoke").exists()  # nothing was started or written for the run
    assert "Started a local Ray" not in out
