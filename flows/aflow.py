"""AFlow with RL as Prefect flows: one flow per optimisation, one sub-flow per search round.

    aflow_optimize(config)                          flow; one MLflow run (nested when a parent run is given)
      prepare_executor -> bootstrap round 1 (the initial workflow)
      for round r:  aflow_round(r)                  sub-flow on RayTaskRunner
        select -> expand -> validate -> evaluate (shards x repeats, fanned out) -> record
        -> experience (one task) -> train_policy -> convergence
      test_best -> artifacts (round folders, best workflow, search tree) -> markdown

Run it: python -m flows.aflow --config configs/aflow-demo.yaml --set search.max_rounds=10
"""

from __future__ import annotations

import json
import time
from collections import defaultdict

# Only names imported from packages may appear in aflow_round: Prefect loads this file as a bare module
# ('aflow') that Ray workers cannot import, and cloudpickle sends module-level helpers by reference.
from prefect import flow
from prefect.runtime import flow_run
from prefect.settings import temporary_settings
from prefect.task_runners import ThreadPoolTaskRunner
from prefect_ray import RayTaskRunner
from prefect_ray.context import remote_options

from aflow_rl import tree
from aflow_rl.config import AFlowConfig, check_aflow_runtime, load_aflow_config, validate_aflow_config
from aflow_rl.executor import with_local_models
from aflow_rl.optimizers import accepted
from aflow_rl.policy import episodes_from_items
from aflow_rl.search import Search
from flows import command, runtime
from planact.experience import PoolRef, pool_actor
from planact.ray_setup import connect_ray
from planact.storage import atomic_write
from planact.tracking import Tracker, tracking_uri
from tasks.aflow import (
    convergence_check,
    evaluate_shard,
    expand,
    expansion_items,
    prepare_executor,
    record_round,
    select_parent,
    test_best,
    train_policy,
    validate_candidate,
)
from tasks.experience import record_experience
from tasks.plan_act import Payload

DEMO = AFlowConfig()


@flow(name="aflow-round", log_prints=True)
def aflow_round(cfg: AFlowConfig, round_idx: int, salt: int, pool: PoolRef) -> dict:
    """One search round; returns {'status': evaluated | refused | exhausted, ...figures}."""
    t0 = time.perf_counter()
    search = Search(cfg)
    meta = {}
    if round_idx > 1:
        pending = search.pending_candidate(round_idx)  # interrupted mid-evaluation: evaluate it as written
        if pending is None:
            exclude: list[int] = []
            cand = None
            while (pick := select_parent(cfg, round_idx, exclude, salt)) is not None:
                cand = expand(cfg, round_idx, pick["parent"], pick["score"], salt)
                if accepted(cand):
                    break
                exclude.append(pick["parent"])
            if cand is None:
                return {"status": "exhausted"}
            errors = validate_candidate(cfg, round_idx, cand)
            if errors:
                print(f"round {round_idx}: optimizer output refused: {'; '.join(errors)[:300]}")
                return {"status": "refused", "errors": errors}
        meta = search.ws.meta(round_idx)

    # Evaluation fans out: shards x repeats, each a Ray task holding a whole CPU (the executor is compute-bound).
    with remote_options(num_cpus=1):
        futures = [
            (rep, evaluate_shard.submit(cfg, round_idx, shard, rep))
            for rep in range(cfg.search.validation_repeats)
            for shard in range(cfg.shards)
        ]
        by_repeat: dict[int, list[dict]] = defaultdict(list)
        for rep, fut in futures:
            by_repeat[rep].append(fut.result())
    out = record_round(cfg, round_idx, [by_repeat[k] for k in sorted(by_repeat)], time.perf_counter() - t0)

    items = expansion_items(cfg, round_idx, out, meta)
    if items:
        record_experience(pool, Payload(items))
    if round_idx > 1 and cfg.policy.enabled:
        # Other runs' expansions on this benchmark (the shared pool) are more GiGPO episodes in the group.
        steps, returns = episodes_from_items(
            pool.query(role="aflow", benchmark=cfg.benchmark), cfg.benchmark, exclude_run=cfg.run_name
        )
        out.update(train_policy(cfg, steps, returns))
    out["converged"] = convergence_check(cfg)
    out["status"] = "evaluated"
    out["time_s"] = time.perf_counter() - t0
    return out


