"""HF engine: logprobs match a fresh forward pass; finish reasons; weight versions; Auto* loading."""

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
    from planact.workers import initial_model_path

    cfg = RunConfig(checkpoint={"root": str(tmp_path)})
    sizes = {r: param_count(load_model(initial_model_path(cfg, r))[0]) for r in ("planner", "actor")}
    assert sizes["planner"] > sizes["actor"]


def test_sampled_logprobs_equal_fresh_forward(tiny_model_dir):
    torch.manual_seed(0)
    model, tok = load_model(tiny_model_dir)
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
            assert torch.allclose(fresh, torch.tensor(c.logprobs), atol=1e-4), (temperature, i)
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
        paths = list(pool.map(lambda _: materialize_tiny(TinyModelSpec(hidden_size=16, num_heads=2), target, 0), range(4)))
    assert set(paths) == {target}
    load_model(target)  # complete: config, weights and tokenizer
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # losers cleaned up
