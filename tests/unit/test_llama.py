"""planact's own Llama and tiny-model tokenizer compute exactly what transformers does on the same checkpoint,
and loading a tiny model no longer imports transformers (the ~5 CPU-s every role agent paid)."""

import copy
import random
import string
import subprocess
import sys

import pytest
import torch
from transformers import AutoTokenizer

from planact import llama
from planact.config import RLConfig
from planact.engines.base import SamplingParams
from planact.engines.hf import HFEngine
from planact.models import load_model
from planact.rl.logprobs import make_batch, token_logprobs
from planact.rl.trainer import RoleTrainer
from planact.tokenizer import TinyTokenizer


def _pair(folder, attention):
    """The same checkpoint loaded by planact.llama and by transformers."""
    ours, tok = load_model(folder, attention=attention)
    theirs, _ = load_model(folder, attention=attention, native=False)
    assert isinstance(ours, llama.LlamaForCausalLM) and not isinstance(theirs, llama.LlamaForCausalLM)
    return ours, theirs, tok


@pytest.mark.parametrize("attention", ["eager", "sdpa", "varlen"])
def test_logits_cache_and_gradients_equal_transformers(tiny_model_dir, attention):
    ours, theirs, _ = _pair(tiny_model_dir, attention)
    torch.manual_seed(0)
    B, L = 3, 12
    ids = torch.randint(4, 40, (B, L))
    attn = torch.ones(B, L, dtype=torch.long)
    attn[0, :5] = attn[1, :2] = 0  # left padding, as the engine batches prompts
    pos = (attn.cumsum(-1) - 1).clamp(min=0)
    a = theirs(input_ids=ids, attention_mask=attn, position_ids=pos, use_cache=True)
    b = ours(input_ids=ids, attention_mask=attn, position_ids=pos, use_cache=True)
    real = attn.bool()
    assert torch.equal(a.logits[real], b.logits[real])
    assert torch.isfinite(b.logits).all()  # padding positions too: their rows are summed over by entropy
    # A decoding step on the cache.
    step = torch.randint(4, 40, (B, 1))
    attn2 = torch.cat([attn, torch.ones(B, 1, dtype=torch.long)], 1)
    a2 = theirs(input_ids=step, attention_mask=attn2, position_ids=pos[:, -1:] + 1, use_cache=True, cache=a.cache)
    b2 = ours(input_ids=step, attention_mask=attn2, position_ids=pos[:, -1:] + 1, use_cache=True, cache=b.cache)
    assert torch.equal(a2.logits, b2.logits)
    # A packed training row (three samples end to end), the trainer's call: each sample attends within itself.
    row, packed = torch.randint(4, 40, (1, 12)), torch.tensor([[0, 1, 2, 3, 0, 1, 2, 0, 1, 2, 3, 4]])
    kw = {"input_ids": row, "position_ids": packed, "use_cache": False}
    assert torch.equal(theirs(**kw).logits, ours(**kw).logits)
    alone = torch.cat([ours(input_ids=row[:, i:j]).logits for i, j in ((0, 4), (4, 7), (7, 12))], 1)
    assert torch.allclose(ours(**kw).logits, alone, atol=1e-5)
    # Gradients of every parameter, under the same names.
    theirs(**kw).logits.logsumexp(-1).sum().backward()
    ours(**kw).logits.logsumexp(-1).sum().backward()
    grads = dict(theirs.named_parameters())
    assert grads.keys() == dict(ours.named_parameters()).keys()
    for name, p in ours.named_parameters():
        assert torch.equal(p.grad, grads[name].grad), name  # bit for bit: a step apart is a run apart


def test_a_sampled_pad_token_trains_the_same_as_transformers(tiny_model_dir):
    # The pad id is in the vocabulary, so a policy can sample it as a real token (the demo's planner did in its
    # second RL round). transformers' embedding has padding_idx: that lookup gives the pad row no gradient.
    ours, theirs, tok = _pair(tiny_model_dir, "eager")
    pad = tok.pad_token_id
    samples = [
        {"prompt_ids": [1, 9, 12, 5], "token_ids": [22, pad, 22, 26, 2], "advantage": 1.0},
        {"prompt_ids": [1, 9, 12, 5, 7, 8], "token_ids": [17, 6, 2], "advantage": -1.0},
        {"prompt_ids": [1, 30], "token_ids": [pad, pad, 14, 2], "advantage": 0.5},
    ]
    batch, starts = make_batch([s["prompt_ids"] for s in samples], [s["token_ids"] for s in samples], pad)
    with torch.no_grad():  # what the engine recorded: the sampler/trainer check sees no gap
        lp, _ = token_logprobs(ours, batch)
    for (row, col), s in zip(starts, samples):
        s["logprobs"] = lp[row, col : col + len(s["token_ids"])].tolist()
    trained = []
    for model in (ours, theirs):
        trainer = RoleTrainer(model, pad, RLConfig(lr=1e-2, warmup_steps=0, num_minibatches=1), temperature=1.0)
        metrics = trainer.train_step(copy.deepcopy(samples))
        trained.append((metrics["grad_norm"], model.state_dict()))
    for name, weight in trained[1][1].items():  # before the fix: model.embed_tokens.weight, row `pad`
        assert torch.equal(trained[0][1][name], weight), name
    assert trained[0][0] == trained[1][0]  # the logged grad norm too


