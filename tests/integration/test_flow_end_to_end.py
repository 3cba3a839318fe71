"""The training CLI refuses an invalid config before starting anything.

The training flow end to end (real Prefect and MLflow servers, both UIs in a browser, registration, the
evaluate flow) is test_deployments.py's test_flow_tracks_both_roles_and_links_prefect_and_mlflow: its run is
the CLI twin of the deployed run there (2026-11-29: one whole run less).
"""

from __future__ import annotations

from .conftest import SMOKE, run_cli


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
