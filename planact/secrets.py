"""What counts as a secret in a config, and how it is kept out of everything a run writes.

A config may name secrets but never hold them: API keys come from environment variables or Prefect
Secret blocks, Ray workers get them through `${VAR}` references in `ray.runtime_env.env_vars`
(expanded from the driver's environment when Ray starts), and URLs carry no `user:password@`
(MLflow reads MLFLOW_TRACKING_USERNAME / MLFLOW_TRACKING_PASSWORD). `config_errors` enforces that
before any work starts; `redact` masks what slips through anyway before MLflow params and the
resolved config are written.
"""

from __future__ import annotations

import os
import re
from typing import Any

# A field or variable whose *name* says it holds a secret (max_new_tokens and api_key_env do not).
_SECRET_NAME = re.compile(
    r"(^|_)(api_?key|access_?key|secret_?key|private_?key|token|secret|password|passwd|"
    r"credentials?|auth)$",
    re.I,
)
_URL_CREDENTIALS = re.compile(r"(?P<scheme>[a-z][a-z0-9+.-]*://)(?P<cred>[^/@\s:]+:[^/@\s]+)@", re.I)
_REFERENCE = re.compile(r"^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$")
MASK = "***"


def is_secret_name(name: str) -> bool:
    """True for names like OPENAI_API_KEY, hf_token, password (not max_new_tokens, api_key_env)."""
    return bool(_SECRET_NAME.search(name))


def _walk(value: Any, path: str):
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _walk(v, f"{path}.{k}" if path else str(k))
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            yield from _walk(v, f"{path}.{i}")
    else:
        yield path, value


def config_errors(data: dict) -> list[str]:
    """Secrets written into a config (by field path): literal values of secret-named env vars, URL passwords."""
    errors = []
    for path, value in _walk(data, ""):
        if not isinstance(value, str) or not value:
            continue
        last = path.rsplit(".", 1)[-1]
        if ".env_vars." in f".{path}" and is_secret_name(last) and not _REFERENCE.match(value):
            errors.append(
                f"{path}: a secret in the config would reach MLflow, Prefect and the run folder; "
                f"export it in the driver's environment and write ${{{last}}} here"
            )
        if _URL_CREDENTIALS.search(value):
            errors.append(
                f"{path}: the URL holds a password; pass credentials through the environment "
                "(e.g. MLFLOW_TRACKING_USERNAME / MLFLOW_TRACKING_PASSWORD)"
            )
    return errors


def redact(value: Any, name: str = "") -> Any:
    """A copy with secret-named values, env_vars values and URL passwords masked."""
    if isinstance(value, dict):
        return {
            k: (
                ({ek: MASK for ek in v} if isinstance(v, dict) else MASK)
                if k == "env_vars"
                else MASK
                if is_secret_name(str(k)) and isinstance(v, str) and v
                else redact(v, str(k))
            )
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [redact(v) for v in value]
    if isinstance(value, str):
        return _URL_CREDENTIALS.sub(lambda m: f"{m['scheme']}{MASK}@", value)
    return value


def expand_references(env_vars: dict[str, str]) -> dict[str, str]:
    """`${VAR}` values taken from this process's environment (missing ones are an error naming them)."""
    out = {}
    for k, v in env_vars.items():
        m = _REFERENCE.match(str(v))
        if m:
            if m.group(1) not in os.environ:
                raise KeyError(
                    f"ray.runtime_env.env_vars.{k}: ${{{m.group(1)}}} is not set in the driver's environment"
                )
            out[k] = os.environ[m.group(1)]
        else:
            out[k] = v
    return out
