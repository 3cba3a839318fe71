"""Pre-flight checks of a run config against the world, before any work starts: API keys, registered
models, imported pretrained models, what each plug-in section needs (a repair run's corpus). (Static
validation is planact.config's.)"""

from __future__ import annotations

from planact import plugins
from planact.config import ConfigError, RunConfig
from planact.config_base import check_tracking_env
from planact.model_import import ModelUnavailable, resolve_alias
from planact.registry import model_version
from planact.role_config import API_ENGINES
from planact.tracking import tracking_uri


def check_runtime(cfg: RunConfig) -> None:
    """Before any work starts: the MLflow store the run would use is one MLflow 3 opens, every API-engine
    role can find its key (env var or Prefect Secret), a registered model named in model_path exists, a
    `planact:<name>` model is imported (importing it now from its wheel, or naming the command to run), and
    each plug-in section's preflight passes."""
    check_tracking_env(cfg.tracking.tracking_uri)
    plugins.call_hook(cfg.plugin_sections(), "preflight", cfg)
    for role in ("planner", "actor"):
        rc = getattr(cfg, role)
        if rc.model_path and rc.model_path.startswith("planact:"):
            try:
                resolve_alias(rc.model_path)
            except (ModelUnavailable, ValueError) as exc:
                raise ConfigError(f"{role}.model_path: {exc}") from None
        if rc.model_path and rc.model_path.startswith("models:/"):
            try:
                model_version(rc.model_path, tracking_uri(cfg))
            except Exception as exc:  # noqa: BLE001 - any lookup failure means the run cannot start
                raise ConfigError(
                    f"{role}.model_path: {rc.model_path} cannot be found in the MLflow registry at "
                    f"{tracking_uri(cfg)} ({type(exc).__name__}: {str(exc)[:200]})"
                ) from None
        if rc.engine in API_ENGINES:
            missing = getattr(rc, rc.engine).missing_key(f"{role}.{rc.engine}")
            if missing:
                raise ConfigError(missing)