@flow(name="aflow-optimize", log_prints=True)
def aflow_optimize(config: AFlowConfig = DEMO, parent_run_id: str | None = None) -> dict:
    """Search workflows with AFlow's MCTS (guided by a GiGPO policy unless disabled); re-running a run name continues
    it."""
    cfg = validate_aflow_config(config)
    runtime.load_api_secrets(cfg)
    check_aflow_runtime(cfg)
    if cfg.executor.kind == "planact":  # registered models -> local folders, before any worker needs them
        cfg = cfg.model_copy(update={"executor": with_local_models(cfg.executor, tracking_uri(cfg))})
    owns_ray = connect_ray(cfg, runtime.worker_env(), namespace="planact")
    run_dir = cfg.run_dir()
    run_dir.mkdir(parents=True, exist_ok=True)
    state_path = run_dir / "aflow_state.json"
    state = json.loads(state_path.read_text()) if state_path.is_file() else {}
    tracker = Tracker(
        cfg,
        state.get("mlflow_run_id"),
        parent_run_id=parent_run_id,
        tags={
            "prefect.flow_run_id": str(flow_run.get_id()),
            "prefect.flow_run_name": str(flow_run.get_name()),
            "workload": "aflow",
            "benchmark": cfg.benchmark,
            "policy": str(cfg.policy.enabled),
        },
    )
    atomic_write(state_path, json.dumps({"mlflow_run_id": tracker.run_id}))
    pool = PoolRef(run_dir.parent / "aflow-experience", f"aflow-experience:{run_dir.parent.name}", "planact")
    _keep = pool_actor(pool.path, pool.name, pool.namespace)  # noqa: F841  owned by this flow run
    with runtime.tracked(tracker, owns_ray):
        print(f"executor: {prepare_executor(cfg)}")
        search = Search(cfg)
        r = search.bootstrap()
        if r > 1:
            print(f"continuing {search.ws.root} after round {r - 1}")
        runner = (
            RayTaskRunner(address=cfg.ray.address)
            if cfg.task_runner == "ray"
            else ThreadPoolTaskRunner(max_workers=cfg.shards * cfg.search.validation_repeats)
        )
        round_flow = aflow_round.with_options(task_runner=runner)
        refusals, rows = 0, []
        while r <= cfg.search.max_rounds and refusals <= cfg.search.max_rounds:
            # The parent flow's heartbeat covers its rounds; a per-round heartbeat thread adds ~1 s at exit.
            with temporary_settings(updates={"flows.heartbeat_frequency": None}):
                out = round_flow(cfg, r, refusals, pool)
            if out["status"] == "exhausted":
                print(f"round {r}: every candidate parent has been fully expanded; stopping")
                break
            if out["status"] == "refused":
                refusals += 1
                tracker.log_metrics({"optimizer/refused": float(refusals)}, step=r)
                continue
            metrics = {
                k: out[k] for k in ("score", "std", "total_cost", "best", "acceptance_rate", "errors", "parse_failures")
            }
            metrics.update({k: v for k, v in out.items() if k.startswith("policy/")})
            metrics["round_time_s"] = out["time_s"]
            tracker.log_metrics(metrics, step=r)
            rows.append(out)
            print(
                f"round {r}: score {out['score']:.3f} ±{out['std']:.3f}  best {out['best']:.3f}  "
                f"({out['time_s']:.1f} s)  {out.get('modification', '')}"
            )
            if out["converged"]:
                print(f"converged: top-{cfg.search.top_k} average unchanged for {cfg.search.patience} rounds")
                break
            r = Search(cfg).next_round()
        final = test_best(cfg)
        tracker.log_metrics(
            {
                "best_validation": final["best_validation"],
                "test_score": final["test_score"],
                "best_round": float(final["best_round"]),
            },
            step=cfg.search.max_rounds,
        )
        summary = {
            **final,
            **_log_artifacts(cfg, tracker, final["best_round"]),
            "round_1": Search(cfg).ws.scores().get(1),
            "mlflow_run_id": tracker.run_id,
            "mlflow_url": tracker.run_url(),
            "workspace": str(cfg.workspace_dir()),
        }
        runtime.publish_markdown(_markdown(cfg, tracker, final), f"aflow-{cfg.run_name}")
        tracker.finish("FINISHED")
        return summary


def _log_artifacts(cfg: AFlowConfig, tracker: Tracker, best_round: int) -> dict:
    ws = Search(cfg).ws
    png = tree.draw(ws, cfg.run_dir() / "search_tree.png", best=best_round)
    dot = cfg.run_dir() / "search_tree.dot"
    atomic_write(dot, tree.to_dot(ws))
    for path, where in ((png, None), (dot, None), (ws.round_dir(best_round), "best_workflow"), (ws.root, "workflows")):
        tracker.log_artifact(path, where)
    return {"tree_png": str(png), "best_workflow": str(ws.round_dir(best_round))}


def _markdown(cfg: AFlowConfig, tracker: Tracker, final: dict) -> str:
    ws = Search(cfg).ws
    lines = [
        f"# AFlow run `{cfg.run_name}` ({cfg.benchmark})",
        "",
        f"MLflow: {tracker.run_url()}",
        "",
        f"Best round {final['best_round']}: validation {final['best_validation']:.3f}, test {final['test_score']:.3f}",
        "",
        "| round | parent | score | modification |",
        "|---|---|---|---|",
    ]
    for r, s in ws.scores().items():
        m = ws.meta(r)
        lines.append(f"| {r} | {m.get('parent') or ''} | {s:.3f} | {m.get('modification', '')} |")
    return "\n".join(lines)


def print_aflow_summary(run_name: str, summary: dict, seconds: float) -> None:
    """Final lines: round 1 vs best validation score, test score of the best workflow, where things are."""
    print(
        f"aflow run '{run_name}' finished in {seconds:.0f} s: round 1 {summary['round_1']:.3f} -> best "
        f"(round {summary['best_round']}) {summary['best_validation']:.3f} on validation; "
        f"held-out test {summary['test_score']:.3f}"
    )
    for k in ("best_workflow", "tree_png", "workspace", "mlflow_run_id", "mlflow_url"):
        print(f"{k}: {summary[k]}")


def main(argv: list[str] | None = None) -> int:
    """Console entry point: validate the config, then run the search flow."""
    return command.cli(
        argv,
        aflow_optimize,
        load=load_aflow_config,
        check=check_aflow_runtime,
        default_config="configs/aflow-demo.yaml",
        summary=print_aflow_summary,
    )


if __name__ == "__main__":
    raise SystemExit(main())
