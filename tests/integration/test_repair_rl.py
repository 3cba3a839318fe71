"""Plan/Act RL on code repair through the real round DAG (Prefect flow on Ray, MLflow, sandboxed tests).

The corpus is built from the two small built-in packages (tests/integration/repair_fixture.py: minitext for
training and its unseen functions, minilib as the unseen package). Until 2026-11-29 it was parse and
text-unidecode off the package index: 64 CPU-s to build and ~1 CPU-s per sandboxed suite run, against ~15 and
~0.4 here. Corpora of real packages (parse, semver) are built and revalidated in test_repair_cli.py.
"""

from __future__ import annotations

import json
import re
import runpy
import sys

import pytest
from mlflow.tracking import MlflowClient

from .conftest import REPO, kill_tree, read_state, run_cli, start_cli, token_env
from .repair_fixture import build_packages

SMOKE = str(REPO / "configs" / "repair-smoke.yaml")
# Held-out evaluation on 2 unseen functions and 1 unseen package (the smoke config's 3 and 2): every split,
# system and budget is still evaluated, with fewer sandboxed suite runs. Every test here uses it, so the
# sandbox's outcome cache of the first run's evaluations serves the later ones.
EVAL = ("env.repair.eval_unseen_functions=2", "env.repair.eval_unseen_packages=1")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """A token-level corpus from minitext (train) and minilib (held-out package)."""
    return build_packages(
        tmp_path_factory.mktemp("rl-corpus"),
        {"minitext": "train", "minilib": "heldout"},
        ["comparison", "boolop", "constant", "binop", "bound", "swap_args"],
        per_function=2,
        max_tried=24,
        max_kept=24,
    )


def _args(tmp_path, corpus, run, *extra):
    return [
        "--config",
        SMOKE,
        "--set",
        f"checkpoint.root={tmp_path}",
        "--set",
        f"run_name={run}",
        "--set",
        f"env.repair.corpus={corpus}",
        *(x for e in (*EVAL, *extra) for x in ("--set", e)),
    ]


@pytest.mark.slow
def test_repair_rounds_train_both_roles_log_per_round_and_resume_in_the_same_mlflow_run(prefect_api, corpus, tmp_path):
    rc, out = run_cli(_args(tmp_path, corpus, "rr", "rounds=1"), tmp_path / "first.log")
    assert rc == 0, out[-4000:]
    assert re.search(r"held-out solve rate \(unseen functions, budget 1\): warm start \d\.\d+ -> RL \d\.\d+", out)
    state = read_state(tmp_path / "rr")
    run_id = state["mlflow_run_id"]
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    metrics = client.get_run(run_id).data.metrics
    # per round and per role: sandbox work, planner localisation, both roles' rewards and losses
    for key in (
        "sandbox/test_runs",
        "sandbox/cache_hit_rate",
        "time/sandbox_s",
        "planner/target_correct",
        "planner/steps_per_episode",
        "planner/groups_with_choice",
        "actor/reward_mean",
        "planner/loss",
        "actor/loss",
        "actor/malformed",
    ):
        assert [x.step for x in client.get_metric_history(run_id, key)] == [1], key
    assert 1.0 <= metrics["planner/steps_per_episode"] <= 2.0  # one read turn, then the Repair plan
    # evaluation runs the whole suite only for edits whose FAIL_TO_PASS tests passed on their own
    # (the first evaluation, at the warm start: every outcome is cold there)
    full, runs = (
        client.get_metric_history(run_id, f"heldout/sandbox/eval_{k}_runs")[0].value for k in ("full", "test")
    )
    assert 0 < full < runs
    # held-out evaluation: the team and both baselines at budgets 1 and 2, on both splits
    for split in ("unseen_functions", "unseen_packages"):
        for system in ("team", "rule", "random"):
            assert (
                f"heldout/{split}/{system}/solve_at_1" in metrics and f"heldout/{split}/{system}/solve_at_2" in metrics
            )
            assert metrics[f"heldout/{split}/{system}/solve_at_1"] <= metrics[f"heldout/{split}/{system}/solve_at_2"]
    # the sandbox's outcome cache is shared by every run over the corpus
    assert (corpus / "results-cache.jsonl").stat().st_size > 0

    rc, out = run_cli(_args(tmp_path, corpus, "rr", "rounds=2"), tmp_path / "second.log")
    assert rc == 0, out[-4000:]
    assert "resuming run 'rr' after round 1" in out and "round 2/2" in out and "round 1/2" not in out
    assert read_state(tmp_path / "rr")["mlflow_run_id"] == run_id
    for key in ("actor/reward_mean", "planner/loss", "sandbox/test_runs"):
        assert sorted(x.step for x in client.get_metric_history(run_id, key)) == [1, 2], key


