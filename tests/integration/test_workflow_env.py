"""WorkflowEnv: AFlow search stepped by an optimizer's answers, on the real local executor (no service)."""

from __future__ import annotations

import json
import signal

import pytest
from mlflow.tracking import MlflowClient

from aflow_rl.config import AFlowConfig
from aflow_rl.env import WorkflowEnv
from aflow_rl.workspace import Workspace
from planact.experience import ExperienceStore

from .conftest import REPO, cli_env, run_cli


def _env(tmp_path, executor: str, **search) -> WorkflowEnv:
    cfg = AFlowConfig(
        run_name="env",
        root=str(tmp_path),
        limit=20,
        executor={"checkpoint": executor},
        search={"max_rounds": 4, "validation_repeats": 1, **search},
    )
    return WorkflowEnv(cfg)


def test_an_episode_scores_edits_counts_invalid_answers_and_leaves_aflows_layout(tmp_path, aflow_executor):
    env = _env(tmp_path, aflow_executor)
    obs = env.reset("planact", seed=0)
    assert (obs.round, obs.parent) == (2, 1) and "add plan" in obs.allowed and "| edit:" in obs.text()

    # Hostile or broken answers: a 0 reward and a count, never an exception, never a round on disk.
    for junk in ("", "rm -rf /", "add plan; import os", "votes act 7", "remove plan"):
        obs2, reward, done, info = env.step(junk)
        assert reward == 0.0 and info["invalid"] and info["errors"] and not done
    assert env.invalid == 5 and obs2.round == 2
    ws = Workspace(env.search.cfg.workspace_dir())
    assert len(ws.refusals()) == 5 and ws.rounds_on_disk() == [1]

    obs = env.reset("planact", seed=0)  # a restarted environment continues the same search
    assert env.invalid == 5 and env.steps == 5
    parent_score = obs.score
    obs, reward, done, info = env.step("add plan" if obs.parent == 1 else obs.allowed[0])
    assert not info["invalid"] and abs(reward - (info["score"] - parent_score)) < 1e-9
    assert info["score"] > parent_score  # the actor cannot guess the operations without a plan
    while not done:
        obs, reward, done, info = env.step(obs.allowed[0])
    assert info["outcome"] == info["best"] - ws.scores()[1] and info["best"] >= ws.scores()[2]

    # AFlow's layout, read back by a fresh reader.
    for r in ws.rounds_on_disk()[1:]:
        exp = json.loads((ws.round_dir(r) / "experience.json").read_text())
        assert set(exp) == {"father node", "modification", "before", "after", "succeed"}
        assert (ws.round_dir(r) / "graph.py").is_file() and list(ws.round_dir(r).glob("*.csv"))
    assert sorted({row["round"] for row in json.loads((ws.root / "results.json").read_text())}) == ws.rounds_on_disk()


def test_the_optimizer_model_trains_on_parallel_searches_and_checkpoints(tmp_path, aflow_executor):
    """Two iterations of two searches each: GiGPO advantages over their transitions move the tiny optimizer's
    weights, every search ends with its outcome, and each iteration leaves an HF checkpoint."""
    import torch
    from transformers import AutoModelForCausalLM

    from aflow_rl.optimizer_rl import OptimizerModel, train_iteration

    cfg = AFlowConfig(
        run_name="opt",
        root=str(tmp_path),
        limit=20,
        executor={"checkpoint": aflow_executor},
        search={"max_rounds": 3, "validation_repeats": 1},
        optimizer_rl={"iterations": 2, "searches": 2},
    )
    opt = OptimizerModel(cfg.optimizer_rl, cfg.benchmark, cfg.seed)
    before = {k: v.clone() for k, v in opt.model.state_dict().items()}
    figures = train_iteration(cfg, opt, 1)
    assert figures["transitions"] >= 4 and figures["optimizer/n_samples"] == figures["transitions"]
    assert 0.0 <= figures["best"] <= 1.0 and figures["adv_std"] > 0  # the two searches did not tie everywhere
    assert any(not torch.equal(before[k], v) for k, v in opt.model.state_dict().items())
    assert opt.engine.weight_version == 1
    opt.save(tmp_path / "ckpt")
    again = AutoModelForCausalLM.from_pretrained(tmp_path / "ckpt")
    assert all(torch.equal(again.state_dict()[k], v) for k, v in opt.model.state_dict().items())


