"""The driver-side bookkeeping of a training run: agents, resume, metrics, checkpoints (it connects to Ray through
planact/ray_setup.py).

No Prefect here: the flow decides *what* runs (tasks, sub-flows); a session
remembers *where the run is* so that a killed run resumes after its last
completed round and continues the same MLflow run without duplicate steps.

A round counts as completed once its checkpoint is on disk and the run state
records it; its metrics are logged to MLflow at that moment, so MLflow never
shows a round that a resume would run again.
"""

from __future__ import annotations

import functools
import importlib
import json
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

import ray
import yaml

from planact import agents, faults
from planact.config import RunConfig
from planact.envs.base import headline_keys
from planact.experience import PoolRef, pool_actor
from planact.initial_models import prebuild_initial_models
from planact.orchestrator import get_or_create_orchestrator, orchestrator_state
from planact.progress import Phase, ProgressFn, bar, eta_text
from planact.ray_setup import connect_ray
from planact.registry import registered_name
from planact.resume import check_resume
from planact.secrets import redact
from planact.storage import RunState, atomic_write, checkpoint_dir, prune_checkpoints
from planact.timing import freeze_heap, thaw_heap
from planact.tracking import Tracker

TABLE_KEYS = (
    "success",
    "planner/reward_mean",
    "actor/reward_mean",
    "planner/loss",
    "actor/loss",
    "fallback",
    "time/round_s",
)


@ray.remote
def _warm_worker(modules: tuple[str, ...], hold_s: float) -> None:
    for name in modules:
        importlib.import_module(name)
    time.sleep(hold_s)  # held so that concurrent warm-up tasks need (and start) distinct workers