def test_the_engine_samples_and_scores_the_same_with_either_model(tiny_model_dir):
    ours, theirs, tok = _pair(tiny_model_dir, "eager")
    params = SamplingParams(temperature=1.0, max_new_tokens=10, n=3, seed=7)
    prompts = ["sort the digits =", "add one to each digit, then flip the order ="]
    got = [HFEngine(m, tok).generate(prompts, params) for m in (ours, theirs)]
    assert [[(c.token_ids, c.logprobs) for c in g] for g in got[0]] == [
        [(c.token_ids, c.logprobs) for c in g] for g in got[1]
    ]
    # A long prompt computed once and shared by every candidate (a copied, row-repeated cache).
    long_prompt = "sort the digits, then flip the order " * 5
    cands = ["sort", "sort it", "flip"]
    a, b = (HFEngine(m, tok).score_candidates(long_prompt, cands) for m in (ours, theirs))
    assert a == b


def test_a_checkpoint_saved_by_either_loads_in_the_other(tiny_model_dir, tmp_path):
    ours, theirs, tok = _pair(tiny_model_dir, "eager")
    with torch.no_grad():
        for p in ours.parameters():
            p.add_(0.01)  # a trained model: not the weights it was loaded with
    ours.save_pretrained(tmp_path / "ours")
    tok.save_pretrained(tmp_path / "ours")
    back, _ = load_model(tmp_path / "ours", native=False)
    row = torch.randint(4, 40, (1, 9))
    assert torch.equal(back(input_ids=row).logits, ours(input_ids=row).logits)
    again, tok2 = load_model(tmp_path / "ours")  # planact's own again: the marker survives a save
    assert isinstance(again, llama.LlamaForCausalLM) and torch.equal(
        again(input_ids=row).logits, ours(input_ids=row).logits
    )
    assert tok2.get_vocab() == tok.get_vocab()
    converted = llama.as_transformers(copy.deepcopy(ours))  # what LoRA's adapters wrap
    assert torch.equal(converted(input_ids=row).logits, ours(input_ids=row).logits)


def test_a_checkpoint_without_the_marker_loads_through_transformers(tiny_model_dir, tmp_path):
    import json
    import shutil

    folder = tmp_path / "foreign"
    shutil.copytree(tiny_model_dir, folder)
    cfg = json.loads((folder / "config.json").read_text())
    cfg.pop(llama.MARKER)
    (folder / "config.json").write_text(json.dumps(cfg))
    model, tok = load_model(folder)
    assert not isinstance(model, llama.LlamaForCausalLM) and not isinstance(tok, TinyTokenizer)


@pytest.mark.parametrize("kind", ["char", "bpe"])
def test_the_tiny_tokenizer_gives_transformers_ids_and_text(tiny_model_dir, tmp_path, kind):
    folder = tiny_model_dir
    if kind == "bpe":
        from planact.models import tiny_code_model

        folder = tiny_code_model(tmp_path / "bpe")
    ours, theirs = TinyTokenizer(folder), AutoTokenizer.from_pretrained(folder)
    assert len(ours) == len(theirs) and ours.get_vocab() == theirs.get_vocab()
    for name in ("pad", "bos", "eos", "unk"):
        assert getattr(ours, f"{name}_token_id") == getattr(theirs, f"{name}_token_id")
    rng = random.Random(0)
    for _ in range(300):
        text = "".join(rng.choice(string.printable + "éλ→") for _ in range(rng.randint(0, 40)))
        assert ours.encode(text, add_special_tokens=False) == theirs.encode(text, add_special_tokens=False)
        ids = [rng.randrange(len(ours)) for _ in range(rng.randint(0, 30))]
        for skip in (True, False):
            assert ours.decode(ids, skip_special_tokens=skip) == theirs.decode(ids, skip_special_tokens=skip)


def test_loading_a_tiny_model_does_not_import_transformers(tiny_model_dir):
    code = (
        "import sys; from planact.models import load_model; m, t = load_model(sys.argv[1], attention='varlen');"
        "m(input_ids=__import__('torch').tensor([[1, 5, 6]])); print(sorted(k for k in sys.modules if k.startswith('transformers')))"
    )
    out = subprocess.run([sys.executable, "-c", code, str(tiny_model_dir)], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
