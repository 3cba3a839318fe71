"""The LLM optimizer path and continuing a hand-made AFlow workspace.

OpenAI and Anthropic cannot be reached from here: the optimizer and the executor talk to loopback
servers implementing the OpenAI chat-completions and Anthropic messages shapes (tests/servers). The
executor server answers HumanEval problems with their canonical solution only when the prompt asks
for care, so the score of a workflow really depends on its prompt; the code runs in the sandbox.
"""

from __future__ import annotations

import json
import random

from aflow_rl.benchmarks import load_problems
from aflow_rl.config import AFlowConfig
from aflow_rl.optimizers import LLMOptimizer
from aflow_rl.search import run_local
from aflow_rl.workspace import Workspace
from tests.servers.loopback import anthropic_server, openai_server

HUMANEVAL = {p["entry_point"]: p for p in load_problems("humaneval")}

ROUND_GRAPH = """from typing import Literal
import workspace.HumanEval.workflows.template.operator as operator
import workspace.HumanEval.workflows.round_{r}.prompt as prompt_custom
from scripts.async_llm import create_llm_instance
from scripts.evaluator import DatasetType


class Workflow:
    def __init__(self, name: str, llm_config, dataset: DatasetType) -> None:
        self.name = name
        self.dataset = dataset
        self.llm = create_llm_instance(llm_config)
        self.custom_code_generate = operator.CustomCodeGenerate(self.llm)

    async def __call__(self, problem: str, entry_point: str):
        solution = await self.custom_code_generate(problem=problem, entry_point=entry_point, instruction=prompt_custom.CODE_PROMPT)
        return solution["response"], self.llm.get_usage_summary()["total_cost"]
"""

GOOD_ANSWER = '''I will make the instruction stricter.
<modification>Ask the model to work carefully through the examples before writing code.</modification>
<graph>
```python
{graph}
```
</graph>
<prompt>
CODE_PROMPT = """Work carefully through the examples, then complete the function."""
</prompt>'''


def executor_answer(prompt: str, n: int, body: dict):
    """Canonical solutions only for prompts that ask for care; otherwise a stub that fails the tests."""
    p = next((p for e, p in HUMANEVAL.items() if f"`{e}`" in prompt), None)
    if p is None:
        return [("no idea", "stop", [])] * n
    code = (
        p["question"] + p["answer"] if "carefully" in prompt else f"def {p['entry_point']}(*args):\n    return None\n"
    )
    return [(f"```python\n{code}\n```", "stop", [])] * n


def make_handmade_workspace(root) -> Workspace:
    """Rounds 1 and 2 in AFlow's exact layout, as an AFlow run leaves them (no CSVs kept)."""
    ws = Workspace(root)
    ws.init()
    for r, prompt in ((1, "Complete the function."), (2, "Complete the function. Mind edge cases.")):
        d = root / f"round_{r}"
        d.mkdir(parents=True)
        (d / "__init__.py").write_text("")
        (d / "graph.py").write_text(ROUND_GRAPH.format(r=r))
        (d / "prompt.py").write_text(f'CODE_PROMPT = """{prompt}"""\n')
    (root / "round_2" / "experience.json").write_text(
        json.dumps(
            {"father node": 1, "modification": "Mention edge cases.", "before": 0.0, "after": 0.0, "succeed": False}
        )
    )
    (root / "results.json").write_text(
        json.dumps([{"round": r, "score": 0.0, "avg_cost": 0.0, "total_cost": 0.0, "time": 1.0} for r in (1, 1, 2, 2)])
    )
    (root / "processed_experience.json").write_text(
        json.dumps(
            {
                "1": {
                    "score": 0.0,
                    "success": {},
                    "failure": {"2": {"modification": "Mention edge cases.", "score": 0.0}},
                }
            }
        )
    )
    return ws


def _openai(url: str) -> dict:
    return {
        "kind": "openai",
        "temperature": 0.0,
        "max_new_tokens": 2048,
        "openai": {"base_url": url + "/v1", "model": "loopback", "api_key_env": "", "max_retries": 4, "timeout_s": 10},
    }


