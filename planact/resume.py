"""The resume guard: a run resumed with a config that would change what its checkpoint or data mean is refused.

A run folder holds `config.resolved.yaml`, written when the run started. Resuming compares the new
resolved config with it, field by field (dotted names). What may change is an allow-list (`MAY_CHANGE`):

* more rounds, the run's name, tracking, Ray, barrier timeouts, checkpoint cadence and folder, a plug-in's
  section that shapes no checkpoint (the AFlow hook's searches), pipelining, each role's resources
  (placement, threads, replicas, attention kernel), its warm start (it already ran), its SGLang server
  settings, and a remote API's connection settings (endpoint, key, concurrency, retries, prices; not the
  model, stop words or system prompt);
* everything else is refused, each field named: the seed, the environment, the role set, each role's
  model, LoRA adapters, RL algorithm and hyper-parameters, sampling, group size, the credit rule, and any
  field added later until someone adds it to `MAY_CHANGE` as safe. Resuming with one of them changed would
  continue training a model on something else than what it was trained on, under the same run name,
  without a trace.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from planact import plugins
from planact.config import ConfigError, flatten
from planact.secrets import redact

_SECTIONS = plugins.installed()  # the plug-ins' config sections by their place ('env.repair', 'aflow')

# A remote API's connection settings: they change where and how fast requests go, not what the model is.
_API_CONNECTION = (
    "api_key_env",
    "api_key_secret",
    "api_version",
    "base_url",
    "concurrency",
    "max_retries",
    "timeout_s",
    "prices.input_per_mtok",
    "prices.output_per_mtok",
)
_ROLE_MAY_CHANGE = (
    "resources.",
    "warm_start.",
    "sglang.",
    *(f"{api}.{f}" for api in ("openai", "anthropic") for f in _API_CONNECTION),
)
# Exact names, or prefixes ending in "." (a whole section). Anything not listed is refused on resume. A prefix
# would also admit a field added to its section later, unexamined: tests/unit/test_resume_guard.py lists every
# field admitted today (DECLARED_SAFE) and fails on a new one until someone declares it safe there.
MAY_CHANGE = (
    "rounds",
    "run_name",
    "tracking.",
    "ray.",
    "barrier.",
    "checkpoint.",
    "pipeline.",
    *(f"{role}.{f}" for role in ("planner", "actor") for f in _ROLE_MAY_CHANGE),
    # a plug-in's section that shapes no checkpoint says so (its `resume_may_change`)
    *(f"{path}." for path, model in _SECTIONS.items() if getattr(model, "resume_may_change", False)),
)


# Fields renamed or moved since a run may have started (old dotted name -> new), as each plug-in section
# declares them (its `moved`): a stored config is read under the new names, so a rename alone never refuses a
# resume nor shows as a change.
MOVED = {
    f"{path}.{old}": f"{path}.{new}"
    for path, model in _SECTIONS.items()
    for old, new in getattr(model, "moved", {}).items()
}


class ResumeRefused(ConfigError):
    """Resuming would change fields that shape the run's checkpoint or data; the message names each."""


def shapes_run(key: str) -> bool:
    """True unless `MAY_CHANGE` lists the dotted config field as safe to change on resume."""
    return not any(key == p or (p.endswith(".") and key.startswith(p)) for p in MAY_CHANGE)


def _flat(data: dict) -> dict:
    # Through YAML both sides compare as the file stores them (tuples as lists, secrets redacted).
    flat = flatten(yaml.safe_load(yaml.safe_dump(data, sort_keys=False)) or {})
    return {_renamed(k): v for k, v in flat.items()}


def _renamed(key: str) -> str:
    return MOVED.get(key, key)


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
