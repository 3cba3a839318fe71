"""WorkflowEnv: AFlow search stepped by an optimizer's answers, on the real local executor (no service)."""

from __future__ import annotations

import json

from aflow_rl.config import AFlowConfig
from aflow_rl.env import WorkflowEnv
from aflow_rl.workspace import Workspace


def _env(tmp_path, executor: str, **search) -> WorkflowEnv:
    cfg = AFlowConfig(run_name="env", root=str(tmp_path), limit=20, executor={"checkpoint": executor},
                      search={"max_rounds": 4, "validation_repeats": 1, **search})
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

    cfg = AFlowConfig(run_name="opt", root=str(tmp_path), limit=20, executor={"checkpoint": aflow_executor},
                      search={"max_rounds": 3, "validation_repeats": 1}, optimizer_rl={"iterations": 2, "searches": 2})
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
