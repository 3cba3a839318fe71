"""Prefect tasks of the repair-evaluate flow: each delegates to graph_planner (the library does the work)."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import ray
from prefect import task

from graph_planner.config import RepairEvalConfig
from graph_planner.corpus.build import build_corpus
from graph_planner.corpus.spec import load_corpus_config
from graph_planner.env import EnvLimits
from graph_planner.evaluate import run_slot, shard
from graph_planner.tasks import RepairTask, load_tasks
from planact.progress import Phase
from tasks.progress import task_progress


@task(name="load-corpus")
def load_corpus(cfg: RepairEvalConfig) -> list[RepairTask]:
    """The split's tasks; the corpus is built first when its folder has no task files (cached per package)."""
    folder = Path(cfg.corpus_dir)
    if cfg.split == "real" and not (folder / "real.jsonl").is_file():
        raise ValueError(f"corpus_dir {folder} has no real.jsonl: build it with `planact-repair corpus --history`")
    if cfg.split != "real" and not (folder / "train.jsonl").is_file():
        summary = build_corpus(load_corpus_config(cfg.corpus_config), folder, progress=task_progress("corpus"))
        print(f"built corpus {folder}: {summary['tasks']} tasks")
    tasks = load_tasks(folder, split=None if cfg.split == "all" else cfg.split, limit=cfg.limit or None)
    if not tasks:
        raise ValueError(f"corpus_dir {folder}: no tasks in split {cfg.split!r}")
    return tasks


@ray.remote(num_cpus=1)
def _slot(tasks: list[RepairTask], agent: str, limits: EnvLimits, model: dict) -> tuple[list[dict], str]:
    # telemetry comes back as text: the slot may run on another node than the driver
    engine = None
    if agent == "model":
        from planact.engine_config import OpenAIConfig
        from planact.engines.api import OpenAIEngine

        engine = OpenAIEngine(OpenAIConfig.model_validate(model))
    with tempfile.TemporaryDirectory() as tmp:
        tele = Path(tmp) / "telemetry.jsonl"
        results = run_slot(tasks, agent, limits, tele, engine=engine)
        return results, tele.read_text() if tele.is_file() else ""


@task(name="run-episodes")
def run_episodes(cfg: RepairEvalConfig, tasks: list[RepairTask]) -> list[dict]:
    """Episodes as Ray tasks, one sandbox slot per CPU; telemetry written under the run folder."""
    slots = cfg.workers or max(1, int(ray.cluster_resources().get("CPU", os.cpu_count() or 1)))
    limits = EnvLimits.from_episode(cfg.episode)
    # One Ray task per episode, at most `slots` in flight, in the shards' interleaved order: an evaluation of
    # the shipped held-out split takes over an hour on 2 cores, and the console says k of n as each ends
    # (one task per slot said nothing until the last slot finished)
    order = [t for part in shard(tasks, slots) for t in part]
    phase = Phase(f"{cfg.agent} agent episodes", len(order), task_progress("episodes"))
    waiting, running, parts = list(reversed(order)), [], []
    while waiting or running:
        while waiting and len(running) < slots:
            running.append(_slot.remote([waiting.pop()], cfg.agent, limits, cfg.model.model_dump()))
        done, running = ray.wait(running, num_returns=1)
        parts.append(ray.get(done[0]))
        solved = sum(r["resolved"] for results, _ in parts for r in results)
        phase.advance(note=f"{solved} solved so far")
    tele = cfg.run_dir() / "telemetry.jsonl"
    tele.parent.mkdir(parents=True, exist_ok=True)
    tele.write_text("".join(text for _, text in parts))
    by_id = {r["instance_id"]: r for results, _ in parts for r in results}
    return [by_id[t.instance_id] for t in tasks]


@task(name="write-summary")
def write_summary(cfg: RepairEvalConfig, summary: dict, episodes: list[dict]) -> Path:
    """summary.json (numbers and tables) and episodes.jsonl in the run folder."""
    out = cfg.run_dir()
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    (out / "episodes.jsonl").write_text("".join(json.dumps(e) + "\n" for e in episodes))
    return out
