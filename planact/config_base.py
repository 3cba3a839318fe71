"""What every config of the project shares, planact's run config and its plug-ins' configs alike: the strict
model base, the error that names fields, YAML loading with `key=value` overrides, and the Ray section.

Plug-ins build their configs on this module (never on planact.config, which assembles the run config
from the installed plug-ins' sections: planact.plugins).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlparse

import yaml
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError


class StrictConfig(BaseModel):
    """The base of every config model of the project (planact's, each plug-in's): an unknown field is an
    error naming it, and assignments are validated too."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class ConfigError(ValueError):
    """A config is invalid; the message names every offending field."""


class RayConfig(StrictConfig):
    """How to reach Ray."""

    address: str | None = Field(
        None, description="Ray cluster address ('auto', 'ray://...'); empty = start a local Ray."
    )
    num_cpus: int | None = Field(None, ge=1, description="Logical CPUs for a locally started Ray (None = detect).")
    runtime_env: dict[str, Any] = Field(
        default_factory=dict, description="Ray runtime_env for workers (pip, env_vars, working_dir...)."
    )
    task_num_cpus: float = Field(
        0.1, gt=0.0, description="CPUs reserved by each Prefect task on Ray (fractional so actors leave room)."
    )
    agent_ready_timeout_s: float = Field(
        120.0,
        gt=0.0,
        description="Seconds an engine or trainer agent may take from its request until its constructor has finished "
        "(placed on a node, torch imported, model built) before the run fails with AgentCreationError; "
        "raise it on a loaded machine or for a large model. Applies when this run starts its namespace's "
        "schedulemesh supervisor.",
    )
    agent_stages: Literal["threads", "ray"] = Field(
        "threads",
        description="Where the stages whose work is a call to the agents run (actor-execute, train-<role>, "
        "warm-start): 'threads' = threads of the flow process (their work runs in the agents on Ray "
        "either way; saves a Ray task hop and a task-run start in a Ray worker, ~0.6 s a round), 'ray' = "
        "Ray task workers, like every other task of the flow.",
    )

    @property
    def private(self) -> bool:
        """True when the run starts its own local Ray (no cluster address given)."""
        return self.address in (None, "", "local")


def file_store_refusal(uri: str | None) -> str | None:
    """Why MLflow 3 will not open `uri` (its file store: a `file:` URI or a bare path), else None.

    Asked where a config is validated (planact's and aflow_rl's tracking.tracking_uri) and again before a run
    starts (the URI a run would really use, which may come from $MLFLOW_TRACKING_URI: planact.preflight)."""
    allowed = os.environ.get("MLFLOW_ALLOW_FILE_STORE", "").lower() in ("1", "true")
    if not uri or allowed or urlparse(uri).scheme not in ("", "file"):
        return None
    return (
        f"{uri!r} is MLflow's file store, which MLflow 3 no longer opens: use sqlite:///<path>/mlflow.db "
        "or an http:// tracking server (or set MLFLOW_ALLOW_FILE_STORE=true)"
    )


def _refuse_file_store(uri: str | None) -> str | None:
    # MLflow 3 refuses its file store only when a run opens it, after Prefect and Ray started: refuse it with the config
    refusal = file_store_refusal(uri)
    if refusal:
        raise ValueError(refusal)
    return uri


TrackingURI = Annotated[str | None, AfterValidator(_refuse_file_store)]
"""A config's MLflow tracking URI: a file store (`file:` URI or bare path) is an error naming the field."""


def check_tracking_env(field_uri: str | None) -> None:
    """Before a run starts: with its tracking_uri field empty the run uses $MLFLOW_TRACKING_URI, which must not
    name a file store either (the field itself is checked when the config is validated)."""
    refusal = None if field_uri else file_store_refusal(os.environ.get("MLFLOW_TRACKING_URI"))
    if refusal:
        raise ConfigError(f"$MLFLOW_TRACKING_URI (tracking.tracking_uri is empty, so the run uses it): {refusal}")


