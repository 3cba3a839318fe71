"""Shared fixtures (a tiny model saved to disk the same way real checkpoints are) and the suite's file order."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from tools.services import SHARED_ENV, stop_shared

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


# Seconds each slow file's tests took in a `make test` run (2 cores, 3 workers, its JUnit report summed by
# tools/suite_times.py): the ten longest from the run of 2026-11-29 (sixth session, after the determinism twins
# joined the deployment run and the repair RL corpus became built-in), the rest from earlier runs that day.
# `make test` runs pytest-xdist with --dist loadfile --no-loadscope-reorder: files go to the workers in
# collection order as each frees up, so collecting the longest first (longest-processing-time first) keeps one
# worker from running a long file alone at the end. xdist's own reorder sorts by number of tests, which put
# these one-test files last.
SLOW_FILES = {
    "test_deployments.py": 900,  # the end-to-end run joined it as the deployed run's twin (seventh session)
    "test_round_overhead_benchmark.py": 567,
    "test_repair_rl.py": 486,
    "test_repair_cli.py": 305,
    "test_ray_cluster.py": 170,  # the cluster and recovery tests share it (the 24-round run went 2026-12-01)
    "test_trainer_group.py": 289,
    "test_notebooks.py": 208,
    "test_workflow_env.py": 200,
    "test_resume.py": 200,  # with the OpenAI-actor run of test_openai_role.py (2026-11-30, eleventh)
    "test_schedulemesh.py": 164,
    "test_two_job.py": 80,
    "test_corpus_validate.py": 109,
    "test_search_offline.py": 96,
    "test_repair_env.py": 91,
    "test_aflow_llm_optimizer.py": 82,
}


SERIAL_MARK = "pytest.mark.serial"
"""`make test`'s second phase collects only the files that spell this (grep), not the whole tree (~17 CPU-s)."""


def pytest_collection_modifyitems(config, items):
    """Slowest files first (a stable sort: tests keep their order within a file); a `serial` test in a file
    that does not spell SERIAL_MARK is refused, since the second phase would never collect it."""
    items.sort(key=lambda item: -SLOW_FILES.get(item.path.name, 0))
    unseen = {str(i.path) for i in items if i.get_closest_marker("serial") and SERIAL_MARK not in i.path.read_text()}
    if unseen:
        raise pytest.UsageError(f"serial tests in files that do not spell {SERIAL_MARK!r}: {sorted(unseen)}")


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    """A tiny planner-shaped model + tokenizer saved with save_pretrained."""
    from planact.config import TinyModelSpec
    from planact.models import materialize_tiny

    return materialize_tiny(TinyModelSpec(), tmp_path_factory.mktemp("tiny") / "planner", seed=0)


def pytest_configure(config):
    """The run's owner (the xdist controller, or pytest alone) names the folder of its shared servers."""
    # Workers inherit the variable: xdist starts them after this hook, with this process's environment.
    if "PYTEST_XDIST_WORKER" not in os.environ:
        os.environ[SHARED_ENV] = tempfile.mkdtemp(prefix="planact-services-")


def pytest_unconfigure(config):
    """The owner stops the servers its workers started (a worker may finish while others still use them)."""
    if "PYTEST_XDIST_WORKER" not in os.environ and SHARED_ENV in os.environ:
        folder = Path(os.environ.pop(SHARED_ENV))
        stop_shared(folder)
        shutil.rmtree(folder, ignore_errors=True)
