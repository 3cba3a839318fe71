"""Plan/Act training as one Prefect flow run per run; each round's stages are named task runs in it.

    plan_act_training(config)                     flow on the session's Ray (SessionRayTaskRunner); one MLflow run
      ensure agents -> resume or warm start -> baseline eval
      for round r:  Rounds.play(r)                 task runs round-<r>/<stage> (flows/rounds.py)
        planner-generate -> barrier -> actor-execute-<i> (fan-out)
        -> score -> experience -> train-planner / train-actor   (pipelined: overlapping round r+1's generation)
      log + checkpoint every k rounds; held-out eval every few rounds; the progress display
      register the trained roles in the MLflow Model Registry -> finish

Run it: python -m flows.plan_act --config configs/demo.yaml --set rounds=4
"""

from __future__ import annotations

from prefect import flow
from prefect.runtime import flow_run
from prefect_ray.context import remote_options

from flows import command, runtime
from flows.rounds import Rounds, named
from planact.config import RunConfig, validate_config
from planact.preflight import check_runtime
from planact.progress import ProgressDisplay
from planact.resume import check_resume
from planact.session import TrainingSession
from tasks.plan_act import checkpoint, evaluate_heldout, register_models, warm_start
from tasks.progress import task_progress


def optimise_workflow(cfg: RunConfig, round_idx: int, session: TrainingSession) -> dict:
    """The aflow-optimize sub-flow around this round's checkpoint; its MLflow run nests under this run's."""
    from flows.aflow import aflow_optimize

    acfg = cfg.aflow.search_config(
        cfg, round_idx, session.checkpoint_folder(round_idx), session.run_dir / "aflow", session.tracker.uri
    )
    out = aflow_optimize(acfg, parent_run_id=session.tracker.run_id)
    session.tracker.log_metrics(
        {"aflow/best_validation": out["best_validation"], "aflow/test_score": out["test_score"]}, step=round_idx
    )
    return out


@flow(name="plan-act-training", log_prints=True, task_runner=runtime.SessionRayTaskRunner())
def plan_act_training(config: RunConfig = runtime.DEMO) -> dict:
    """Train the planner and the actor with RL for `config.rounds` rounds; re-running a run name resumes it."""
    cfg = validate_config(config)
    runtime.load_api_secrets(cfg)
    check_runtime(cfg)
    session = TrainingSession(
        cfg,
        env_vars=runtime.worker_env(),
        tags={
            "prefect.flow_run_id": str(flow_run.get_id()),
            "prefect.flow_run_name": str(flow_run.get_name()),
            "agent_role": cfg.agent_role,
        },
    )
    try:
        planner, actor = session.ensure_agents(preload=("tasks.plan_act",), progress=task_progress("agents"))
        groups = session.groups(planner, actor)
        trained = [g for g in groups if g.trainer is not None]

        if session.needs_warm_start:
            with remote_options(num_cpus=cfg.ray.task_num_cpus):  # both roles at once
                # The trainer writes its phases' progress there; the task shows it (console, Prefect artifact).
                progress_file = {
                    g.role: str(session.run_dir / "progress" / f"warm-start-{g.role}.json") for g in trained
                }
                curves = {
                    g.role: runtime.agent_stage(named(warm_start, 0, f"warm-start-{g.role}"), cfg).submit(
                        g, cfg.seed, progress_file[g.role]
                    )
                    for g in trained
                    if getattr(cfg, g.role).warm_start.enabled
                }
                session.record_warm_start({role: f.result() for role, f in curves.items()})
            session.commit(
                0, named(checkpoint, 0, "checkpoint")(trained, session.checkpoint_folder(0), session.weight_versions)
            )
            if planner is not None and actor is not None:
                session.log_eval(0, named(evaluate_heldout, 0, "evaluate")(cfg, planner, actor))
        else:
            print(f"resuming run {cfg.run_name!r} after round {session.restore(planner, actor)}")

        progress = ProgressDisplay(cfg.rounds)
        first_round = session.state.next_round

        def finish(out: dict) -> None:  # a round whose training is done: log, checkpoint, evaluate, show
            r = out["round"]
            session.record_round(r, out)
            if session.checkpoint_due(r):
                session.commit(
                    r,
                    named(checkpoint, r, "checkpoint")(trained, session.checkpoint_folder(r), session.weight_versions),
                )
            evaluated = session.eval_due(r) and planner is not None and actor is not None
            if evaluated:
                session.log_eval(r, named(evaluate_heldout, r, "evaluate")(cfg, planner, actor))
            line = session.progress_line(r)
            progress.show(line)
            if progress.due(r, evaluated, first=r == first_round):
                print(line)  # kept: in the console's scrollback and the flow run's logs in the UI
            if cfg.aflow.due(r):
                optimise_workflow(cfg, r, session)

        rounds = Rounds(cfg, planner, actor, session.experience, session.incarnation)
        for r in range(session.state.next_round, cfg.rounds + 1):
            for out in rounds.play(r):  # pipelined: round r's generation finishes round r-1
                finish(out)
        for out in rounds.drain():  # pipelined: the last round's training
            finish(out)

        if cfg.tracking.register_models and trained:
            session.record_registered(
                register_models(
                    cfg,
                    session.tracker.uri,
                    session.tracker.run_id,
                    *session.final_checkpoint(),
                    [g.role for g in trained],
                )
            )
        runtime.publish_markdown(session.markdown(), f"planact-{cfg.run_name}-{cfg.agent_role}")
        progress.clear()
        summary = session.finish()
        return {
            **summary,
            "prefect_flow_run": runtime.flow_run_url(flow_run.get_id()),
            "mlflow_run_id": session.tracker.run_id,
            "mlflow_url": session.tracker.run_url(),
            "run_dir": str(session.run_dir),
            "registered": session.registered,
        }
    except BaseException:
        session.abort()
        raise


def main(argv: list[str] | None = None) -> int:
    """Console entry point: validate the config, then run the training flow with a progress display."""
    return command.cli(argv, plan_act_training, check=_check)


def _check(cfg: RunConfig) -> None:
    # A resume that would change the checkpoint's meaning is refused here, before Prefect or Ray start.
    check_runtime(cfg)
    check_resume(cfg.run_dir(), cfg.model_dump())


if __name__ == "__main__":
    raise SystemExit(main())
