"""HF engine: logprobs match a fresh forward pass; finish reasons; weight versions; Auto* loading."""

import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from planact.config import RunConfig
from planact.engines.base import SamplingParams
from planact.engines.hf import HFEngine
from planact.models import load_model, param_count
from planact.rl.logprobs import pad_batch, token_logprobs


def test_tiny_model_loads_through_auto_classes(tiny_model_dir):
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    assert tok.pad_token_id != tok.eos_token_id
    assert tok.decode(tok.encode("sort it, then rev>inc", add_special_tokens=False)) == "sort it, then rev>inc"
    assert model.config.model_type == "llama"


def test_planner_is_larger_than_actor(tmp_path):
    from planact.initial_models import initial_model_path

    cfg = RunConfig(checkpoint={"root": str(tmp_path)})
    sizes = {r: param_count(load_model(initial_model_path(cfg, r))[0]) for r in ("planner", "actor")}
    assert sizes["planner"] > sizes["actor"]


@pytest.mark.parametrize("attention", ["eager", "sdpa", "varlen"])
def test_sampled_logprobs_equal_fresh_forward(tiny_model_dir, attention):
    """The engine's sampling logprobs equal the trainer's fresh forward pass, with either attention kernel."""
    torch.manual_seed(0)
    model, tok = load_model(tiny_model_dir, attention=attention)
    assert model.config._attn_implementation == attention
    engine = HFEngine(model, tok)
    prompts = ["sort the digits =", "add one to each digit, then flip the order =", "x ="]  # ragged lengths
    for temperature in (1.0, 0.7, 0.0):
        groups = engine.generate(prompts, SamplingParams(temperature=temperature, max_new_tokens=12, n=3, seed=1))
        flat = [c for g in groups for c in g]
        assert len(groups) == 3 and all(len(g) == 3 for g in groups)
        batch = pad_batch([c.prompt_ids for c in flat], [c.token_ids for c in flat], tok.pad_token_id)
        with torch.no_grad():
            lp, _ = token_logprobs(model, batch, temperature if temperature > 0 else 1.0)
        for i, c in enumerate(flat):
            start = len(c.prompt_ids)
            fresh = lp[i, start : start + len(c.token_ids)]
            # Measured max 9.5e-7 (fp32, CPU, every kernel); the padded rows attending to their pads (a lost
            # mask) measured mean 0.1: 1e-5 tells rounding from a padding bug with room on both sides.
            assert torch.allclose(fresh, torch.tensor(c.logprobs), atol=1e-5), (temperature, i)
            assert c.finish_reason in ("stop", "length")
            if c.finish_reason == "length":
                assert len(c.token_ids) == 12
            else:
                assert c.token_ids[-1] == tok.eos_token_id


def test_seeded_sampling_is_reproducible_and_weights_update(tiny_model_dir):
    model, tok = load_model(tiny_model_dir)
    engine = HFEngine(model, tok)
    p = SamplingParams(temperature=1.0, max_new_tokens=8, n=2, seed=5)
    a = [c.token_ids for c in engine.generate(["sort ="], p)[0]]
    b = [c.token_ids for c in engine.generate(["sort ="], p)[0]]
    assert a == b
    state = {k: torch.zeros_like(v) for k, v in model.state_dict().items()}
    assert engine.update_weights(state, 7) == 7
    c = engine.generate(["sort ="], p)[0][0]
    assert c.weight_version == 7
    assert engine.health()["weight_version"] == 7


