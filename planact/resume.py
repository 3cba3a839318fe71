"""The resume guard: a run resumed with a config that would change what its checkpoint or data mean is refused.

A run folder holds `config.resolved.yaml`, written when the run started. Resuming compares the new
resolved config with it, field by field (dotted names):

* fields that shape the checkpoint or the data stream are refused, each named: the seed, the
  environment, the role set (which roles train, through which engine), each role's model (path, tiny
  shape, tokenizer), its RL algorithm and hyper-parameters, sampling and group size, and the credit
  rule. Resuming with any of them changed would continue training a model on something else than what
  it was trained on, under the same run name, without a trace;
* everything else (more rounds, evaluation cadence, tracking URI, resources and Ray, barrier timeouts,
  checkpoint cadence, warm-start settings that already ran, AFlow cadence) is allowed and reported.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from planact.config import ConfigError, flatten
from planact.secrets import redact

ROLE_SHAPING = ("model_path", "tiny.", "engine", "train", "rl.", "sampling.", "group_size")
SHAPING = ("seed", "env.", "credit.", "agent_role") + tuple(
    f"{role}.{f}" for role in ("planner", "actor") for f in ROLE_SHAPING
)


class ResumeRefused(ConfigError):
    """Resuming would change fields that shape the run's checkpoint or data; the message names each."""


def shapes_run(key: str) -> bool:
    """True when a dotted config field shapes the checkpoint or the data (a resume may not change it)."""
    return any(key == p or (p.endswith(".") and key.startswith(p)) or key.startswith(p + ".") for p in SHAPING)


def _flat(data: dict) -> dict:
    # Through YAML both sides compare as the file stores them (tuples as lists, secrets redacted).
    return flatten(yaml.safe_load(yaml.safe_dump(data, sort_keys=False)) or {})


def config_changes(stored: dict, current: dict) -> tuple[list[str], list[str]]:
    """(refused, allowed) descriptions `field: old -> new` of every field that differs."""
    old, new = _flat(stored), _flat(current)
    refused, allowed = [], []
    for key in sorted(set(old) | set(new)):
        if old.get(key) != new.get(key):
            line = f"{key}: {old.get(key)!r} -> {new.get(key)!r}"
            (refused if shapes_run(key) else allowed).append(line)
    return refused, allowed


def check_resume(run_dir: Path, current: dict) -> list[str]:
    """Raise ResumeRefused naming every shaping field that differs from the run's stored config;
    return the allowed changes (empty when the run has no stored config or nothing changed)."""
    path = Path(run_dir) / "config.resolved.yaml"
    if not path.is_file():
        return []
    refused, allowed = config_changes(yaml.safe_load(path.read_text()) or {}, redact(current))
    if refused:
        raise ResumeRefused(
            f"run folder {run_dir} was started with another config; resuming it would change what its "
            f"checkpoint or data mean: {'; '.join(refused)}. Use a new run_name (or checkpoint.root) for "
            "a new run, or resume with the stored values (config.resolved.yaml in the run folder)"
        )
    return allowed