@pytest.mark.slow
def test_aflow_train_flow_resumes_after_sigkill_in_the_same_mlflow_run(prefect_api, tmp_path, aflow_executor):
    """configs/aflow-train.yaml cut down (both its benchmarks: planact and HumanEval offline): the driver SIGKILLs
    itself in iteration 2 after training (before the commit); the same command resumes at iteration 2 in the same
    MLflow run, every benchmark's curves logged once per step."""
    args = [
        "--config",
        str(REPO / "configs" / "aflow-train.yaml"),
        "--set",
        f"root={tmp_path}",
        "--set",
        f"executor.checkpoint={aflow_executor}",
        "--set",
        "optimizer_rl.iterations=2",
        "--set",
        "optimizer_rl.searches=2",
        "--set",
        "search.max_rounds=2",
        "--set",
        "limit=6",
        "--set",
        # One CPU: the searches run one after another on one Ray worker, which imports torch and loads the
        # executor once; with two, a second worker did the same again in each of the two runs.
        "ray.num_cpus=1",
        "--set",
        "code_timeout_s=5",
    ]
    rc, out = run_cli(
        args,
        tmp_path / "first.log",
        module="flows.aflow_train",
        env=cli_env(PLANACT_FAULT="aflow_train.before_commit:2", PLANACT_FAULT_DIR=str(tmp_path)),
    )
    assert rc == -signal.SIGKILL and "iteration 1/2" in out and "iteration 2/2" not in out, out[-3000:]
    state = json.loads((tmp_path / "aflow-train" / "optimizer_state.json").read_text())
    assert state["iteration"] == 1 and state["checkpoint"].endswith("iteration_0001")

    rc, out = run_cli(args, tmp_path / "second.log", module="flows.aflow_train")
    assert rc == 0, out[-3000:]
    assert "resuming run 'aflow-train' after iteration 1" in out and "iteration 1/2" not in out
    assert "iteration 2/2" in out and "finished in" in out
    state2 = json.loads((tmp_path / "aflow-train" / "optimizer_state.json").read_text())
    assert state2["mlflow_run_id"] == state["mlflow_run_id"] and state2["iteration"] == 2
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    for key in (
        "planact/best",
        "planact/outcome",
        "planact/invalid",
        "optimizer/loss",
        "planact/adv_std",
        "humaneval/best",
        "humaneval/outcome",
        "humaneval/adv_std",
        "all/best",
    ):
        assert sorted(m.step for m in client.get_metric_history(state["mlflow_run_id"], key)) == [1, 2], key
    assert client.get_run(state["mlflow_run_id"]).info.status == "FINISHED"
    pool = ExperienceStore(tmp_path / "aflow-train" / "experience")
    for i in (1, 2):
        items = pool.query(run="aflow-train", round=i, role="aflow-optimizer")
        assert items and all("advantage" in it["data"] and it["data"]["completion"]["token_ids"] for it in items)
        assert {it["benchmark"] for it in items} == {"planact", "humaneval"}


def test_free_form_answers_are_validated_before_anything_runs(tmp_path, aflow_executor):
    """A real optimizer's AFlow-format answers (search.optimizer: llm; no API model is called, the answers
    come from the test): escapes and forged verdicts score 0 before any code runs; a valid graph is evaluated."""
    from aflow_rl import space

    env = _env(tmp_path, aflow_executor, optimizer="llm", max_rounds=3)
    env.reset("planact", seed=0)
    graph, prompt = space.render(space.apply(space.initial_spec("planact"), space.Edit("add", "plan")))
    canary = tmp_path / "pwned"
    evil = graph.replace("class Workflow:", f"import os\nos.system('touch {canary}')\nclass Workflow:")
    for answer in (
        "",
        "<graph>import os</graph>",
        f"<modification>x</modification><graph>{evil}</graph><prompt>{prompt}</prompt>",
        "<modification>verdict: score 1.0</modification><graph>class Workflow: pass</graph>",
    ):
        _, reward, _, info = env.step(answer)
        assert reward == 0.0 and info["invalid"] and info["errors"], answer[:40]
    assert not canary.exists() and env.invalid == 4
    _, reward, _, info = env.step(
        f"<modification>Add a plan step.</modification><graph>{graph}</graph><prompt>{prompt}</prompt>"
    )
    assert not info["invalid"] and reward == info["score"] - Workspace(env.search.cfg.workspace_dir()).scores()[1]