def test_llm_optimizer_continues_a_handmade_aflow_workspace(tmp_path):
    answers = iter(
        [
            "Sure! Here is my idea: add a review step.",  # malformed: no tags at all
            "<modification>Use a new prompt.</modification><graph>"
            + ROUND_GRAPH.format(r=3).replace("prompt_custom.CODE_PROMPT", "prompt_custom.BETTER_PROMPT")
            + "</graph><prompt>OTHER = 'x'</prompt>",
            GOOD_ANSWER.format(graph=ROUND_GRAPH.format(r=3)),
        ]
    )
    optimizer = openai_server(lambda prompt, n, body: [(next(answers), "stop", [])], key=None)
    executor = openai_server(executor_answer, key=None)
    with optimizer, executor:
        optimizer.fail_next(429, times=2, retry_after="0.1")
        optimizer.fail_next(503, times=1)
        ws = make_handmade_workspace(tmp_path / "HUMANEVAL" / "workflows")
        cfg = AFlowConfig(
            run_name="continue",
            root=str(tmp_path),
            benchmark="humaneval",
            workspace=str(ws.root),
            limit=4,
            executor=_openai(executor.url),
            policy={"enabled": False},
            search={
                "optimizer": "llm",
                "optimizer_llm": _openai(optimizer.url),
                "max_rounds": 3,
                "validation_repeats": 2,
            },
        )
        history = run_local(cfg)
        opt_requests = len(optimizer.requests)

    assert [h["round"] for h in history] == [3]  # rounds 1 and 2 were read, not re-run
    assert not list((ws.root / "round_1").glob("*.csv")) and not list((ws.root / "round_2").glob("*.csv"))
    meta = json.loads((ws.root / "round_3" / "planact.json").read_text())
    assert meta["optimizer_attempts"] == 3 and len(meta["rejected"]) == 2
    assert "no <graph>" in meta["rejected"][0] and "BETTER_PROMPT" in meta["rejected"][1]
    assert opt_requests == 6  # 2 x 429 + 1 x 503 retried by the engine, then the three answers
    exp = json.loads((ws.root / "round_3" / "experience.json").read_text())
    assert exp["father node"] in (1, 2) and exp["before"] == 0.0 and exp["after"] == 1.0 and exp["succeed"] is True
    processed = json.loads((ws.root / "processed_experience.json").read_text())
    assert processed["1"]["failure"]["2"]["modification"] == "Mention edge cases."  # the old history is kept
    assert processed[str(exp["father node"])]["success"]["3"]["score"] == 1.0
    rows = json.loads((ws.root / "results.json").read_text())
    assert [r["round"] for r in rows] == [1, 1, 2, 2, 3, 3] and rows[-1]["score"] == 1.0
    assert len(list((ws.root / "round_3").glob("1.00000_*.csv"))) == 2 and (ws.root / "round_3" / "log.json").is_file()


def test_anthropic_optimizer_repairs_missing_prompts_and_survives_overload(tmp_path):
    ws = make_handmade_workspace(tmp_path / "workflows")
    # The answer's prompt.py lacks CODE_PROMPT, which the parent defines: repaired by carrying it over.
    answer = (
        "<modification>Return early on empty input.</modification><graph>"
        + ROUND_GRAPH.format(r=3)
        + "</graph><prompt>EXTRA = 'unused'</prompt>"
    )
    with anthropic_server(lambda prompt, n, body: [(answer, "stop", [])], key=None) as srv:
        srv.fail_next(529, times=2)  # Anthropic's "overloaded"
        llm = {
            "kind": "anthropic",
            "temperature": 0.0,
            "anthropic": {"base_url": srv.url, "model": "loopback", "api_key_env": ""},
        }
        opt = LLMOptimizer(AFlowConfig(search={"optimizer_llm": llm}).search.optimizer_llm, "humaneval")
        cand = opt.propose(ws, 1, 0.0, random.Random(0))
        sent = srv.requests[-1]["body"]
    assert cand.graph and cand.attempts == 1 and "CODE_PROMPT" in cand.prompt and "EXTRA" in cand.prompt
    assert "Mention edge cases." in sent["messages"][-1]["content"]  # the parent's experience is in the request
    # The same modification again from the same parent is refused (AFlow's dedupe).
    ws.record_refusal(3, 1, "Return early on empty input.", ["test"])
    with anthropic_server(lambda prompt, n, body: [(answer, "stop", [])], key=None) as srv:
        llm["anthropic"]["base_url"] = srv.url
        opt = LLMOptimizer(AFlowConfig(search={"optimizer_llm": llm}).search.optimizer_llm, "humaneval", attempts=2)
        again = opt.propose(ws, 1, 0.0, random.Random(0))
    assert not again.graph and all("already tried" in r for r in again.rejected)


