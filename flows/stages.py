"""How a training run's steps execute (planact.controller.Stages): named task runs of the training flow, or
plain calls in this process.

    TaskRunStages  warm-start-<role> (both roles at once), checkpoint, evaluate, round-<r>/<stage>...,
                   register-models: task runs of the calling flow on the session's Ray; the AFlow search is
                   a sub-flow; the round table is the flow run's markdown artifact
    PlainStages    the same tasks' own functions called here (the fan-outs on threads), the same agents,
                   seeds and order: a run without a flow run (tests, benchmarks, notebooks); the round table
                   is written to the run's folder
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from prefect_ray.context import remote_options

from flows import runtime
from flows.rounds import Rounds, named
from planact.agents import RoleGroup
from planact.config import RunConfig
from planact.experience import PoolRef
from planact.progress import ProgressFn
from planact.storage import atomic_write
from tasks.plan_act import checkpoint, evaluate_heldout, register_models, warm_start
from tasks.progress import task_progress


class TaskRunStages:
    """Each step a task run named after its round and stage (`round-<r>/<stage>`) in the calling flow run."""

    preload = ("tasks.plan_act",)  # what a round's Ray task workers import while the agents load

    def __init__(self, cfg: RunConfig):
        self.cfg = cfg

    def agents_progress(self) -> ProgressFn | None:
        """The agents' loading as the `agents` task progress (console line and artifact)."""
        return task_progress("agents")

    def warm_start(self, groups: list[RoleGroup], seed: int, progress_files: dict[str, str]) -> dict[str, list]:
        """One `warm-start-<role>` task run per role, both at once."""
        with remote_options(num_cpus=self.cfg.ray.task_num_cpus):
            futures = {
                g.role: runtime.agent_stage(named(warm_start, 0, f"warm-start-{g.role}"), self.cfg).submit(
                    self.cfg, g, seed, progress_files[g.role]
                )
                for g in groups
            }
            return {role: f.result() for role, f in futures.items()}

    def checkpoint(self, round_idx: int, groups: list[RoleGroup], folder: str, versions: dict[str, int]) -> str:
        """The `round-<r>/checkpoint` task run."""
        return named(checkpoint, round_idx, "checkpoint")(groups, folder, versions)

    def evaluate(self, round_idx: int, planner: RoleGroup, actor: RoleGroup) -> dict:
        """The `round-<r>/evaluate` task run."""
        return named(evaluate_heldout, round_idx, "evaluate")(self.cfg, planner, actor)

    def rounds(self, planner: RoleGroup | None, actor: RoleGroup | None, pool: PoolRef, incarnation: str) -> Rounds:
        """Rounds whose stages are task runs (flows/rounds.py)."""
        return Rounds(self.cfg, planner, actor, pool, incarnation)

    def optimise_workflow(self, search_config, parent_run_id: str) -> dict:
        """The aflow-optimize flow (a sub-flow here, its MLflow run nested under the training run's)."""
        from flows.aflow import aflow_optimize

        return aflow_optimize(search_config, parent_run_id=parent_run_id)

    def register(self, tracking_uri: str, run_id: str, folder: str, round_idx: int, heldout: dict, roles: list[str]):
        """The `register-models` task run."""
        return register_models(self.cfg, tracking_uri, run_id, folder, round_idx, heldout, roles)

    def publish(self, markdown: str, key: str) -> None:
        """The flow run's markdown artifact."""
        runtime.publish_markdown(markdown, key)


class PlainStages(TaskRunStages):
    """The same steps as plain calls in this process: no flow run, no task runs, the same results."""

    preload = ()  # no stage runs on a Ray task worker

    def agents_progress(self) -> ProgressFn | None:
        """No task to report to: the agents load quietly."""
        return None

    def warm_start(self, groups: list[RoleGroup], seed: int, progress_files: dict[str, str]) -> dict[str, list]:
        """Every role's warm start at once, on threads of this process."""
        with ThreadPoolExecutor(max(1, len(groups))) as pool:
            futures = {g.role: pool.submit(warm_start.fn, self.cfg, g, seed, progress_files[g.role]) for g in groups}
            return {role: f.result() for role, f in futures.items()}

    def checkpoint(self, round_idx: int, groups: list[RoleGroup], folder: str, versions: dict[str, int]) -> str:
        """Save here."""
        return checkpoint.fn(groups, folder, versions)

    def evaluate(self, round_idx: int, planner: RoleGroup, actor: RoleGroup) -> dict:
        """Evaluate here."""
        return evaluate_heldout.fn(self.cfg, planner, actor)

    def rounds(self, planner: RoleGroup | None, actor: RoleGroup | None, pool: PoolRef, incarnation: str) -> Rounds:
        """Rounds of plain stages (`Round.plain`)."""
        return Rounds(self.cfg, planner, actor, pool, incarnation, plain=True)

    def register(self, tracking_uri: str, run_id: str, folder: str, round_idx: int, heldout: dict, roles: list[str]):
        """Register here."""
        return register_models.fn(self.cfg, tracking_uri, run_id, folder, round_idx, heldout, roles)

    def publish(self, markdown: str, key: str) -> None:
        """The round table as `<key>.md` in the run's folder (there is no flow run to attach it to)."""
        atomic_write(self.cfg.run_dir() / f"{key}.md", markdown)
