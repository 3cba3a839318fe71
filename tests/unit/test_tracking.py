"""What a person sees first in MLflow: a model-training experiment and a run description linking Prefect."""

from __future__ import annotations

from planact.config import RunConfig
from planact.tracking import NOTE_TAG, Tracker


def test_experiment_is_model_training_and_runs_link_their_prefect_flow_runs(tmp_path, monkeypatch):
    monkeypatch.setenv("PREFECT_API_URL", "http://127.0.0.1:4200/api")
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    cfg = RunConfig(run_name="desc", checkpoint={"root": str(tmp_path)})
    t = Tracker(cfg, tags={"prefect.flow_run_id": "abc-1", "prefect.flow_run_name": "silky-fox"})
    exp = t.client.get_experiment(t.experiment_id)
    assert exp.tags["mlflow.experimentKind"] == "custom_model_development"  # not the GenAI view
    note = t.client.get_run(t.run_id).data.tags[NOTE_TAG]
    assert "[silky-fox](http://127.0.0.1:4200/runs/flow-run/abc-1)" in note

    # A resume by another flow run keeps the first link and adds its own.
    Tracker(cfg, t.run_id, tags={"prefect.flow_run_id": "abc-2", "prefect.flow_run_name": "brave-owl"})
    note = t.client.get_run(t.run_id).data.tags[NOTE_TAG]
    assert (
        "silky-fox" in note
        and "Resumed by Prefect flow run [brave-owl](http://127.0.0.1:4200/runs/flow-run/abc-2)" in note
    )