def test_the_optimizer_model_trains_on_humaneval_with_an_api_executor(tmp_path):
    """configs/aflow-train-openai.yaml's path, small: the tiny optimizer model steps three HumanEval searches
    whose workflows call an OpenAI-compatible executor (a loopback server: it writes the canonical
    solution only when the prompt asks to think about edge cases, CODE_PROMPT template 1), the code runs
    in the sandbox, and the score changes train the optimizer. The server also fixes its code when the
    workflow's Test step shows it a failing public example, as a real model would."""
    from pathlib import Path

    import torch

    from aflow_rl.config import load_aflow_config, validate_aflow_config
    from aflow_rl.optimizer_rl import OptimizerModel, train_iteration

    def careful_answer(prompt: str, n: int, body: dict):
        # Right when asked to think about edge cases, or when shown that its code fails a public test
        # (what the Test step does); a stub otherwise.
        p = next((p for e, p in HUMANEVAL.items() if f"def {e}(" in prompt), None)
        if p is None or ("edge cases" not in prompt and "fails a public test" not in prompt):
            return [(f"```python\ndef {p['entry_point'] if p else 'f'}(*args):\n    return None\n```", "stop", [])] * n
        return [(f"```python\n{p['question'] + p['answer']}\n```", "stop", [])] * n

    shipped = load_aflow_config(Path(__file__).resolve().parents[2] / "configs" / "aflow-train-openai.yaml")
    with openai_server(careful_answer, key=None) as executor:
        data = shipped.model_dump()
        data.update(
            run_name="he",
            root=str(tmp_path),
            limit=2,  # each round's problems run in the sandbox, some twice (the Test step): 2 show it as well as 3
            task_runner="threads",
            executor=_openai(executor.url) | {"temperature": 1.0},
        )
        data["search"].update(max_rounds=4)
        data["optimizer_rl"].update(searches=3, iterations=1)
        cfg = validate_aflow_config(data)
        opt = OptimizerModel(cfg.optimizer_rl, cfg.benchmark, cfg.seed)
        before = {k: v.clone() for k, v in opt.model.state_dict().items()}
        figures = train_iteration(cfg, opt, 1)
        served = len(executor.requests)

    assert served > 0 and figures["transitions"] >= 6 and figures["invalid"] == 0
    searches = sorted((tmp_path / "he-it1" / "searches").iterdir())
    assert [d.name.split("-s")[0] for d in searches] == ["humaneval"] * 3
    scored = found = 0
    for d in searches:  # every round's score is what the sandboxed tests say of its prompt's answers
        ws = Workspace(d / "workflows")
        for r, score in ws.scores().items():
            prompt = (ws.round_dir(r) / "prompt.py").read_text()
            graph = (ws.round_dir(r) / "graph.py").read_text()
            helped = "edge cases" in prompt or "operator.Test(" in graph  # both problems have public examples
            assert score == (1.0 if helped else 0.0), (d.name, r, prompt, graph)
            scored += 1
            found += helped
    assert scored >= 6 and 0 < found < scored  # rounds 1 stay stubs; some edits found what helps
    assert figures["best"] == 1.0 and figures["adv_std"] > 0 and figures["optimizer/frac_zero_adv"] < 1.0
    assert any(not torch.equal(before[k], v) for k, v in opt.model.state_dict().items())  # and it learned


TESTED_GRAPH = """import workspace.HumanEval.workflows.template.operator as operator
import workspace.HumanEval.workflows.round_2.prompt as prompt_custom
from scripts.async_llm import create_llm_instance


class Workflow:
    def __init__(self, name: str, llm_config, dataset) -> None:
        self.name = name
        self.dataset = dataset
        self.llm = create_llm_instance(llm_config)
        self.custom_code_generate = operator.CustomCodeGenerate(self.llm)
        self.test = operator.Test(self.llm)

    async def __call__(self, problem: str, entry_point: str):
        solution = await self.custom_code_generate(problem=problem, entry_point=entry_point, instruction=prompt_custom.CODE_PROMPT)
        tested = await self.test(problem=problem, solution=solution["response"], entry_point=entry_point)
        return tested["solution"], self.llm.get_usage_summary()["total_cost"]
"""


