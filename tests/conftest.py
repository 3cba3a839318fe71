"""Shared fixtures: a tiny model saved to disk the same way real checkpoints are."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    """A tiny planner-shaped model + tokenizer saved with save_pretrained."""
    from planact.config import TinyModelSpec
    from planact.models import materialize_tiny

    return materialize_tiny(TinyModelSpec(), tmp_path_factory.mktemp("tiny") / "planner", seed=0)
