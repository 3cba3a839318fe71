"""Each role's starting checkpoint: its model_path resolved (folder, hub id, `models:/`, `planact:`), or a
tiny model built once under the run folder with a tokenizer trained on the environment's text."""

from __future__ import annotations

from pathlib import Path

from planact.config import API_ENGINES, RoleConfig, RunConfig
from planact.envs.base import make_env
from planact.progress import ProgressFn
from planact.registry import resolve_model
from planact.tracking import tracking_uri


def initial_model_path(cfg: RunConfig, role: str, texts=None) -> Path:
    """The role's starting checkpoint: its model_path, or a tiny model built once under the run folder
    (`texts`: a callable giving its tokenizer's training text; default: the environment's)."""
    rc: RoleConfig = getattr(cfg, role)
    if rc.model_path:  # a folder, a hub id, or a registered model (downloaded once per machine)
        return resolve_model(rc.model_path, tracking_uri(cfg))
    from planact.models import materialize_tiny

    seed = cfg.seed * 1000 + (1 if role == "planner" else 2)
    return materialize_tiny(
        rc.tiny,
        cfg.run_dir() / "models" / f"{role}-init",
        seed,
        texts=texts or (lambda: make_env(cfg).tokenizer_texts()),
    )


def prebuild_initial_models(cfg: RunConfig, roles, progress: ProgressFn | None = None) -> None:
    """Build each role's tiny starting model (and its locally trained tokenizer) here, once, before its agents start.

    Built inside the agents' constructors instead, every replica trained its own tokenizer, and on a fresh
    clone the repair env's (BPE over the training packages' code, two roles at once on 2 cores) outlasted
    the supervisor's 120 s wait for a constructor, failing `make repair-train` before its first round.
    `progress` hears the environment's set-up (the repair env's localisation contexts on a fresh corpus).
    """
    shared: list[list[str]] = []  # the environment's text, read once for both roles (a repair corpus' code)

    def texts() -> list[str]:
        if not shared:
            shared.append(make_env(cfg, progress=progress).tokenizer_texts())
        return shared[0]

    for role in roles:
        rc: RoleConfig = getattr(cfg, role)
        if not rc.model_path and rc.engine not in API_ENGINES:
            initial_model_path(cfg, role, texts)