@pytest.mark.slow
def test_repair_two_job_mode_planner_and_actor_meet_at_the_orchestrator(prefect_api, corpus, ray_head, tmp_path):
    common = ("rounds=1", f"ray.address={ray_head}", "tracking.eval_every=5", "barrier.timeout_s=300")
    procs = {
        role: start_cli(
            _args(tmp_path, corpus, "rr2", f"agent_role={role}", *common), tmp_path / f"{role}.log", env=token_env()
        )
        for role in ("planner", "actor")
    }
    try:
        codes = {role: p.wait(timeout=600) for role, p in procs.items()}
    finally:
        for p in procs.values():
            kill_tree(p.pid)
    logs = {role: (tmp_path / f"{role}.log").read_text() for role in procs}
    for role in procs:
        assert codes[role] == 0, logs[role][-3000:]
        table = read_state(tmp_path / "rr2", role)["table"]
        assert [r["fallback"] for r in table] == [0.0], table  # the plans crossed; no fallback round
    actor_row = read_state(tmp_path / "rr2", "actor")["table"][0]
    planner_row = read_state(tmp_path / "rr2", "planner")["table"][0]
    assert actor_row["actor/loss"] is not None and planner_row["planner/loss"] is not None


def _benchmark(monkeypatch, capsys, *args: str) -> str:
    """benchmarks/repair_rl.py's main with these arguments, run in this process; its stdout.

    Not a process of its own: that would import torch and transformers again (~6 CPU-s each time) for the
    same work (the script trains and evaluates in the process that runs it)."""
    monkeypatch.chdir(REPO)  # its --tiny config path is relative
    monkeypatch.setattr(sys, "argv", ["repair_rl.py", *args])
    monkeypatch.setattr(sys, "path", list(sys.path))  # the script puts the repository first on it
    capsys.readouterr()
    runpy.run_path(str(REPO / "benchmarks" / "repair_rl.py"), run_name="__main__")
    return capsys.readouterr().out


@pytest.mark.slow
def test_repair_rl_benchmark_tiny_mode_compares_rl_sft_rule_and_random(corpus, tmp_path, monkeypatch, capsys):
    figures = str(tmp_path / "figures.json")
    sets = [x for e in (f"env.repair.corpus={corpus}", *EVAL) for x in ("--set", e)]
    out = _benchmark(monkeypatch, capsys, "--tiny", *sets, "--json", figures)
    assert "mean +- std over 1 seed(s), budget 1:" in out
    assert re.search(r"unseen_functions +warm [\d.]+ \+- [\d.]+ +RL .* rule .* random", out)
    assert re.search(r"RL - warm [+-]\d+\.\d points, RL - SFT [+-]\d+\.\d, RL - rule [+-]\d+\.\d", out)
    assert "SFT continuation" in out and "steps in the same time" in out
    # seeds run as separate processes are compared from their --json files
    merged = _benchmark(monkeypatch, capsys, "--merge", figures, figures)
    assert "mean +- std over 2 seed(s), budget 1:" in merged and "RL - SFT" in merged


