"""One training run from start to finish, in plain Python: the controller the training flow is a shell over.

    RunController(cfg, stages).run()
      agents: each role's engines and trainer (created, or found again on a resume)
      fresh run: warm start -> checkpoint 0 -> baseline held-out evaluation      | resume: restore the checkpoint
      for round r: stages.rounds(...).play(r) yields every round it finishes -> finish(round):
          record its metrics -> checkpoint every k rounds -> held-out evaluation every few -> progress line
          -> the AFlow search around the checkpoint when due
      register the trained roles (MLflow Model Registry) -> publish the run's table -> summary, MLflow run finished

The controller decides *what* a run does and in which order; `planact.session.TrainingSession` remembers
*where the run is* (Ray, agents, resume, checkpoints, MLflow); a `Stages` object decides *how* each step
executes: as named Prefect task runs on Ray (flows/stages.py `TaskRunStages`, the training flow) or as plain
calls in this process (`PlainStages`: tests, benchmarks, notebooks). No Prefect import here.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

from planact.agents import RoleGroup
from planact.config import RunConfig
from planact.experience import PoolRef
from planact.progress import ProgressDisplay, ProgressFn
from planact.session import TrainingSession


class RoundDriver(Protocol):
    """Plays a run's rounds (synchronous or pipelined); each finished round comes back as a result dict."""

    def play(self, round_idx: int) -> Iterator[dict]:
        """Generate round `round_idx`; yield every round this finishes."""

    def drain(self) -> Iterator[dict]:
        """Finish the round still in training, if any."""


class Stages(Protocol):
    """How a run's steps execute; every method does one step and returns its result."""

    preload: tuple[str, ...]
    """Modules the Ray task workers import while the agents load (empty when no stage runs on a Ray worker)."""

    def agents_progress(self) -> ProgressFn | None:
        """Where the agents' loading is reported."""

    def warm_start(self, groups: list[RoleGroup], seed: int, progress_files: dict[str, str]) -> dict[str, list]:
        """Supervised warm start of every role in `groups` at once; each role's loss curve."""

    def checkpoint(self, round_idx: int, groups: list[RoleGroup], folder: str, versions: dict[str, int]) -> str:
        """Save the trained roles into `folder`; returns it."""

    def evaluate(self, round_idx: int, planner: RoleGroup, actor: RoleGroup) -> dict:
        """The environment's held-out metrics."""

    def rounds(
        self, planner: RoleGroup | None, actor: RoleGroup | None, pool: PoolRef, incarnation: str
    ) -> RoundDriver:
        """The driver of this run's rounds."""

    def optimise_workflow(self, search_config, parent_run_id: str) -> dict:
        """An AFlow search around a checkpoint (its MLflow run nested under `parent_run_id`)."""

    def register(self, tracking_uri: str, run_id: str, folder: str, round_idx: int, heldout: dict, roles: list[str]):
        """Register the trained roles of the final checkpoint; each role's model version."""

    def publish(self, markdown: str, key: str) -> None:
        """Show the run's round table where its users look (the flow run's artifact, or a file)."""


class RunController:
    """Drives one run (or resumes it) through its rounds; `run()` returns the summary."""

    def __init__(
        self, cfg: RunConfig, stages: Stages, tags: dict[str, str] | None = None, env_vars: dict[str, str] | None = None
    ):
        self.cfg, self.stages = cfg, stages
        self.session = TrainingSession(cfg, tags=tags, env_vars=env_vars)

    def run(self) -> dict:
        """The whole run: agents, warm start or resume, every round, registration; the MLflow run's summary."""
        session = self.session
        try:
            self.planner, self.actor = session.ensure_agents(self.stages.preload, self.stages.agents_progress())
            self.trained = [g for g in session.groups(self.planner, self.actor) if g.trainer is not None]
            if session.needs_warm_start:
                self.start()
            else:
                print(f"resuming run {self.cfg.run_name!r} after round {session.restore(self.planner, self.actor)}")
            self.progress = ProgressDisplay(self.cfg.rounds)
            self.first_round = session.state.next_round
            rounds = self.stages.rounds(self.planner, self.actor, session.experience, session.incarnation)
            for r in range(self.first_round, self.cfg.rounds + 1):
                for out in rounds.play(r):  # pipelined: round r's generation finishes round r-1
                    self.finish_round(out)
            for out in rounds.drain():  # pipelined: the last round's training
                self.finish_round(out)
            if self.cfg.tracking.register_models and self.trained:
                versions = self.stages.register(
                    session.tracker.uri, session.tracker.run_id, *session.final_checkpoint(), self.roles_trained()
                )
                session.record_registered(versions)
            self.stages.publish(session.markdown(), f"planact-{self.cfg.run_name}-{self.cfg.agent_role}")
            self.progress.clear()
            return session.finish()
        except BaseException:
            session.abort()
            raise

    def roles_trained(self) -> list[str]:
        """The roles this run trains (a frozen role keeps its initial weights)."""
        return [g.role for g in self.trained]

    def start(self) -> None:
        """A fresh run: the warm start, checkpoint 0, and the baseline held-out evaluation."""
        session = self.session
        warmed = [g for g in self.trained if getattr(self.cfg, g.role).warm_start.enabled]
        # The trainer writes its phases' progress there; the stage shows it (console, Prefect artifact).
        files = {g.role: str(session.run_dir / "progress" / f"warm-start-{g.role}.json") for g in warmed}
        session.record_warm_start(self.stages.warm_start(warmed, self.cfg.seed, files) if warmed else {})
        self.save(0)
        if self.planner is not None and self.actor is not None:
            session.log_eval(0, self.stages.evaluate(0, self.planner, self.actor))

    def save(self, round_idx: int) -> None:
        """Checkpoint the trained roles after `round_idx` and mark the rounds up to it completed."""
        folder = self.session.checkpoint_folder(round_idx)
        self.session.commit(
            round_idx, self.stages.checkpoint(round_idx, self.trained, folder, self.session.weight_versions)
        )

    def finish_round(self, out: dict) -> None:
        """A round whose training is done: record, checkpoint, evaluate, show, and search workflows when due."""
        session, r = self.session, out["round"]
        session.record_round(r, out)
        if session.checkpoint_due(r):
            self.save(r)
        evaluated = session.eval_due(r) and self.planner is not None and self.actor is not None
        if evaluated:
            session.log_eval(r, self.stages.evaluate(r, self.planner, self.actor))
        line = session.progress_line(r)
        self.progress.show(line)
        if self.progress.due(r, evaluated, first=r == self.first_round):
            print(line)  # kept: in the console's scrollback and the flow run's logs in the UI
        if self.cfg.aflow.due(r):
            self.optimise_workflow(r)

    def optimise_workflow(self, round_idx: int) -> dict:
        """The AFlow search around this round's checkpoint; its figures logged at this round's step."""
        session = self.session
        search = self.cfg.aflow.search_config(
            self.cfg, round_idx, session.checkpoint_folder(round_idx), session.run_dir / "aflow", session.tracker.uri
        )
        out = self.stages.optimise_workflow(search, session.tracker.run_id)
        session.tracker.log_metrics(
            {"aflow/best_validation": out["best_validation"], "aflow/test_score": out["test_score"]}, step=round_idx
        )
        return out