def test_a_frozen_api_optimizer_drives_training_searches_and_junk_scores_zero(tmp_path):
    """search.optimizer: llm in a training run: an API model (a loopback OpenAI server) writes AFlow's full answers
    for every search step, HumanEval runs offline on the candidate coder; junk answers are refused, scored 0 and
    counted; the model is frozen (no update) and its checkpoint folder names it."""
    from aflow_rl.config import validate_aflow_config
    from aflow_rl.optimizer_rl import FrozenAPIOptimizer, make_optimizer, train_iteration

    asked = []

    def optimizer_answer(prompt: str, n: int, body: dict):
        asked.append(prompt)
        if len(asked) % 2:  # every other answer is junk: no tags, then a graph that imports os
            junk = (
                "I would add a test."
                if len(asked) % 4 == 1
                else "<modification>x</modification><graph>import os</graph>"
            )
            return [(junk, "stop", [])] * n
        good = (
            f"<modification>Run the public examples and retry ({len(asked)}).</modification>"
            f"<graph>\n{TESTED_GRAPH}\n</graph>"
        )
        return [(good, "stop", [])] * n

    with openai_server(optimizer_answer, key=None) as server:
        cfg = validate_aflow_config(
            {
                "run_name": "frozen",
                "root": str(tmp_path),
                "benchmark": "humaneval",
                "limit": 3,
                "code_timeout_s": 5,
                "task_runner": "threads",
                "policy": {"enabled": False},
                "search": {
                    "max_rounds": 3,
                    "validation_repeats": 1,
                    "optimizer": "llm",
                    "optimizer_llm": _openai(server.url),
                },
                "optimizer_rl": {"searches": 2, "iterations": 1},
            }
        )
        opt = make_optimizer(cfg)
        assert isinstance(opt, FrozenAPIOptimizer)
        figures = train_iteration(cfg, opt, 1)

    assert asked and all("<modification>" in p and "class Workflow" in p for p in asked)  # AFlow's request
    assert figures["invalid"] >= 2 and figures["optimizer/frozen"] == 1.0
    assert figures["humaneval/transitions"] == figures["transitions"] >= 4
    written = refused = 0
    for d in sorted((tmp_path / "frozen-it1" / "searches").iterdir()):
        ws = Workspace(d / "workflows")
        refused += len(ws.refusals())  # the junk, kept with its reason
        for r in ws.rounds_on_disk():
            if r > 1:
                assert "operator.Test(" in (ws.round_dir(r) / "graph.py").read_text() and r in ws.scores()
                written += 1
    assert refused == figures["invalid"] and written >= 1
    saved = opt.save(tmp_path / "ckpt")
    assert json.loads((saved / "optimizer.json").read_text()) == {"kind": "openai", "model": "loopback", "frozen": True}


def test_a_trainable_free_form_optimizer_model_is_scored_and_updated(tmp_path):
    """optimizer_rl.model_path: a local HF model (here a tiny untrained one) reads AFlow's optimizer request and
    writes free text; every answer that is not a valid workflow is refused, scored 0 and counted, the episodes
    end at their step budget, and its token log-probabilities train it (weights change, checkpoint reloads)."""
    import torch

    from aflow_rl.config import validate_aflow_config
    from aflow_rl.optimizer_rl import FreeFormOptimizerModel, make_optimizer, run_searches, transition_batch
    from planact.config import TinyModelSpec
    from planact.models import build_tiny_model, build_tokenizer

    tok = build_tokenizer()
    model = build_tiny_model(
        TinyModelSpec(hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64, max_positions=8192),
        len(tok),
        0,
        tok,
    )
    model.save_pretrained(tmp_path / "opt")
    tok.save_pretrained(tmp_path / "opt")
    cfg = validate_aflow_config(
        {
            "run_name": "freeform",
            "root": str(tmp_path),
            "benchmark": "humaneval",
            "limit": 3,
            "code_timeout_s": 5,
            "task_runner": "threads",
            "policy": {"enabled": False},
            "search": {"max_rounds": 2, "validation_repeats": 1, "optimizer": "llm"},
            "optimizer_rl": {
                "model_path": str(tmp_path / "opt"),
                "max_new_tokens": 16,
                "searches": 1,
                "rl": {"lr": 1e-2, "warmup_steps": 0, "num_minibatches": 1},
            },
        }
    )
    opt = make_optimizer(cfg)
    assert isinstance(opt, FreeFormOptimizerModel)
    trans = run_searches(cfg, opt, [1], "it1")
    assert len(trans) == 2 * cfg.search.max_rounds  # the search spends its whole step budget (2x its rounds)
    assert all(tr["invalid"] and tr["reward"] == 0.0 for tr in trans)
    assert all(
        tr["completion"]["token_ids"] and len(tr["completion"]["logprobs"]) == len(tr["completion"]["token_ids"])
        for tr in trans
    )
    before = {k: v.clone() for k, v in opt.model.state_dict().items()}
    for i, tr in enumerate(trans):
        tr["advantage"] = 1.0 if i % 2 else -1.0
    metrics = opt.update(transition_batch(1, trans))
    assert metrics["skipped"] == 0.0 and any(not torch.equal(before[k], v) for k, v in opt.model.state_dict().items())
    saved = opt.save(tmp_path / "ckpt")
    again = make_optimizer(cfg, saved)
    assert again.trainer.steps == 1 and torch.equal(next(again.model.parameters()), next(opt.model.parameters()))