class TrainingSession:
    """Where a run stands: its state file, MLflow run, agents and pending round metrics."""

    def __init__(self, cfg: RunConfig, tags: dict[str, str] | None = None, env_vars: dict[str, str] | None = None):
        self.cfg = cfg
        self.run_dir = cfg.run_dir()
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.state = RunState(self.run_dir, cfg.agent_role)
        # Before anything is created or logged: a resume may not change what the checkpoint means.
        changes = check_resume(self.run_dir, cfg.model_dump()) if self.state.data["mlflow_run_id"] else []
        self.roles = ["planner", "actor"] if cfg.agent_role == "both" else [cfg.agent_role]
        suffix = "" if cfg.agent_role == "both" else f"-{cfg.agent_role}"
        self.tracker = Tracker(cfg, self.state.data["mlflow_run_id"], tags=tags, run_name=cfg.run_name + suffix)
        # One pool actor per job (two-job mode: one each); both append to the same folder under a file lock.
        self.experience = PoolRef(
            self.run_dir / "experience", f"{cfg.run_name}:{cfg.agent_role}:experience", cfg.barrier.namespace
        )
        self.resumed = self.state.data["mlflow_run_id"] is not None
        if not self.resumed:
            self.state.data["mlflow_run_id"] = self.tracker.run_id
            self.state.save()
            atomic_write(
                self.run_dir / "config.resolved.yaml", yaml.safe_dump(redact(cfg.model_dump()), sort_keys=False)
            )
            self.tracker.log_artifact(self.run_dir / "config.resolved.yaml")
        elif changes:
            print(f"resuming with changed settings (allowed): {'; '.join(changes)}")
            self.tracker.set_tags({"planact.resume_changes": "; ".join(changes)[:5000]})
        self._flush_pending()
        self.owns_ray = connect_ray(cfg, env_vars)
        self.pending: list[tuple[int, dict]] = []
        self.rollouts: list[dict] = []
        self.evals: dict[int, dict] = {int(k): v for k, v in self.state.data.get("evals", {}).items()}
        self._round_s: list[float] = []  # this process's round times, for the progress line's ETA
        self.role_groups: list[agents.RoleGroup] = []
        self.registered: dict[str, str] = {}  # role -> models:/<name>/<version> once registered
        self.weight_versions: dict[str, int] = {}  # role -> weight version its last training step published
        # One incarnation per flow run: a round it re-runs supersedes an earlier incarnation's payload.
        self.incarnation = uuid.uuid4().hex
        self._beating = threading.Event()
        if cfg.agent_role != "both" and cfg.barrier.liveness_s > 0:
            threading.Thread(target=self._heartbeat, daemon=True, name="barrier-heartbeat").start()

    def _heartbeat(self) -> None:
        """Tell the orchestrator this role is alive (two-job mode), so a partner waiting on it is not
        held to the full barrier timeout once this job dies."""
        orch = None
        while not self._beating.wait(self.cfg.barrier.liveness_s / 3):
            try:
                orch = orch or get_or_create_orchestrator(self.cfg.barrier.namespace, str(orchestrator_state(self.cfg)))
                orch.heartbeat.remote(self.cfg.run_name, self.cfg.agent_role)
            except Exception:  # Ray going down at the end of the run
                orch = None

    # --- agents and resume ---

    def ensure_agents(
        self, preload: tuple[str, ...] = (), progress: ProgressFn | None = None
    ) -> tuple[agents.RoleGroup | None, agents.RoleGroup | None]:
        """Create (or find) the engines and trainers of the roles this flow drives.

        Meanwhile (stages as Ray tasks only), warm the Ray task workers a round will use, importing `preload`
        modules (the caller's task modules) there: a cold worker spent seconds on them in the first round.
        `progress` hears each role's agents answering (a pretrained model loads for a minute or more).
        """
        agents.check_feasible(self.cfg, self.roles)
        # Task workers take seconds to start on a busy machine: start the ones a round's parallel tasks
        # need (fan-out + one train task per role) while the agents load their models. Only when the stages
        # run as Ray tasks: with flow threads no round task reaches a Ray worker, and each warmed worker
        # spent ~2.7 CPU-s importing the task modules for nothing (a smoke run's 44 CPU-s held two).
        warm = []
        if self.cfg.ray.agent_stages == "ray":
            width = max(len(self.roles), *(getattr(self.cfg, r).resources.replicas for r in self.roles))
            options = _warm_worker.options(num_cpus=self.cfg.ray.task_num_cpus)
            warm = [options.remote(preload, 0.5) for _ in range(width)]
        prebuild_initial_models(self.cfg, self.roles, progress)
        scheduler = agents.scheduler_for(self.cfg)
        self._pool = pool_actor(self.experience.path, self.experience.name, self.experience.namespace)  # owned here
        phase = Phase("agents of the roles (engines, trainers: models loading)", len(self.roles), progress)
        with ThreadPoolExecutor(len(self.roles)) as pool:
            futures = {pool.submit(agents.create_role_group, self.cfg, r, scheduler): r for r in self.roles}
            for done in as_completed(futures):
                phase.advance(note=f"{futures[done]} ready")
        by_role = {r: f.result() for f, r in futures.items()}
        made = [by_role[r] for r in self.roles]
        groups = dict(zip(self.roles, made))
        self.role_groups = made
        ray.get(warm)
        freeze_heap()  # what this driver holds from now on is the run's static setup
        return groups.get("planner"), groups.get("actor")

    def groups(self, planner, actor) -> list[agents.RoleGroup]:
        """The role groups this flow drives."""
        return [g for g in (planner, actor) if g is not None]

    @property
    def needs_warm_start(self) -> bool:
        """True for a fresh run (no completed warm start)."""
        return self.state.data["last_completed_round"] < 0

    def restore(self, planner, actor) -> int:
        """Load the last checkpoint into the agents; returns the round it was taken after."""
        folder = self.state.data["checkpoint"]
        for g in self.groups(planner, actor):
            if g.trainer is not None:  # a frozen role is never checkpointed: it keeps its initial weights
                agents.restore_group(g, folder)
        return self.state.data["last_completed_round"]

    def record_warm_start(self, curves: dict[str, list[dict]]) -> None:
        """Log warm-start loss curves (step = warm-start step): warm_start/<role>_loss, and with patience
        <role>_heldout_loss at each evaluation and <role>_best_heldout_loss where it stopped."""
        for role, curve in curves.items():
            for point in curve:
                self.tracker.log_metrics(
                    {f"warm_start/{role}_{k}": v for k, v in point.items() if k.endswith("loss")}, step=point["step"]
                )
        self.state.data["warm_start_curves"] = curves
        # What checkpoint 0 must hold: a warm start publishes one weight version over the fresh weights (0).
        # A role whose agent was recreated after its warm start (a crash, or the memory monitor killing it
        # while the other role still trained) holds version 0 again; checkpoint 0 then refuses it instead of
        # saving untrained weights as the warm start and training on from them.
        self.weight_versions.update({role: 1 for role in curves})

    # --- rounds ---

    def record_round(self, round_idx: int, out: dict) -> None:
        """Keep a finished round's metrics until its checkpoint makes it durable."""
        self.pending.append((round_idx, out["metrics"]))
        for role in self.roles:  # what each trained role's weights must be at the next checkpoint
            if out["metrics"].get(f"{role}/weight_version") is not None:
                self.weight_versions[role] = int(out["metrics"][f"{role}/weight_version"])
        faults.point("flow.round_recorded")  # the round ran (experience acknowledged), its checkpoint not yet
        if out.get("workers"):
            self.state.data["workers"] = out["workers"]
        if out.get("rollouts"):
            self.rollouts = [{"round": round_idx, **r} for r in out["rollouts"]]

    def checkpoint_due(self, round_idx: int) -> bool:
        """Checkpoint every k rounds, after the warm start (round 0) and after the last round."""
        return round_idx == 0 or round_idx % self.cfg.checkpoint.every == 0 or round_idx >= self.cfg.rounds

    def eval_due(self, round_idx: int) -> bool:
        """Held-out evaluation after the warm start, every eval_every rounds and at the end."""
        return round_idx == 0 or round_idx % self.cfg.tracking.eval_every == 0 or round_idx >= self.cfg.rounds

    def checkpoint_folder(self, round_idx: int) -> str:
        """Folder for the checkpoint after `round_idx`."""
        return str(checkpoint_dir(self.run_dir, round_idx))

    def commit(self, round_idx: int, folder: str) -> None:
        """Mark rounds up to `round_idx` completed (checkpoint is on disk), then log their metrics."""
        faults.point("flow.mid_checkpoint")  # the checkpoint is on disk, the state does not name it yet
        for r, m in self.pending:
            self.state.data["table"].append({"round": r, **{k: m.get(k) for k in TABLE_KEYS}})
        self.state.data.update(
            last_completed_round=round_idx, checkpoint=folder, pending_metrics=[[r, m] for r, m in self.pending]
        )
        self.state.save()
        self.pending = []
        self._flush_pending()
        keep = [Path(self.state.data["checkpoint"])]
        prune_checkpoints(self.run_dir, keep, self.roles)

    def _flush_pending(self) -> None:
        # Metrics of committed rounds are in the state file first, so a kill here neither loses nor repeats them.
        pending = self.state.data.get("pending_metrics") or []
        if not pending:
            return
        done = set(self.tracker.logged_steps("time/round_s"))
        for r, m in pending:
            if r not in done:
                self.tracker.log_metrics(m, step=r)
        self.state.data["pending_metrics"] = []
        self.state.save()

    def log_eval(self, round_idx: int, metrics: dict) -> None:
        """Log held-out metrics at step=round and remember them for the summary."""
        self.tracker.log_metrics({f"heldout/{k}": v for k, v in metrics.items()}, step=round_idx)
        self.evals[round_idx] = metrics
        self.state.data["evals"] = {str(k): v for k, v in self.evals.items()}
        self.state.save()

    # --- end of run ---

    def final_checkpoint(self) -> tuple[str, int, dict]:
        """The last committed checkpoint, its round, and the last held-out figures (for the registry)."""
        heldout = self.evals[max(self.evals)] if self.evals else {}
        return self.state.data["checkpoint"], self.state.data["last_completed_round"], heldout

    def record_registered(self, versions: dict[str, int]) -> None:
        """Tag the run with the registered versions and say where they are."""
        names = {role: registered_name(self.cfg, role) for role in versions}
        self.tracker.set_tags(
            {f"planact.registered.{role}": f"models:/{names[role]}/{v}" for role, v in versions.items()}
        )
        self.registered = {role: f"models:/{names[role]}/{v}" for role, v in versions.items()}

    @functools.cached_property
    def headline_keys(self) -> tuple[str, ...]:
        """The environment's headline held-out metrics (it names its own: planact.envs.base.headline_keys)."""
        return headline_keys(self.cfg.env.kind)

    def summary(self) -> dict:
        """Warm start vs final held-out metrics, and their differences."""
        if not self.evals:
            return {}
        first, last = self.evals[min(self.evals)], self.evals[max(self.evals)]
        out = {"rounds_completed": self.state.data["last_completed_round"]}
        for key in self.headline_keys:
            if key in first and key in last:
                out[f"warm_start/{key}"] = first[key]
                out[f"final/{key}"] = last[key]
                out[f"delta/{key}"] = last[key] - first[key]
        return out

    def finish(self, log_checkpoint: bool = True) -> dict:
        """Log the summary, sample rollouts and final checkpoints; mark the MLflow run finished."""
        summary = self.summary()
        if summary:
            self.tracker.log_metrics({f"summary/{k}": v for k, v in summary.items()}, step=self.cfg.rounds)
        self.tracker.log_table(self.rollouts, "rollouts.json")
        if log_checkpoint and self.state.data["checkpoint"]:
            self.tracker.log_artifact(self.state.data["checkpoint"], "final_checkpoint")
        atomic_write(self.run_dir / "summary.json", json.dumps(summary, indent=1))
        self.tracker.finish("FINISHED")
        self.close()
        return summary

    def abort(self) -> None:
        """Mark the MLflow run failed (a re-run resumes it) and release Ray."""
        try:
            self.tracker.finish("FAILED")
        finally:
            self.close()

    def close(self) -> None:
        """Free the run's agents on a shared cluster; disconnect from Ray if this session started it."""
        self._beating.set()
        thaw_heap()
        if self.owns_ray and ray.is_initialized():
            ray.shutdown()  # a private Ray takes its agents with it
            self.owns_ray = False
        elif self.role_groups and ray.is_initialized():
            # On a shared cluster the supervisor would keep them alive. (A killed driver leaves them
            # running on purpose: the re-run re-attaches to them and restores the checkpoint.)
            agents.delete_role_groups(self.cfg, self.role_groups)
            self.role_groups = []

    def markdown(self) -> str:
        """Round table and MLflow link for the Prefect artifact."""
        rows = self.state.data["table"][-50:]
        head = "| round | " + " | ".join(TABLE_KEYS) + " |\n|" + "---|" * (len(TABLE_KEYS) + 1) + "\n"
        body = "".join(
            "| {} | ".format(r["round"]) + " | ".join(_fmt(r.get(k)) for k in TABLE_KEYS) + " |\n" for r in rows
        )
        keys = [k for k in self.headline_keys if any(k in m for m in self.evals.values())]
        evals = "".join(
            f"| {r} | " + " | ".join(_fmt(m.get(k)) for k in keys) + " |\n" for r, m in sorted(self.evals.items())
        )
        return (
            f"# planact run `{self.cfg.run_name}` ({self.cfg.agent_role})\n\n"
            f"MLflow run: {self.tracker.run_url()}\n\n## Rounds\n\n{head}{body}\n"
            f"## Held-out evaluation (sampling temperature {self.cfg.actor.sampling.temperature})\n\n"
            f"| round | {' | '.join(keys)} |\n|---|{'---|' * len(keys)}\n{evals}"
        )

    def progress_line(self, round_idx: int) -> str:
        """One human line about the latest round: a progress bar, its figures, the last held-out headline, ETA."""
        m = self.pending[-1][1] if self.pending else (self.state.data["table"][-1] if self.state.data["table"] else {})
        total = max(self.cfg.rounds, 1)
        if m.get("time/round_s") is not None:
            self._round_s.append(float(m["time/round_s"]))
        eta = (total - round_idx) * sum(self._round_s) / len(self._round_s) if self._round_s else None
        held = ""
        if self.evals:
            last = max(self.evals)
            key = next((k for k in self.headline_keys if k in self.evals[last]), None)
            held = f" | held-out {key} {_fmt(self.evals[last][key])} (round {last})" if key else ""
        return (
            f"{bar(round_idx, total)} round {round_idx}/{self.cfg.rounds}: "
            f"success {_fmt(m.get('success'))} planner reward {_fmt(m.get('planner/reward_mean'))} "
            f"actor reward {_fmt(m.get('actor/reward_mean'))} ({_fmt(m.get('time/round_s'))} s){held}" + eta_text(eta)
        )


def _fmt(v) -> str:
    return "-" if v is None else (f"{v:.3f}" if isinstance(v, float) else str(v))
