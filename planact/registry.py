"""Trained roles in the MLflow Model Registry: log a checkpoint's role as a transformers model, register
it under a name, and turn `models:/<name>/<version-or-alias>` back into a local checkpoint folder.

A registered version is the role's weights and tokenizer in MLflow's transformers flavour (task
text-generation, with an input example), so `mlflow.transformers.load_model("models:/<name>/1")`
gives a generation pipeline; planact itself loads the same files as an ordinary HF folder. Each
version is tagged with the source run, round, checkpoint folder and the run's held-out figures.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import tempfile
from pathlib import Path

from planact.progress import Phase, ProgressFn


def _client(tracking_uri: str | None):
    # mlflow is imported on first use: Ray processes that only unpickle planact's classes (the schedulemesh
    # supervisor, Prefect task workers) would otherwise pay its ~1.4 s import at every start.
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri)


MODELS_URI = re.compile(r"^models:/(?P<name>[^/]+)/(?P<ref>[^/]+)$")
ROLES = ("planner", "actor")


@contextlib.contextmanager
def tracking(uri: str):
    """MLflow's fluent API pointed at `uri` for the block, then put back as it was.

    mlflow.set_tracking_uri also exports MLFLOW_TRACKING_URI; left behind, every later flow (and every
    subprocess, e.g. a notebook kernel) of this process would track into that store instead of its own.
    """
    import mlflow

    env, previous = os.environ.get("MLFLOW_TRACKING_URI"), mlflow.get_tracking_uri()
    mlflow.set_tracking_uri(uri)
    try:
        yield
    finally:
        mlflow.set_tracking_uri(previous)
        if env is None:
            os.environ.pop("MLFLOW_TRACKING_URI", None)
        else:
            os.environ["MLFLOW_TRACKING_URI"] = env


def is_model_uri(value: str | os.PathLike | None) -> bool:
    """True for `models:/<name>/<version-or-alias>` (a registered model), False for a folder."""
    return bool(value) and str(value).startswith("models:/")


def registered_name(cfg, role: str) -> str:
    """The registry name of a run's role: the configured one, else `<run_name>-<role>`."""
    return getattr(cfg.tracking.model_names, role) or f"{cfg.run_name}-{role}"


def _input_example(folder: Path) -> str | None:
    # A prompt the role really trained on, saved with its checkpoint (none before the first update).
    example = folder / "input_example.txt"
    return example.read_text() if example.is_file() else None


@contextlib.contextmanager
def _quiet(logger: str):
    """Only errors from `logger` (and its children) while inside."""
    log = logging.getLogger(logger)
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        log.setLevel(level)


def register_role(
    tracking_uri: str, run_id: str, folder: str | Path, role: str, name: str, tags: dict[str, str]
) -> int:
    """Log `folder/<role>` as an MLflow transformers model in run `run_id`, register it as `name`; returns the
    version."""
    import mlflow
    import mlflow.transformers
    import torch
    import transformers

    from planact import lora
    from planact.models import load_model

    src = Path(folder) / role
    model, tokenizer = load_model(src, native=False)  # MLflow's transformers flavour logs transformers' classes
    # A LoRA checkpoint is logged as its adapter plus a reference to the local base folder (MLflow's PEFT
    # support): mlflow.transformers.load_model loads that base and applies the adapter.
    base = {"base_model_path": str(lora.resolve_base(lora.base_of(src)))} if lora.is_adapter_folder(src) else {}
    client = _client(tracking_uri)
    from mlflow.models import ModelSignature
    from mlflow.types import ColSpec, Schema

    with (
        tracking(tracking_uri),
        mlflow.start_run(run_id=run_id, nested=mlflow.active_run() is not None),
        _quiet("mlflow"),
    ):  # model-card, licence and signature notes a local model always triggers
        info = mlflow.transformers.log_model(
            {"model": model, "tokenizer": tokenizer},
            name=f"{role}-model",
            task="text-generation",
            input_example=_input_example(src),
            registered_model_name=name,
            # Text in, text out: stated, so MLflow does not run the model to infer it.
            signature=ModelSignature(inputs=Schema([ColSpec("string")]), outputs=Schema([ColSpec("string")])),
            # Listed, not inferred: inference imports the model in a subprocess (slow, and it guesses).
            pip_requirements=[f"transformers=={transformers.__version__}", f"torch=={torch.__version__}"],
            **base,
        )
    version = int(info.registered_model_version)
    for k, v in tags.items():
        client.set_model_version_tag(name, str(version), k, str(v))
    return version


def registered_versions(tracking_uri: str, name: str, run_id: str) -> dict[str, int]:
    """Checkpoint folder -> version for the versions of `name` this run registered already."""
    client = _client(tracking_uri)
    try:
        versions = client.search_model_versions(f"name = '{name}'")
    except Exception:  # noqa: BLE001 - no such model yet
        return {}
    return {
        v.tags.get("planact.checkpoint", ""): int(v.version) for v in versions if v.tags.get("planact.run_id") == run_id
    }


