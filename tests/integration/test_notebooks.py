"""The notebooks run headless (papermill) with small parameters; executed copies go to tmp, never the repo."""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import REPO, SMOKE


@pytest.mark.slow
def test_quickstart_then_compare_runs(prefect_api, tmp_path):
    import papermill as pm

    # the smoke config with registration on, as the notebook's last cell loads the registered actor
    config = tmp_path / "smoke.yaml"
    text = Path(SMOKE).read_text()
    assert "register_models: false" in text
    config.write_text(text.replace("register_models: false", "register_models: true"))
    pm.execute_notebook(
        str(REPO / "notebooks" / "01_quickstart.ipynb"),
        str(tmp_path / "01.ipynb"),
        cwd=str(REPO / "notebooks"),
        kernel_name="python3",
        progress_bar=False,
        parameters={"config": str(config), "rounds": 2, "run_name": "nb", "checkpoint_root": str(tmp_path)},
    )
    assert (tmp_path / "nb-curves.png").stat().st_size > 1000
    assert (tmp_path / "nb" / "checkpoints" / "round_00002").is_dir()
    # Its last cell loaded the registered actor through MLflow and generated with it.
    executed = (tmp_path / "01.ipynb").read_text()
    assert "models:/nb-actor/1" in executed and "heldout/pass_at_1" in executed

    pm.execute_notebook(
        str(REPO / "notebooks" / "03_compare_runs.ipynb"),
        str(tmp_path / "03.ipynb"),
        cwd=str(REPO / "notebooks"),
        kernel_name="python3",
        progress_bar=False,
        parameters={
            "tracking_uri": f"sqlite:///{tmp_path / 'mlflow.db'}",
            "figure_path": str(tmp_path / "compare.png"),
        },
    )
    assert (tmp_path / "compare.png").stat().st_size > 1000


@pytest.mark.slow
def test_aflow_search_notebook(prefect_api, aflow_executor, tmp_path):
    import papermill as pm

    pm.execute_notebook(
        str(REPO / "notebooks" / "02_aflow_search.ipynb"),
        str(tmp_path / "02.ipynb"),
        cwd=str(REPO / "notebooks"),
        kernel_name="python3",
        progress_bar=False,
        parameters={
            "rounds": 2,
            "run_name": "nb-aflow",
            "root": str(tmp_path),
            "executor_checkpoint": aflow_executor,
            # 50 problems, not 250: still 10 validation problems; the best round's test score on 40, not 200
            "overrides": ["problems=50", "limit=10", "search.validation_repeats=1", "shards=1", "task_runner=threads"],
        },
    )
    assert (tmp_path / "nb-aflow" / "search_tree.png").stat().st_size > 1000
    assert (tmp_path / "nb-aflow" / "PLANACT" / "workflows" / "round_2" / "graph.py").is_file()


@pytest.mark.slow
def test_code_repair_notebook(tmp_path):
    import papermill as pm

    from .repair_fixture import write_package

    pm.execute_notebook(
        str(REPO / "notebooks" / "04_code_repair.ipynb"),
        str(tmp_path / "04.ipynb"),
        cwd=str(REPO / "notebooks"),
        kernel_name="python3",
        progress_bar=False,
        parameters={
            "package": "minilib",
            "source": str(write_package(tmp_path)),
            "max_tried": 8,
            "limit": 3,
            "out": str(tmp_path / "corpus"),
            "figure_path": str(tmp_path / "memory.png"),
        },
    )
    assert (tmp_path / "memory.png").stat().st_size > 1000
    assert (tmp_path / "corpus" / "train.jsonl").read_text().count("instance_id") >= 3
