"""Plan/Act training as Prefect flows: one flow per run, one sub-flow per round (README, "What the demo does and prints").

    plan_act_training(config)                     flow; one MLflow run
      ensure agents -> resume or warm start -> baseline eval
      for round r:  plan_act_round(r)             sub-flow on RayTaskRunner
        sample_tasks -> planner_generate -> barrier -> actor_execute (fan-out)
        -> score_rewards -> experience (one task) -> train_planner / train_actor
      log + checkpoint every k rounds; held-out eval every few rounds
      register the trained roles in the MLflow Model Registry -> finish

Run it: python -m flows.plan_act --config configs/demo.yaml --set rounds=4
"""

from __future__ import annotations

import time

from prefect import flow
from prefect.runtime import flow_run
from prefect.settings import temporary_settings
from prefect_ray import RayTaskRunner
from prefect_ray.context import remote_options

from flows import runtime
from planact import agents
from planact.config import RunConfig, check_runtime, validate_config
from planact.experience import PoolRef, experience_items
from planact.resume import check_resume
from planact.envs.base import make_env
from planact.session import TrainingSession
from planact.timing import Stopwatch
from tasks.experience import record_experience
from tasks.plan_act import (
    Payload,
    actor_execute,
    barrier,
    checkpoint,
    evaluate_heldout,
    planner_generate,
    register_models,
    sample_tasks,
    score_rewards,
    train_role,
    warm_start,
)


@flow(name="plan-act-round", log_prints=True)
def plan_act_round(cfg: RunConfig, round_idx: int, planner: agents.RoleGroup | None,
                   actor: agents.RoleGroup | None, pool: PoolRef, incarnation: str | None = None) -> dict:
    """One round: plans, barrier, fanned-out execution, scoring, experience, training of each local role.

    Round payloads (plans, answers, samples) travel wrapped in `Payload` so Prefect does not walk
    thousands of token lists looking for futures: that walk alone cost seconds per round.
    """
    role = cfg.agent_role
    timings: dict[str, float] = {}
    clock = Stopwatch(timings)

    with clock("sample"):
        batch = sample_tasks(cfg, round_idx)
    plans = None
    if planner is not None:
        with clock("planner_generate"):
            plans = planner_generate(cfg, planner, batch, round_idx).data
    with clock("barrier"):
        ready = barrier(cfg, round_idx, role, Payload(plans), "plans", incarnation).data
    fallback = ready["status"] == "fallback"
    metrics: dict[str, float] = {"barrier_wait_s": ready["wait_s"], "fallback": float(fallback)}

    if actor is None:  # two-job mode, planner side: wait for the actor's scored feedback, then train
        with clock("feedback"):
            fb = barrier(cfg, round_idx, role, None, "feedback", incarnation).data
        planner_samples = fb["payloads"].get("actor") if fb["status"] == "complete" else None
        metrics["fallback"] = float(planner_samples is None)
        result = {"planner_samples": planner_samples or [], "actor_samples": [], "metrics": {}, "rollouts": []}
    else:
        plans = None if fallback else ready["payloads"].get("planner")
        env = make_env(cfg)
        prompts = env.actor_requests(batch, plans)
        with clock("actor_execute"), remote_options(num_cpus=cfg.ray.task_num_cpus):
            shards = agents.shard(prompts, len(actor.engines))
            futures = [actor_execute.submit(cfg, actor, name, Payload(s), round_idx, i, env.actor_method)
                       for i, (name, s) in enumerate(zip(actor.engines, shards))]
            results = [f.result() for f in futures]
            answers = [a for res in results for a in res.data]
            workers = [res.where for res in results if res.where]
        with clock("score"):
            scored = score_rewards(cfg, batch, Payload(plans), Payload(answers)).data
        result = {"planner_samples": scored.planner_samples, "actor_samples": scored.actor_samples,
                  "metrics": scored.metrics, "rollouts": scored.rollouts, "workers": workers}
        if planner is None:  # two-job mode, actor side: hand the planner its credited samples
            with clock("feedback"):
                barrier(cfg, round_idx, role, Payload(scored.planner_samples), "feedback", incarnation)

    with clock("experience"):
        items = [it for r_name, key in (("planner", "planner_samples"), ("actor", "actor_samples"))
                 for it in experience_items(cfg.run_name, round_idx, r_name, result[key])]
        if items:
            metrics["experience/items"] = float(record_experience(pool, Payload(items))["items"])

    with clock("train"), remote_options(num_cpus=cfg.ray.task_num_cpus):
        futures = {}
        for group, key in ((planner, "planner_samples"), (actor, "actor_samples")):
            if group is not None and group.trainer is not None and result[key]:
                futures[group.role] = train_role.submit(group, Payload(result[key]), round_idx)
            elif group is not None and group.trainer is None:
                print(f"{group.role} is frozen (train: false): skipping its training this round")
        for r_name, fut in futures.items():
            metrics.update({f"{r_name}/{k}": v for k, v in fut.result().items()})

    metrics.update(result["metrics"])
    metrics.update({f"time/{k}_s": v for k, v in timings.items()})
    return {"metrics": metrics, "rollouts": result["rollouts"], "workers": result.get("workers", [])}


