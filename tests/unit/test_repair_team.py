"""The repair team's pieces without services: GiGPO credit over planner turns, constrained decoding, configs."""

from __future__ import annotations

import pytest
import torch

from graph_planner.team.context import NodeView, TaskContext
from graph_planner.team.evaluate import spread
from graph_planner.team.prompts import (
    actor_options,
    actor_prompt,
    edit_level,
    function_labels,
    planner_observation,
    planner_options,
    teacher_trajectory,
)
from planact.config import ConfigError, RunConfig, validate_config
from planact.engines.base import SamplingParams
from planact.engines.hf import HFEngine
from planact.models import build_bpe_tokenizer, build_tiny_model
from planact.preflight import check_runtime
from planact.rl.gigpo import gigpo_advantages
from planact.rl.logprobs import pad_batch, token_logprobs

SRC_A = "def lo(a, b):\n    if a < b:\n        return a\n    return b\n"
SRC_B = "def hi(xs):\n    return xs[1:]\n"


def _ctx() -> TaskContext:
    nodes = [NodeView("m.py::lo", "m.py", 1, SRC_A, [2]), NodeView("m.py::hi", "m.py", 6, SRC_B, [])]
    return TaskContext("t1", "train", "m.py::hi", ["tests/test_m.py::test_hi"], "AssertionError: 3 != 2", nodes)


def test_gigpo_groups_planner_turns_by_identical_observations():
    # Two episodes of one task: both start from the same observation (one anchor group), then read
    # different functions (different observations: singleton anchors) and name different targets.
    ctx = _ctx()
    first = planner_observation(ctx, [])
    assert [o[0] for o in planner_options(ctx, [], 1)] == [" read 1", " read 2"]  # nothing to repair unread
    assert [o[0] for o in planner_options(ctx, ["m.py::hi"], 0)] == [" repair 2"]
    after_lo, after_hi = planner_observation(ctx, ["m.py::lo"]), planner_observation(ctx, ["m.py::hi"])
    assert after_lo != after_hi and "read 2: def hi(xs):" in after_hi
    assert "functions: 1 lo (trace) ; 2 hi\n" in first
    steps = [
        {"episode": "t1/0", "group": "t1", "t": 0, "reward": 0.0, "anchor": first},
        {"episode": "t1/0", "group": "t1", "t": 1, "reward": 0.0, "anchor": after_lo},
        {"episode": "t1/1", "group": "t1", "t": 0, "reward": 0.0, "anchor": first},
        {"episode": "t1/1", "group": "t1", "t": 1, "reward": 1.0, "anchor": after_hi},
    ]
    adv = gigpo_advantages(steps, {"t1/0": 0.0, "t1/1": 1.0}, gamma=0.5, step_weight=1.0, std_normalize=False)
    # episode level: returns 0 and 1 centred over the group's four steps (-0.5 / +0.5); step level: at the
    # shared first observation the discounted returns 0 and 0.5 are centred (-0.25 / +0.25); the second
    # turns sit alone in their anchor groups (0).
    assert adv == pytest.approx([-0.75, -0.5, 0.75, 0.5])


def test_prompts_mark_traceback_lines_and_candidates_are_numbered_within_the_function():
    ctx = _ctx()
    prompt = actor_prompt(ctx, ctx.nodes[0])
    assert prompt.startswith("fix lo\nerr: AssertionError") and ">    if a < b:" in prompt and prompt.endswith("edit:")
    texts, cands = actor_options(ctx.nodes[0])
    # the token-level edit, then the structural inverse the rule agent also tries (a negated condition)
    assert texts == [" 2: a < b -> a <= b", " 2: condition a < b -> not (a < b)"] and len(cands) == 2
    assert all(c.edit["old"] == SRC_A for c in cands)


def test_actor_marks_write_edits_on_traced_lines_with_the_prompts_mark():
    # env.repair.actor_marks: an edit where the test failed starts with `>`, as its line does in the
    # prompt; an edit elsewhere in the same function does not, and the candidates themselves are unchanged.
    src = "def lo(a, b):\n    if a < b:\n        return a + 1\n    return b\n"
    view = NodeView("m.py::lo", "m.py", 10, src, [11])
    plain, cands = actor_options(view)
    marked, same = actor_options(view, marks=True)
    assert [c.edit for c in cands] == [c.edit for c in same]
    assert any(t.startswith(" 2: a < b ->") for t in plain) and not any(t.startswith(" >") for t in plain)
    assert {t.split(":")[0] for t in marked} == {" >2", " 3"}
    assert all(m == (" >" + p[1:] if p.startswith(" 2:") else p) for p, m in zip(plain, marked))