@pytest.mark.slow
def test_repair_rl_benchmark_no_teacher_trains_the_planner_alone(corpus, tmp_path, monkeypatch, capsys):
    """--no-teacher: no warm start, no SFT arm; the planner trains on the reward, the patch model stays fixed,
    and the report gives localisation and solve rate zero-shot vs after RL, per seed."""
    figures = tmp_path / "figures.json"
    sets = [x for e in (f"env.repair.corpus={corpus}", *EVAL) for x in ("--set", e)]
    out = _benchmark(monkeypatch, capsys, "--tiny", "--no-teacher", *sets, "--json", str(figures))
    assert "RL with no teacher, 1 seed(s), 1 rounds" in out
    assert re.search(r"RL round 1/1: success [\d.]+, .* ETA 0 s", out)  # rounds report as they end
    # and so do the minutes before the first round (the zero-shot held-out evaluation; the localisation contexts
    # too when not yet cached: this file's corpus has them from its first test)
    assert re.search(r"held-out evaluation: team episodes \(\d+ tasks\) \d+/\d+", out)
    assert re.search(r"seed 0: localised zero-shot [\d.]+ -> RL [\d.]+; solve@1 [\d.]+ -> [\d.]+", out)
    assert re.search(r"localised +zero-shot [\d.]+ \+- [\d.]+ +RL [\d.]+ \+- [\d.]+ +RL - zero-shot [+-]\d", out)
    assert "SFT" not in out
    (run,) = json.loads(figures.read_text())
    assert run["warm_start_loss"] == {} and "sft" not in run  # no labels were used anywhere
    (log,) = run["rl_log"]
    assert "planner/loss" in log and "actor/loss" not in log, sorted(log)  # the patch model never updated


def test_file_style_round_with_lora_roles_in_process(corpus, tmp_path):
    """prompt_style 'file' with LoRA roles (what configs/repair-smollm.yaml runs, here on tiny models): the
    patch model continues the module's own code and picks a whole edited function, a round's rewards come
    from the tests, both roles train their adapters only, and the held-out evaluation covers every system."""
    import torch

    from planact.config import load_config
    from planact.envs.base import make_env
    from planact.role_spec import role_spec
    from planact.workers import RoleWorker

    cfg = load_config(
        SMOKE,
        [
            f"checkpoint.root={tmp_path}",
            f"env.repair.corpus={corpus}",
            "env.repair.prompt_style=file",
            "env.repair.context_chars=600",
            "planner.lora.enabled=true",
            "actor.lora.enabled=true",
            "actor.sampling.chat_template=false",
            "env.repair.eval_budget=1",
            *EVAL,
        ],
    )
    env = make_env(cfg)
    planner, actor = RoleWorker(role_spec(cfg, "planner")), RoleWorker(role_spec(cfg, "actor"))
    before = {k: v.clone() for k, v in actor.model.state_dict().items()}
    # A few tasks: an offered function without candidate edits (the localisation may rank one first) gives
    # its request no options, and one task's two plans may both pick such a target.
    batch = env.sample_tasks(4)
    plans = env.plan(batch, planner, seed=1)
    requests = env.actor_requests(batch, plans)
    for prompt, options in requests:  # a target without candidate edits has none (scored 0, counted)
        assert not prompt.startswith("fix ") and len(prompt) <= 600  # the module's code, not the compact prompt
        assert all(o.lstrip().startswith(("def ", "async def ", "@")) for o in options)
    assert any(options for _, options in requests)
    assert all(e["turns"][0]["obs"].startswith("The test ") for group in plans for e in group)
    res = env.score(batch, plans, actor.choose(requests, n=cfg.actor.group_size, seed=2))
    assert res.actor_samples and res.planner_samples and 0.0 <= res.metrics["success"] <= 1.0
    actor.train(res.actor_samples)
    planner.train(res.planner_samples)
    moved = {k for k, v in actor.model.state_dict().items() if not torch.equal(v, before[k])}
    assert all("lora_" in k for k in moved)
    m = env.evaluate(planner, actor)
    assert {"unseen_functions/team/solve_at_1", "unseen_functions/rule/solve_at_1"} <= set(m)