def register_checkpoint(
    cfg,
    tracking_uri: str,
    run_id: str,
    folder: str | Path,
    round_idx: int,
    heldout: dict[str, float] | None = None,
    roles: tuple[str, ...] | list[str] = ROLES,
    progress: ProgressFn | None = None,
) -> dict[str, int]:
    """Register each of `roles` saved in `folder` (once per run and checkpoint); returns role -> version.

    `progress` hears each role registered (logging a pretrained model to MLflow takes a minute or more)."""
    out = {}
    phase = Phase("registration", len(roles), progress)
    for role in roles:
        if not has_model(Path(folder) / role):
            raise FileNotFoundError(f"{folder}/{role}: no saved model to register")
        name = registered_name(cfg, role)
        done = registered_versions(tracking_uri, name, run_id).get(str(folder))
        if done is not None:  # a re-run of a finished run: the same checkpoint is not registered twice
            out[role] = done
            phase.advance(note=f"{role}: already registered")
            continue
        tags = {
            "planact.run_id": run_id,
            "planact.run_name": cfg.run_name,
            "planact.role": role,
            "planact.round": round_idx,
            "planact.checkpoint": str(folder),
            # The same names as the run's metrics (MLflow refuses '@' in names).
            **{f"heldout/{k}".replace("@", "_at_"): f"{v:.6g}" for k, v in (heldout or {}).items()},
        }
        out[role] = register_role(tracking_uri, run_id, folder, role, name, tags)
        phase.advance(note=f"{role}: {name} version {out[role]}")
    return out


def has_model(folder: Path) -> bool:
    """True when `folder` holds a saved role: a full model, or a LoRA adapter over a named base."""
    return (folder / "config.json").is_file() or (folder / "adapter_config.json").is_file()


def _version(client, name: str, ref: str) -> str:
    if ref.isdigit():
        return client.get_model_version(name, ref).version
    if ref.lower() == "latest":
        versions = client.search_model_versions(f"name = '{name}'")
        if not versions:
            raise ValueError(f"models:/{name}/latest: no version of {name!r} is registered")
        return str(max(int(v.version) for v in versions))
    return client.get_model_version_by_alias(name, ref).version


def model_version(uri: str, tracking_uri: str | None = None) -> tuple[str, str]:
    """(name, version) a `models:/<name>/<version-or-alias>` URI points at now; raises if there is none."""
    m = MODELS_URI.match(str(uri))
    if not m:
        raise ValueError(f"{uri}: expected models:/<name>/<version-or-alias>")
    return m["name"], _version(_client(tracking_uri), m["name"], m["ref"])


def resolve_model(
    path: str | os.PathLike, tracking_uri: str | None = None, cache_root: str | Path | None = None
) -> Path:
    """A folder as is; `planact:<name>` an imported pretrained model (planact.model_import, imported on first
    use); `models:/<name>/<version-or-alias>` downloaded once into an HF checkpoint folder (under
    `cache_root`, else $PLANACT_MODEL_CACHE, else ~/.cache/planact/registry)."""
    if isinstance(path, str) and path.startswith("planact:"):
        from planact.model_import import resolve_alias

        return resolve_alias(path)
    if not is_model_uri(path):
        return Path(path)
    import mlflow.artifacts

    name, version = model_version(str(path), tracking_uri)
    # Keyed by the version's source run too: another tracking server may hold a different "<name>" v1.
    run_id = _client(tracking_uri).get_model_version(name, version).run_id or "norun"
    root = Path(cache_root or os.environ.get("PLANACT_MODEL_CACHE") or Path.home() / ".cache" / "planact" / "registry")
    out = root / name / f"v{version}-{run_id[:12]}"
    if has_model(out):
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        # The version's own artifact URI: a models:/ URI would be looked up in the process's global
        # registry, which is not this tracking server's in a Ray worker.
        source = _client(tracking_uri).get_model_version_download_uri(name, version)
        local = Path(mlflow.artifacts.download_artifacts(artifact_uri=source, dst_path=tmp, tracking_uri=tracking_uri))
        staged = Path(tmp) / "hf"
        # The transformers flavour keeps weights in model/ and the tokenizer in components/tokenizer/;
        # planact loads one folder holding both, as save_pretrained writes it.
        if (local / "peft").is_dir():  # a LoRA version: the adapter, its base named by the flavour's config
            shutil.copytree(local / "peft", staged)
            _name_base(local, staged)
        else:
            shutil.copytree(local / "model", staged)
        for f in (local / "components" / "tokenizer").iterdir():
            shutil.copy2(f, staged / f.name)
        try:
            os.rename(staged, out)
        except OSError:  # another process resolved the same version first
            pass
    return out


def _name_base(logged: Path, adapter: Path) -> None:
    """Record in an adapter folder the base folder its MLflow version was logged against."""
    import json

    import yaml

    flavor = yaml.safe_load((logged / "MLmodel").read_text())["flavors"]["transformers"]
    base = flavor.get("source_model_name") or flavor.get("base_model_path")
    if base:
        (adapter / "planact_base.json").write_text(json.dumps({"model_path": str(base)}))