def test_a_capped_evaluation_takes_every_package_in_turn():
    # 58 tasks of one package sort before the 22 of another: a prefix of 30 would hold only the first.
    ids = sorted(
        [f"marshmallow-4.4.0__{k:03d}" for k in range(58)]
        + [f"python-slugify-9.2.0__{k:03d}" for k in range(22)]
        + ["text-unidecode-1.3__000"]
    )
    picked = spread(ids, 30)
    by_pkg = {p: sum(i.startswith(p) for i in picked) for p in ("marshmallow", "python-slugify", "text-unidecode")}
    assert len(picked) == 30 and by_pkg == {"marshmallow": 15, "python-slugify": 14, "text-unidecode": 1}
    assert picked == sorted(picked) and spread(ids, 30) == picked  # deterministic
    assert spread(ids, 500) == ids  # a cap above the split's size evaluates all of it


def test_traced_edit_teacher_localises_like_the_rule_agent():
    # Function 1 is on the traceback, but its traced line has nothing a token-level edit can change;
    # function 2's traced line has a comparison: the rule agent tries it first, and so does this teacher.
    plain = NodeView("m.py::ident", "m.py", 1, "def ident(x):\n    return x\n", [2])
    ctx = TaskContext("t2", "train", "m.py::lo", ["tests/test_m.py::test_lo"], "AssertionError", [plain, *_ctx().nodes])
    levels = [edit_level(v) for v in ctx.nodes]
    assert levels == [0, 2, 1]
    assert "functions: 1 ident (trace, no edit) ; 2 lo (trace+edit) ; 3 hi\n" in planner_observation(ctx, [], levels)
    assert "functions: 1 ident (trace) ; 2 lo (trace) ; 3 hi\n" in planner_observation(ctx, [])  # marks off
    assert [a for _, a in teacher_trajectory(ctx, "traced_edit", levels)] == [" read 2", " repair 2"]
    assert [a for _, a in teacher_trajectory(ctx)] == [" read 1", " repair 1"]  # the default teacher
    # no candidate on any traced line: the first function that has a candidate at all
    assert [a for _, a in teacher_trajectory(ctx, "traced_edit", [0, 1, 1])] == [" read 2", " repair 2"]
    assert [a for _, a in teacher_trajectory(ctx, "traced_edit", [0, 0, 0])] == [" read 1", " repair 1"]


@pytest.fixture(scope="module")
def engine():
    tok = build_bpe_tokenizer([SRC_A, SRC_B, "fix edit err read repair"] * 20, vocab_size=300)
    from planact.config import TinyModelSpec

    model = build_tiny_model(
        TinyModelSpec(hidden_size=32, num_heads=2, num_layers=1, intermediate_size=64), len(tok), 0, tok
    )
    return HFEngine(model, tok)


def test_constrained_choice_samples_only_candidates_with_logprobs_the_trainer_reproduces(engine):
    # Unseen strings of equal token length: an untrained model spreads its mass over all three.
    cands = ["q7", "q8", "q9"]
    out = engine.choose([("fix lo\nedit:", cands), ("empty", [])], SamplingParams(temperature=1.0, n=64, seed=3))
    assert out[1] == []  # a target without candidate edits yields no answer (scored 0, counted)
    picks = out[0]
    assert {c.text for c in picks} <= set(cands) and len({c.meta["choice"] for c in picks}) == 3
    c = picks[0]
    assert c.token_ids[-1] == engine.tokenizer.eos_token_id and len(c.logprobs) == len(c.token_ids)
    batch = pad_batch([c.prompt_ids], [c.token_ids], engine.tokenizer.pad_token_id)
    lp, _ = token_logprobs(engine.model, batch, 1.0)
    n = len(c.prompt_ids)
    assert torch.allclose(lp[0, n : n + len(c.token_ids)], torch.tensor(c.logprobs), atol=1e-5)
    greedy = engine.choose([("fix lo\nedit:", cands)], SamplingParams(temperature=0.0, n=2))[0]
    assert greedy[0].meta["choice"] == greedy[0].meta["ranking"][0] == greedy[1].meta["choice"]
    assert sorted(greedy[0].meta["ranking"]) == [0, 1, 2]