def check_run_name(v: str) -> str:
    """A run name names a folder: letters, digits, '_', '-', '.'."""
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}", v):
        raise ValueError("use letters, digits, '_', '-', '.' (it names a folder)")
    return v


def format_error(err: ValidationError, what: str = "run config") -> str:
    """A validation error as one line per offending field, each named by its dotted path."""
    lines = []
    for e in err.errors():
        loc = ".".join(str(p) for p in e["loc"]) or "<root>"
        lines.append(f"  {loc}: {e['msg']}")
    return f"invalid {what}:\n" + "\n".join(lines)


def set_path(data: dict, dotted: str, value: Any) -> None:
    """Set `a.b.c` inside nested dicts, creating levels as needed."""
    keys = dotted.split(".")
    if not all(k.strip() for k in keys):
        raise ConfigError(f"override {dotted!r}: empty name in the key path (expected e.g. planner.rl.lr)")
    node = data
    for k in keys[:-1]:
        node = node.setdefault(k, {})
        if not isinstance(node, dict):
            raise ConfigError(f"override {dotted!r}: {k!r} is not a section")
    node[keys[-1]] = value


def _yaml_problem(err: yaml.YAMLError) -> str:
    """A YAML error in one line: what is wrong and where."""
    mark = getattr(err, "problem_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    return f"{getattr(err, 'problem', None) or type(err).__name__}{where}"


def parse_overrides(overrides: list[str] | None) -> dict:
    """Turn ['a.b=1', 'c=x'] into a nested dict; values are parsed as YAML scalars."""
    out: dict = {}
    for item in overrides or []:
        if "=" not in item:
            raise ConfigError(f"override {item!r} must look like key.path=value")
        key, raw = item.split("=", 1)
        try:
            value = yaml.safe_load(raw) if raw != "" else None
        except yaml.YAMLError as err:
            raise ConfigError(
                f"override {item!r}: the value is not valid YAML ({_yaml_problem(err)}); quote it, e.g. key=\"'text'\""
            ) from None
        set_path(out, key.strip(), value)
    return out


def deep_merge(base: dict, extra: dict) -> dict:
    """Recursively merge `extra` into a copy of `base`."""
    out = dict(base)
    for k, v in extra.items():
        out[k] = deep_merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def keep_section_defaults(model: type[BaseModel], data: Any, names: tuple[str, ...]) -> Any:
    """`data` with each named section merged over its field's default_factory's own settings.

    A section default made with some fields set (the planner's group_size, the AFlow hook's rounds) keeps
    them when a config sets other fields of that section: without this, `--set actor.resources.replicas=2`
    gave the actor the generic role's defaults."""
    if isinstance(data, dict):
        for name in names:
            if isinstance(data.get(name), dict):
                own = model.model_fields[name].default_factory().model_dump(exclude_unset=True)
                data = {**data, name: deep_merge(own, data[name])}
    return data


def load_data(path: str | Path | None = None, overrides: list[str] | None = None) -> dict:
    """A YAML config file (or nothing) as a dict, with `key=value` overrides merged in (not validated)."""
    data: dict = {}
    if path:
        p = Path(path)
        if not p.is_file():
            raise ConfigError(f"config file not found: {p}")
        try:
            data = yaml.safe_load(p.read_text()) or {}
        except yaml.YAMLError as err:
            raise ConfigError(f"{p}: not valid YAML: {_yaml_problem(err)}") from None
        if not isinstance(data, dict):
            raise ConfigError(f"{p}: top level must be a mapping")
    return deep_merge(data, parse_overrides(overrides))


def flatten(cfg: BaseModel | dict, prefix: str = "") -> dict[str, Any]:
    """Flatten a config into dotted keys (MLflow params)."""
    data = cfg.model_dump() if isinstance(cfg, BaseModel) else cfg
    out: dict[str, Any] = {}
    for k, v in data.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and v:
            out.update(flatten(v, key + "."))
        else:
            out[key] = v
    return out
