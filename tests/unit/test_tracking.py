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


def test_a_new_store_starts_from_the_cached_empty_one_and_works_as_a_migrated_one(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    runs = []
    for name in ("a", "b"):  # the first builds the cached store, the second copies it
        cfg = RunConfig(run_name=name, checkpoint={"root": str(tmp_path / name)})
        t = Tracker(cfg)
        t.log_metrics({"success": 0.5}, step=1)
        runs.append(t)
    assert list((tmp_path / "cache" / "planact").glob("mlflow-*-empty.db"))
    for name, t in zip("ab", runs):
        assert t.client.get_metric_history(t.run_id, "success")[0].value == 0.5
        assert t.client.get_experiment("0").artifact_location == (tmp_path / name / "mlruns" / "0").as_uri()
    assert runs[0].client.search_runs([runs[0].experiment_id])[0].info.run_name == "a"  # two stores, not one
    assert [r.info.run_name for r in runs[1].client.search_runs([runs[1].experiment_id])] == ["b"]


def test_an_experiment_another_run_created_meanwhile_is_taken_not_a_crash(tmp_path, monkeypatch):
    # Two runs starting together against a fresh tracking server both find no experiment; the second one's
    # create then meets RESOURCE_ALREADY_EXISTS (a deployment test's twins, 2026-11-30): it takes that experiment.
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    cfg = RunConfig(run_name="race", checkpoint={"root": str(tmp_path)})
    first = Tracker(cfg)
    assert first._create_experiment(cfg.tracking.experiment, None) == first.experiment_id