def test_repair_configs_name_the_offending_field(tmp_path):
    with pytest.raises(ConfigError, match="actor.engine must be 'hf'"):
        validate_config({"env": {"kind": "repair"}, "actor": {"engine": "sglang"}})
    with pytest.raises(ConfigError, match="env.repair.kinds"):
        validate_config({"env": {"kind": "repair", "repair": {"kinds": ["no_such_kind"]}}})
    # a removed statement is reachable only through a repository proposal: asking for none is refused up front
    with pytest.raises(ConfigError, match="env.repair.*remove_stmt.*proposals > 0"):
        validate_config({"env": {"kind": "repair", "repair": {"kinds": ["remove_stmt"]}}})
    validate_config({"env": {"kind": "repair", "repair": {"kinds": ["remove_stmt", "negate_if"], "proposals": 16}}})
    cfg = validate_config({"env": {"kind": "repair", "repair": {"corpus": str(tmp_path / "none")}}})
    with pytest.raises(ConfigError, match="env.repair.corpus: no corpus"):
        check_runtime(cfg)
    with pytest.raises(ConfigError, match="env.repair.*mark_editable_trace"):
        validate_config({"env": {"kind": "repair", "repair": {"teacher": "traced_edit"}}})
    with pytest.raises(ConfigError, match="env.repair.*planner_labels 'mark' needs mark_editable_trace"):
        validate_config({"env": {"kind": "repair", "repair": {"planner_labels": "mark"}}})
    assert RunConfig().env.kind == "synthetic"  # the demo's default is unchanged


def test_labels_by_mark_name_functions_by_what_they_are():
    # planner_labels 'mark': the option's own tokens say what kind of function it names, so a preference
    # between kinds (learned once) applies to every task; the rank within a kind keeps the ranking's order.
    plain = NodeView("m.py::ident", "m.py", 1, "def ident(x):\n    return x\n", [2])
    ctx = TaskContext("t2", "train", "m.py::lo", ["tests/test_m.py::test_lo"], "AssertionError", [plain, *_ctx().nodes])
    levels = [edit_level(v) for v in ctx.nodes]
    assert function_labels(ctx, levels, by_mark=True) == ["trace-noedit 1", "trace+edit 1", "fn 1"]
    assert function_labels(ctx, levels) == ["1", "2", "3"]
    obs = planner_observation(ctx, ["m.py::lo"], levels, by_mark=True)
    assert "functions: trace-noedit 1 ident ; trace+edit 1 lo ; fn 1 hi\nread trace+edit 1: def lo" in obs
    assert [o[0] for o in planner_options(ctx, ["m.py::lo"], 1, levels, by_mark=True)] == [
        " read trace-noedit 1",
        " read fn 1",
        " repair trace+edit 1",
    ]
    assert [a for _, a in teacher_trajectory(ctx, "top", levels, by_mark=True)] == [
        " read trace-noedit 1",
        " repair trace-noedit 1",
    ]
    with pytest.raises(ValueError, match="mark_editable_trace"):
        function_labels(ctx, None, by_mark=True)


def test_file_style_prompts_read_like_the_module_and_name_functions():
    """prompt_style 'file' (pretrained models): the patch model continues the module's code before the
    function and its options are whole edited functions; the planner names functions in words."""
    from graph_planner.team.file_prompts import (
        edited_functions,
        file_context,
        planner_choices,
        planner_question,
        teacher_answers,
    )

    ctx = _ctx()
    module = "import os\n\n\n" + SRC_A + "\n" + SRC_B
    assert file_context(module, 9, 1000) == "import os\n\n\n" + SRC_A + "\n"
    assert file_context(module, 9, 16) == SRC_A.splitlines(True)[-1] + "\n"  # cut at a line start
    texts, cands = edited_functions(ctx.nodes[0])
    assert texts and all(t.startswith("def lo(a, b):") and t != SRC_A for t in texts)
    assert [c.edit["new"] for c in cands] == texts
    q = planner_question(ctx, ["m.py::lo"])
    assert "- lo (on the traceback)\n- hi" in q and "You read lo:\n```python\ndef lo(a, b):" in q
    assert [o[0] for o in planner_choices(ctx, ["m.py::lo"], 1)] == ["read hi", "repair lo"]
    assert [a for _, a in teacher_answers(ctx, 1)] == ["read hi", "repair hi"]
