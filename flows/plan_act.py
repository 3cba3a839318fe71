"""Plan/Act training as one Prefect flow run per run; each round's stages are named task runs in it.

    plan_act_training(config)                     flow on the session's Ray (SessionRayTaskRunner); one MLflow run
      ensure agents -> resume or warm start -> baseline eval
      for round r:  Rounds.play(r)                 task runs round-<r>/<stage> (flows/rounds.py)
        planner-generate -> barrier -> actor-execute-<i> (fan-out)
        -> score -> experience -> train-planner / train-actor   (pipelined: overlapping round r+1's generation)
      log + checkpoint every k rounds; held-out eval every few rounds; the progress display
      register the trained roles in the MLflow Model Registry -> finish

The run itself (that order, resume, checkpoints, tracking) is planact.controller.RunController, plain Python;
this flow hands it `TaskRunStages` (flows/stages.py), which makes each step a task run of this flow run.
The same run without Prefect: `RunController(cfg, PlainStages(cfg)).run()`.

Run it: python -m flows.plan_act --config configs/demo.yaml --set rounds=4
"""

from __future__ import annotations

from prefect import flow
from prefect.runtime import flow_run

from flows import command, runtime
from flows.stages import TaskRunStages
from planact.config import RunConfig, validate_config
from planact.controller import RunController
from planact.preflight import check_runtime
from planact.resume import check_resume


@flow(name="plan-act-training", log_prints=True, task_runner=runtime.SessionRayTaskRunner())
def plan_act_training(config: RunConfig = runtime.DEMO) -> dict:
    """Train the planner and the actor with RL for `config.rounds` rounds; re-running a run name resumes it."""
    cfg = validate_config(config)
    runtime.load_api_secrets(cfg)
    check_runtime(cfg)
    run = RunController(
        cfg,
        TaskRunStages(cfg),
        env_vars=runtime.worker_env(),
        tags={
            "prefect.flow_run_id": str(flow_run.get_id()),
            "prefect.flow_run_name": str(flow_run.get_name()),
            "agent_role": cfg.agent_role,
        },
    )
    summary = run.run()
    return {
        **summary,
        "prefect_flow_run": runtime.flow_run_url(flow_run.get_id()),
        "mlflow_run_id": run.session.tracker.run_id,
        "mlflow_url": run.session.tracker.run_url(),
        "run_dir": str(run.session.run_dir),
        "registered": run.session.registered,
    }


def main(argv: list[str] | None = None) -> int:
    """Console entry point: validate the config, then run the training flow with a progress display."""
    return command.cli(argv, plan_act_training, check=_check)


def _check(cfg: RunConfig) -> None:
    # A resume that would change the checkpoint's meaning is refused here, before Prefect or Ray start.
    check_runtime(cfg)
    check_resume(cfg.run_dir(), cfg.model_dump())


if __name__ == "__main__":
    raise SystemExit(main())