def optimise_workflow(cfg: RunConfig, round_idx: int, session: TrainingSession) -> dict:
    """The aflow-optimize sub-flow around this round's checkpoint; its MLflow run nests under this run's."""
    from aflow_rl.config import AFlowConfig
    from flows.aflow import aflow_optimize

    a = cfg.aflow
    acfg = AFlowConfig(
        run_name=f"{cfg.run_name}-aflow-r{round_idx}", root=str(session.run_dir / "aflow"), seed=cfg.seed,
        limit=a.limit, shards=a.shards, task_runner=a.task_runner, executor={"kind": "planact", "checkpoint": str(session.checkpoint_folder(round_idx))},
        search={"max_rounds": a.max_rounds, "validation_repeats": a.validation_repeats},
        policy={"enabled": a.policy}, ray=cfg.ray.model_dump(),
        tracking={"tracking_uri": session.tracker.uri, "experiment": cfg.tracking.experiment})
    out = aflow_optimize(acfg, parent_run_id=session.tracker.run_id)
    session.tracker.log_metrics({"aflow/best_validation": out["best_validation"], "aflow/test_score": out["test_score"]},
                               step=round_idx)
    return out


@flow(name="plan-act-training", log_prints=True)
def plan_act_training(config: RunConfig = runtime.DEMO) -> dict:
    """Train the planner and the actor with RL for `config.rounds` rounds; re-running a run name resumes it."""
    cfg = validate_config(config)
    runtime.load_api_secrets(cfg)
    check_runtime(cfg)
    session = TrainingSession(cfg, env_vars=runtime.worker_env(), tags={
        "prefect.flow_run_id": str(flow_run.get_id()), "prefect.flow_run_name": str(flow_run.get_name()),
        "agent_role": cfg.agent_role})
    try:
        planner, actor = session.ensure_agents(preload=("tasks.plan_act",))
        groups = session.groups(planner, actor)
        trained = [g for g in groups if g.trainer is not None]

        if session.needs_warm_start:
            curves = {g.role: warm_start.submit(g, cfg.seed) for g in trained if getattr(cfg, g.role).warm_start.enabled}
            session.record_warm_start({role: f.result() for role, f in curves.items()})
            session.commit(0, checkpoint(trained, session.checkpoint_folder(0)))
            if planner is not None and actor is not None:
                session.log_eval(0, evaluate_heldout(cfg, planner, actor))
        else:
            print(f"resuming run {cfg.run_name!r} after round {session.restore(planner, actor)}")

        round_flow = plan_act_round.with_options(task_runner=RayTaskRunner(address=cfg.ray.address))
        for r in range(session.state.next_round, cfg.rounds + 1):
            t0 = time.perf_counter()
            # The parent flow's heartbeat covers its rounds; a per-round heartbeat thread only adds ~1 s at exit.
            with temporary_settings(updates={"flows.heartbeat_frequency": None}):
                out = round_flow(cfg, r, planner, actor, session.experience, session.incarnation)
            out["metrics"]["time/round_s"] = time.perf_counter() - t0
            session.record_round(r, out)
            print(session.progress_line(r))
            if session.checkpoint_due(r):
                session.commit(r, checkpoint(trained, session.checkpoint_folder(r), session.weight_versions))
            if session.eval_due(r) and planner is not None and actor is not None:
                session.log_eval(r, evaluate_heldout(cfg, planner, actor))
            if cfg.aflow.every_rounds and r % cfg.aflow.every_rounds == 0:
                optimise_workflow(cfg, r, session)

        if cfg.tracking.register_models and trained:
            session.record_registered(register_models(cfg, session.tracker.uri, session.tracker.run_id,
                                                      *session.final_checkpoint(), [g.role for g in trained]))
        runtime.publish_markdown(session.markdown(), f"planact-{cfg.run_name}-{cfg.agent_role}")
        summary = session.finish()
        return {**summary, "prefect_flow_run": runtime.flow_run_url(flow_run.get_id()),
                "mlflow_run_id": session.tracker.run_id, "mlflow_url": session.tracker.run_url(),
                "run_dir": str(session.run_dir), "registered": session.registered}
    except BaseException:
        session.abort()
        raise


def main(argv: list[str] | None = None) -> int:
    """Console entry point: validate the config, then run the training flow with a progress display."""
    return runtime.cli(argv, plan_act_training, check=_check)


def _check(cfg: RunConfig) -> None:
    # A resume that would change the checkpoint's meaning is refused here, before Prefect or Ray start.
    check_runtime(cfg)
    check_resume(cfg.run_dir(), cfg.model_dump())


if __name__ == "__main__":
    raise SystemExit(main())
