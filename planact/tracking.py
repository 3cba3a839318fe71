"""MLflow tracking: one run per flow run, resumed by id, metrics per round with step=round."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from pathlib import Path

from planact import faults
from planact.config import flatten
from planact.secrets import redact

# MLflow 3 shows an experiment as GenAI or model training by this tag; ours train models.
EXPERIMENT_KIND = ("mlflow.experimentKind", "custom_model_development")
NOTE_TAG = "mlflow.note.content"  # the run page's Description


def flow_run_link(tags: dict[str, str]) -> str | None:
    """A markdown link to the Prefect flow run named by the tags (its UI lives beside $PREFECT_API_URL)."""
    run_id = tags.get("prefect.flow_run_id")
    if not run_id or run_id == "None":
        return None
    name = tags.get("prefect.flow_run_name") or run_id
    api = os.environ.get("PREFECT_API_URL", "").rstrip("/")
    if not api:
        return f"Prefect flow run `{name}` ({run_id})"
    return f"Prefect flow run [{name}]({api.removesuffix('/api')}/runs/flow-run/{run_id})"


def tracking_uri(cfg) -> str:
    """Config URI, else $MLFLOW_TRACKING_URI, else a SQLite store under the run root (any config with .tracking)."""
    if cfg.tracking.tracking_uri:
        return cfg.tracking.tracking_uri
    if os.environ.get("MLFLOW_TRACKING_URI"):
        return os.environ["MLFLOW_TRACKING_URI"]
    root = Path(cfg.checkpoint.root if hasattr(cfg, "checkpoint") else cfg.root).resolve()
    root.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{root / 'mlflow.db'}"


def safe_params(cfg) -> dict[str, str]:
    """Flattened config with secrets masked (planact.secrets.redact; MLflow caps values at 6000 chars)."""
    data = cfg.model_dump() if hasattr(cfg, "model_dump") else cfg
    out = {k: json.dumps(v) if isinstance(v, (dict, list)) else str(v) for k, v in flatten(redact(data)).items()}
    return {k: v[:6000] for k, v in out.items()}


@contextlib.contextmanager
def _sqlite_create_lock(uri: str):
    """Serialise first use of a SQLite store: two processes migrating a fresh database race each other.

    A store that does not exist yet starts as a copy of an empty, migrated one (`_empty_store`)."""
    if not uri.startswith("sqlite:///"):
        yield
        return
    db = Path(uri[len("sqlite:///") :])
    db.parent.mkdir(parents=True, exist_ok=True)
    with open(f"{db}.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            if not db.exists():
                _copy_empty_store(db)
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _empty_store() -> Path:
    """An empty SQLite store with MLflow's schema, built once per MLflow version in the user's cache.

    MLflow migrates a fresh database through its whole history (~1.6 CPU-s); every run with its own store
    (the default) paid that before its first metric. A copy of an already migrated one opens in ~0.1 s."""
    import mlflow
    from mlflow.tracking import MlflowClient

    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "planact"
    path = cache / f"mlflow-{mlflow.__version__}-empty.db"
    if not path.exists():
        cache.mkdir(parents=True, exist_ok=True)
        tmp = cache / f".{path.name}.{os.getpid()}"
        tmp.unlink(missing_ok=True)
        MlflowClient(f"sqlite:///{tmp}").search_experiments(max_results=1)  # creates and migrates it
        os.replace(tmp, path)  # atomic: a concurrent builder's copy is the same schema
    return path


def _copy_empty_store(db: Path) -> None:
    """Start the store at `db` from the migrated empty one; MLflow's Default experiment keeps its artifacts
    beside the database (the template's builder chose a folder of its own)."""
    import shutil
    import sqlite3

    try:
        template = _empty_store()
    except OSError:  # no writable cache: MLflow creates and migrates the store itself
        return
    tmp = db.with_name(f".{db.name}.{os.getpid()}")
    try:
        shutil.copyfile(template, tmp)
        with contextlib.closing(sqlite3.connect(tmp)) as con, con:
            con.execute(
                "UPDATE experiments SET artifact_location = ? WHERE experiment_id = 0",
                ((db.parent / "mlruns" / "0").as_uri(),),
            )
        os.replace(tmp, db)
    except (OSError, sqlite3.Error):  # a schema this code does not know: MLflow builds the store itself
        tmp.unlink(missing_ok=True)


class Tracker:
    """A thin handle on one MLflow run, addressed by id so threads and resumed processes share it."""

    def __init__(
        self,
        cfg,
        run_id: str | None = None,
        tags: dict[str, str] | None = None,
        run_name: str | None = None,
        parent_run_id: str | None = None,
    ):
        from mlflow.entities import Param  # imported on use: processes that only need tracking_uri stay light
        from mlflow.tracking import MlflowClient

        self.uri = tracking_uri(cfg)
        with _sqlite_create_lock(self.uri):
            self.client = MlflowClient(self.uri)
            self.client.search_experiments(max_results=1)  # forces the store (and its migrations) into being
            exp = self.client.get_experiment_by_name(cfg.tracking.experiment)
            if exp is None:
                artifact_location = None
                if self.uri.startswith("sqlite:///"):
                    artifact_location = (Path(self.uri[len("sqlite:///") :]).parent / "mlartifacts").as_uri()
                exp_id = self._create_experiment(cfg.tracking.experiment, artifact_location)
            else:
                exp_id = exp.experiment_id
                if EXPERIMENT_KIND[0] not in exp.tags:  # an experiment MLflow guessed a kind for, or an older one
                    self.client.set_experiment_tag(exp_id, *EXPERIMENT_KIND)
        link = flow_run_link(tags or {})
        if run_id is None:
            tags = {**(tags or {}), **({"mlflow.parentRunId": parent_run_id} if parent_run_id else {})}  # nesting
            if link and NOTE_TAG not in tags:
                tags[NOTE_TAG] = f"planact run `{run_name or cfg.run_name}`, started by {link}."
            run = self.client.create_run(exp_id, run_name=run_name or cfg.run_name, tags=tags)
            self.run_id = run.info.run_id
            params = [Param(k, v) for k, v in safe_params(cfg).items()]
            for i in range(0, len(params), 100):
                self.client.log_batch(self.run_id, params=params[i : i + 100])
        else:
            self.run_id = run_id
            self.client.update_run(run_id, status="RUNNING")
            tags = dict(tags or {})
            if link:  # keep the history of flow runs that worked on this run
                note = self.client.get_run(run_id).data.tags.get(NOTE_TAG, "")
                tags[NOTE_TAG] = f"{note}\n\nResumed by {link}.".strip()
            if tags:
                self.set_tags(tags)
        self.experiment_id = exp_id

    def _create_experiment(self, name: str, artifact_location: str | None) -> str:
        """Create the experiment; when another run created it meanwhile (two runs starting together against a
        fresh tracking server: both found none), take that one."""
        from mlflow.exceptions import MlflowException

        try:
            return self.client.create_experiment(
                name, artifact_location=artifact_location, tags=dict([EXPERIMENT_KIND])
            )
        except MlflowException as err:
            if err.error_code != "RESOURCE_ALREADY_EXISTS" or (exp := self.client.get_experiment_by_name(name)) is None:
                raise
            return exp.experiment_id

    def set_tags(self, tags: dict[str, str]) -> None:
        """Set tags on the run."""
        from mlflow.entities import RunTag

        self.client.log_batch(self.run_id, tags=[RunTag(k, str(v)) for k, v in tags.items()])

    def log_metrics(self, metrics: dict[str, float], step: int) -> None:
        """Log a dict of scalars at `step` (the round)."""
        from mlflow.entities import Metric

        ts = int(time.time() * 1000)
        rows = [Metric(k.replace("@", "_at_"), float(v), ts, step) for k, v in metrics.items() if v is not None]
        for i in range(0, len(rows), 500):
            self.client.log_batch(self.run_id, metrics=rows[i : i + 500])
            faults.point("flow.mid_metrics")  # some of the step's metrics logged, not all

    def logged_steps(self, key: str) -> list[int]:
        """Steps already logged for a metric (used to prove resume adds no duplicates)."""
        return [m.step for m in self.client.get_metric_history(self.run_id, key)]

    def log_artifact(self, path: str | Path, artifact_path: str | None = None) -> None:
        """Upload a file or folder."""
        p = Path(path)
        if p.is_dir():
            self.client.log_artifacts(self.run_id, str(p), artifact_path)
        else:
            self.client.log_artifact(self.run_id, str(p), artifact_path)

    def log_table(self, rows: list[dict], name: str) -> None:
        """Log rows as an MLflow table artifact (JSON)."""
        if rows:
            self.client.log_table(self.run_id, data={k: [r.get(k) for r in rows] for k in rows[0]}, artifact_file=name)

    def finish(self, status: str = "FINISHED") -> None:
        """Mark the run terminated."""
        self.client.set_terminated(self.run_id, status=status)

    def run_url(self) -> str:
        """A link to the run in the MLflow UI (when tracking a server) or its URI."""
        if self.uri.startswith("http"):
            # MLflow 3's UI opens in its GenAI view unless told otherwise; these runs train models.
            return (
                f"{self.uri.rstrip('/')}/#/experiments/{self.experiment_id}/runs/{self.run_id}"
                "?workflowType=machine_learning"
            )
        return f"{self.uri} (run {self.run_id}; open with `mlflow ui --backend-store-uri {self.uri}`)"
