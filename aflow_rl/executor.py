"""The offline executor: a planner and an actor for the synthetic benchmark, from a checkpoint or warm-started once.

Offline there is no API model, so workflows call the Plan/Act pair itself: either a Plan/Act run's
checkpoint (the "optimise the workflow around the current models" mode) or tiny models trained
here on the teacher's demonstrations and cached under the run root, keyed by their step counts.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import random
import shutil
import tempfile
from pathlib import Path

import torch

from planact.config import RunConfig
from planact.engines.base import encode_prompt
from planact.envs.plan_act import PlanActEnv
from planact.models import build_tiny_model, build_tokenizer
from planact.rl.sft import sft


def _warm_start(folder: Path, role: str, steps: int, seed: int) -> None:
    defaults = RunConfig()
    rc = getattr(defaults, role)
    tok = build_tokenizer()
    model = build_tiny_model(rc.tiny, len(tok), seed, tok)
    env = PlanActEnv(defaults.env, seed)
    rng = random.Random(f"{seed}:aflow-demos:{role}")
    n = min(20000, max(2000, steps * rc.warm_start.batch_size // 4))
    pairs = env.planner_demos(n, rng) if role == "planner" else env.actor_demos(n, rng)
    demos = [(encode_prompt(tok, p), tok.encode(t, add_special_tokens=False) + [tok.eos_token_id]) for p, t in pairs]
    torch.manual_seed(seed)
    if steps:
        # A fixed step count (no held-out stop): the cached executor is the same models on every machine.
        sft(model, tok.pad_token_id, demos, rc.warm_start.model_copy(update={"patience": 0}), seed=seed, steps=steps)
    model.save_pretrained(folder / role)
    tok.save_pretrained(folder / role)


def with_local_models(cfg, tracking_uri: str | None):
    """The LLMConfig with registered models (models:/...) in planner_model / actor_model downloaded to folders.

    Resolved once, by the flow, so that evaluation workers only ever see folders (and an alias that
    moves during a search does not change the executor under it).
    """
    from planact.registry import is_model_uri, resolve_model

    update = {
        f: str(resolve_model(getattr(cfg, f), tracking_uri))
        for f in ("planner_model", "actor_model")
        if is_model_uri(getattr(cfg, f))
    }
    return cfg.model_copy(update=update) if update else cfg


def _with_role_models(cfg, root: Path, threads: int | None) -> Path:
    # planner/ and actor/ as links: the given model folders, the rest from the checkpoint (or the tiny default).
    given = {"planner": cfg.planner_model, "actor": cfg.actor_model}
    for role, path in given.items():
        if path and (str(path).startswith("models:/") or not (Path(path) / "config.json").is_file()):
            raise FileNotFoundError(
                f"executor.{role}_model {path}: not an HF model folder (registered models are "
                "resolved by the flow: call with_local_models first)"
            )
    base = None
    if not all(given.values()):
        base = ensure_planact_checkpoint(
            cfg.model_copy(update={"planner_model": None, "actor_model": None}), root, threads
        )
    sources = {role: Path(path).resolve() if path else base / role for role, path in given.items()}
    key = hashlib.sha1(json.dumps({r: str(p) for r, p in sources.items()}).encode()).hexdigest()[:12]
    folder = Path(root).resolve() / "aflow-executor" / f"models-{key}"
    if all((folder / r / "config.json").is_file() for r in sources):
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{folder.name}."))
    for role, src in sources.items():
        os.symlink(src, tmp / role)
    try:
        os.rename(tmp, folder)
    except OSError:  # a concurrent builder finished first
        shutil.rmtree(tmp, ignore_errors=True)
    return folder


def executor_fingerprint(planner_steps: int, actor_steps: int) -> str:
    """A digest of what decides a warm-started executor's weights: the roles' tiny and warm-start settings, the
    tokenizer, the first demonstrations, the step counts and the training code (a stored executor whose
    fingerprint differs was built by other code)."""
    from planact.models import build_tiny_model, build_tokenizer

    defaults, parts = RunConfig(), [inspect.getsource(_warm_start), inspect.getsource(sft)]
    parts.append(inspect.getsource(build_tiny_model))
    parts.append(json.dumps(build_tokenizer().get_vocab(), sort_keys=True))
    for role, steps, seed in (("planner", planner_steps, 1), ("actor", actor_steps, 2)):
        rc = getattr(defaults, role)
        env, rng = PlanActEnv(defaults.env, seed), random.Random(f"{seed}:aflow-demos:{role}")
        demos = env.planner_demos(8, rng) if role == "planner" else env.actor_demos(8, rng)
        parts += [role, str(steps), rc.tiny.model_dump_json(), rc.warm_start.model_dump_json(), json.dumps(demos)]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def ensure_planact_checkpoint(cfg, root: str | Path, threads: int | None = None) -> Path:
    """Folder with planner/ and actor/ checkpoints for an LLMConfig of kind 'planact' (built once if needed)."""
    if cfg.planner_model or cfg.actor_model:
        return _with_role_models(cfg, Path(root), threads)
    if cfg.checkpoint:
        folder = Path(cfg.checkpoint)
        missing = [r for r in ("planner", "actor") if not (folder / r / "config.json").is_file()]
        if missing:
            raise FileNotFoundError(
                f"executor.checkpoint {folder}: no {', '.join(missing)} model in it "
                "(expected a Plan/Act checkpoint folder with planner/ and actor/)"
            )
        return folder
    folder = Path(root).resolve() / "aflow-executor" / f"planner{cfg.planner_steps}-actor{cfg.actor_steps}"
    if (folder / "actor" / "config.json").is_file():
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{folder.name}."))
    torch.set_num_threads(threads or max(1, min(2, os.cpu_count() or 1)))
    _warm_start(tmp, "planner", cfg.planner_steps, seed=1)
    _warm_start(tmp, "actor", cfg.actor_steps, seed=2)
    (tmp / "fingerprint.txt").write_text(executor_fingerprint(cfg.planner_steps, cfg.actor_steps) + "\n")
    try:
        os.rename(tmp, folder)
    except OSError:  # a concurrent builder finished first; same seeds, same models
        shutil.rmtree(tmp, ignore_errors=True)
    return folder
