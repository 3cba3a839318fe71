"""Checkpoint 0 holds the warm start: a role recreated after its warm start is refused, not saved untrained.

Seen in a demo run: Ray's memory monitor killed the workers while the actor still warmed up; the supervisor
recreated the planner with fresh weights, and the run went on (held-out pass@1 0.000) from a checkpoint 0
that held an untrained planner.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from planact.session import TrainingSession
from planact.workers import RoleWorker


class _Tracker:
    def log_metrics(self, metrics, step):
        pass


def _session():
    return SimpleNamespace(tracker=_Tracker(), state=SimpleNamespace(data={}), weight_versions={})


def test_a_warm_started_role_must_hold_the_warm_starts_weight_version_at_checkpoint_0():
    session = _session()
    TrainingSession.record_warm_start(session, {"planner": [{"step": 1, "loss": 2.0}], "actor": []})
    assert session.weight_versions == {"planner": 1, "actor": 1}


def test_a_trainer_holding_another_version_than_the_run_reached_refuses_to_save(tmp_path):
    recreated = SimpleNamespace(role="planner", engine=SimpleNamespace(weight_version=0))
    with pytest.raises(RuntimeError, match="weight version 0, the run reached 1: it was recreated"):
        RoleWorker.save_checkpoint(recreated, str(tmp_path), expect_version=1)
    assert not any(tmp_path.iterdir())  # nothing written
