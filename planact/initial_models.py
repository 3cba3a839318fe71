"""Each role's starting checkpoint: its model_path resolved (folder, hub id, `models:/`, `planact:`), or a
tiny model built once under the run folder with a tokenizer trained on the environment's text."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from importlib.metadata import version
from pathlib import Path

from planact.config import API_ENGINES, RoleConfig, RunConfig
from planact.envs.base import make_env
from planact.fetch import CACHE_ROOT
from planact.progress import ProgressFn
from planact.registry import resolve_model
from planact.tracking import tracking_uri


def initial_model_path(cfg: RunConfig, role: str, texts=None) -> Path:
    """The role's starting checkpoint: its model_path, or a tiny model built once under the run folder
    (`texts`: a callable giving its tokenizer's training text; default: the environment's)."""
    rc: RoleConfig = getattr(cfg, role)
    if rc.model_path:  # a folder, a hub id, or a registered model (downloaded once per machine)
        return resolve_model(rc.model_path, tracking_uri(cfg))
    out = cfg.run_dir() / "models" / f"{role}-init"
    if out.is_dir():
        return out
    seed = cfg.seed * 1000 + (1 if role == "planner" else 2)
    texts = texts or (lambda: make_env(cfg).tokenizer_texts())
    return _from_cache(out, _build_key(rc, seed, texts), lambda folder: _build(rc, folder, seed, texts))


def _build(rc: RoleConfig, folder: Path, seed: int, texts) -> Path:
    from planact.models import materialize_tiny  # transformers: ~5 CPU-s to import, paid only on a cache miss

    return materialize_tiny(rc.tiny, folder, seed, texts=texts)


def _build_key(rc: RoleConfig, seed: int, texts) -> str:
    """What a tiny model's files depend on: its shape, seed, tokenizer text and the libraries that write them."""
    h = hashlib.sha256(json.dumps([rc.tiny.model_dump(), seed], sort_keys=True).encode())
    h.update((Path(__file__).parent / "models.py").read_bytes())  # the builders and the character vocabulary
    for lib in ("torch", "transformers", "tokenizers"):
        h.update(f"{lib}={version(lib)};".encode())
    if rc.tiny.tokenizer == "bpe":
        for text in texts():
            h.update(hashlib.sha256(text.encode()).digest())
    return h.hexdigest()[:32]


def _from_cache(out: Path, key: str, build) -> Path:
    """Copy the tiny model built under `key` before (on this machine) into `out`; build and keep it on a miss.

    Every fresh run of a config used to build the same model again in its driver, importing transformers only
    for that. The copy under the run folder keeps a run self-contained: deleting the cache changes nothing.
    """
    cached = CACHE_ROOT / "tiny-models" / key
    if not cached.is_dir():
        build(cached)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}."))
    shutil.copytree(cached, tmp, dirs_exist_ok=True)
    try:
        os.rename(tmp, out)
    except OSError:  # another process got there first with the same files
        shutil.rmtree(tmp, ignore_errors=True)
    return out


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