def test_concurrent_materialisation_never_exposes_a_partial_folder(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    from planact.config import TinyModelSpec
    from planact.models import materialize_tiny

    target = tmp_path / "m"
    with ThreadPoolExecutor(4) as pool:
        paths = list(
            pool.map(lambda _: materialize_tiny(TinyModelSpec(hidden_size=16, num_heads=2), target, 0), range(4))
        )
    assert set(paths) == {target}
    load_model(target)  # complete: config, weights and tokenizer
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # losers cleaned up


def test_attention_kernels_benchmark_tiny_mode():
    """benchmarks/attention_kernels.py --tiny: both kernels sample and train; engine and trainer logprobs agree."""
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run(
        [sys.executable, "benchmarks/attention_kernels.py", "--tiny"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    rows = [line.split() for line in out.stdout.splitlines() if line.split()[:1] in (["eager"], ["sdpa"])]
    assert [r[0] for r in rows] == ["eager", "sdpa"] and float(rows[0][2]) == 1.0
    assert all(float(r[5]) < 1e-4 for r in rows)  # max |engine lp - trainer lp|


def test_attention_is_a_validated_role_setting():
    from planact.config import ConfigError, validate_config

    # auto: eager on the CPU, sdpa on a GPU, varlen for packed micro-batches
    assert RunConfig().actor.resources.attention == "auto" and RunConfig().actor.attention_kernel == "eager"
    assert validate_config({"actor": {"resources": {"device": "cuda"}}}).actor.attention_kernel == "sdpa"
    assert validate_config({"actor": {"rl": {"packed": True}}}).actor.attention_kernel == "varlen"
    explicit = {"device": "cuda", "attention": "eager"}
    assert validate_config({"actor": {"resources": explicit}}).actor.attention_kernel == "eager"
    with pytest.raises(ConfigError, match="actor.resources.attention"):
        validate_config({"actor": {"resources": {"attention": "flash"}}})


def test_length_normalised_choice_removes_the_fewest_tokens_prior():
    """An untrained model scoring candidates by summed logprob picks the shortest almost surely (each token costs
    ~log(vocab) nats); scored by the mean it has no such prior (the AFlow optimizer's `scoring: mean`)."""
    from planact.config import TinyModelSpec
    from planact.models import build_tiny_model, build_tokenizer

    tok = build_tokenizer()
    model = build_tiny_model(
        TinyModelSpec(hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64), len(tok), 0, tok
    )
    engine = HFEngine(model, tok)
    cands = ["add plan", "template act prompt 2"]
    params = SamplingParams(temperature=1.0, n=1, seed=0)
    by_sum = engine.choose([("state:", cands)], params)[0][0].meta
    by_mean = engine.choose([("state:", cands)], params, length_normalise=True)[0][0].meta
    p_long = lambda meta: math.exp(meta["set_logprob"]) if meta["choice"] == 1 else 1 - math.exp(meta["set_logprob"])  # noqa: E731
    assert p_long(by_sum) < 1e-6 and 0.2 < p_long(by_mean) < 0.8


def test_choice_with_row_seeds_does_not_depend_on_the_batch():
    """One seed per request: a request draws the same candidate alone or batched with others (the AFlow flow runs
    each search alone in its own Ray task, the benchmark batches them)."""
    from planact.config import TinyModelSpec
    from planact.models import build_tiny_model, build_tokenizer

    tok = build_tokenizer()
    engine = HFEngine(
        build_tiny_model(
            TinyModelSpec(hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64), len(tok), 0, tok
        ),
        tok,
    )
    cands = ["add plan", "votes act 3", "votes act 5", "op act x"]
    reqs = [(f"state {i}:", cands) for i in range(6)]
    batched = [g[0].meta["choice"] for g in engine.choose(reqs, SamplingParams(row_seeds=list(range(6))), True)]
    alone = [engine.choose([r], SamplingParams(row_seeds=[i]), True)[0][0].meta["choice"] for i, r in enumerate(reqs)]
    assert batched == alone and len(set(batched)) > 1
    same_seed = [g[0].meta["choice"] for g in engine.choose([reqs[0]] * 6, SamplingParams(row_seeds=[7] * 6), True)]
    assert len(set(same_seed)) == 1


@pytest.mark.parametrize("attention", ["eager", "sdpa", "varlen"])
def test_candidate_scoring_with_a_shared_prefix_equals_scoring_each_candidate(tiny_model_dir, attention):
    """The prompt is computed once and its cache shared; every candidate's token logprobs equal a full
    forward pass of prompt + candidate within 1e-4 (uneven lengths, batches split by max_batch)."""
    torch.manual_seed(0)
    model, tok = load_model(tiny_model_dir, attention=attention)
    engine = HFEngine(model, tok, max_batch=2)
    prompt = "sort it, then rev>inc " * 12
    # the last two share their opening tokens: those join the prefix computed once
    cands = ["inc", "rev>inc then sort", "sort", "then rev it, then sort it inc"]
    shared = engine.score_candidates(prompt, cands, temperature=0.7)
    p_ids = engine.encode(prompt)
    for c, got in zip(cands, shared):
        ids = tok.encode(c, add_special_tokens=False) + [tok.eos_token_id]
        lp, _ = token_logprobs(model, pad_batch([p_ids], [ids], tok.pad_token_id), 0.7)
        want = lp[0, len(p_ids) : len(p_ids) + len(ids)].tolist()
        assert len(got) == len(want) and max(abs(a - b) for a, b in zip(got, want)) < 1e-4


def test_an_instruct_tokenizer_wraps_the_prompt_in_its_chat_template(tiny_model_dir):
    from planact.engines.base import encode_prompt

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    plain = encode_prompt(tok, "sort it")
    assert plain[0] == tok.bos_token_id  # planact's tiny models: BOS + the prompt
    # a template in the tiny vocabulary's own words: the user's turn, then the assistant's cue
    tok.chat_template = "{% for m in messages %}{{ m['content'] }}, then {% endfor %}inc"
    wrapped = encode_prompt(tok, "sort it")
    assert tok.decode(wrapped) == "sort it, then inc" and wrapped != plain
    # raw: text to continue (a file's code), the template left out
    assert tok.decode(encode_prompt(tok, "sort it", raw=True)) == "sort it"


def test_choose_over_a_long_prompt_shares_it_and_matches_the_trainers_logprobs(tiny_model_dir):
    """choose() computes a long prompt once (and the candidates' common opening tokens with it); every
    chosen completion's logprobs still equal the trainer's recomputation of prompt + candidate."""
    model, tok = load_model(tiny_model_dir)
    engine = HFEngine(model, tok)
    prompt = "sort it, then rev>inc " * 12
    cands = ["sort it then inc", "sort it then rev", "sort it, inc", "rev"]
    (comps,) = engine.choose([(prompt, cands)], SamplingParams(temperature=1.0, n=6, seed=2))
    assert len(engine.encode(prompt)) >= 128  # the shared path
    for c in comps:
        lp, _ = token_logprobs(model, pad_batch([c.prompt_ids], [c.token_ids], tok.pad_token_id), 1.0)
        want = lp[0, len(c.prompt_ids) :].tolist()
        assert max(abs(a - b) for a, b in zip(c.logprobs, want)) < 1e-4
