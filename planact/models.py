"""Tiny-model factory and the loader shared with real checkpoints.

No weights can be downloaded here, so the embedded default builds a small
Llama-style model and a character tokenizer locally with transformers and saves
both with `save_pretrained`, in the files a real Hugging Face checkpoint has.
`load_model` reads any checkpoint; one of these tiny models it reads with
planact's own Llama and tokenizer (planact.llama, planact.tokenizer: the same
outputs, without transformers' ~5 CPU-s import in every process that loads one).
"""

from __future__ import annotations

import json
import os
import shutil
import string
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from planact import llama
from planact.role_config import TinyModelSpec

# transformers is imported where it is needed: loading one of planact's own tiny models does not need it,
# and its model stack costs ~5 CPU-s in every process that imports it (planact.llama).
if TYPE_CHECKING:
    from transformers import LlamaForCausalLM, PreTrainedTokenizerFast

SPECIAL = ["<pad>", "<bos>", "<eos>", "<unk>"]
# Every character the Plan/Act prompts and answers use; anything else maps to <unk>.
CHARSET = string.ascii_lowercase + string.digits + " ,.:;|>-'()"


def _transformers():
    """The transformers package, quiet: per-shard progress bars from every Ray worker drown the run's output."""
    import transformers
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    return transformers


def build_tokenizer() -> PreTrainedTokenizerFast:
    """A character-level fast tokenizer with a pad token distinct from EOS."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers

    vocab = {tok: i for i, tok in enumerate(SPECIAL + list(CHARSET))}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    tok.decoder = decoders.Fuse()
    return _transformers().PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="<pad>", bos_token="<bos>", eos_token="<eos>", unk_token="<unk>"
    )


def build_bpe_tokenizer(texts: list[str], vocab_size: int) -> PreTrainedTokenizerFast:
    """A byte-level BPE tokenizer trained here on `texts` (for code: a function fits in a tiny model's context)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL,
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(texts, trainer=trainer)
    return _transformers().PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="<pad>", bos_token="<bos>", eos_token="<eos>", unk_token="<unk>"
    )


def build_tiny_model(
    spec: TinyModelSpec, vocab_size: int, seed: int, tokenizer: PreTrainedTokenizerFast
) -> LlamaForCausalLM:
    """A small Llama causal LM with its special-token ids wired from the tokenizer (marked as one planact's own
    Llama loads: planact.llama)."""
    transformers = _transformers()
    cfg = transformers.LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=spec.hidden_size,
        intermediate_size=spec.intermediate_size,
        num_hidden_layers=spec.num_layers,
        num_attention_heads=spec.num_heads,
        num_key_value_heads=spec.num_heads,
        max_position_embeddings=spec.max_positions,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        attn_implementation="eager",
        **{llama.MARKER: True},
    )
    torch.manual_seed(seed)
    return transformers.LlamaForCausalLM(cfg)


def materialize_tiny(
    spec: TinyModelSpec, out_dir: str | Path, seed: int, texts: Callable[[], list[str]] | None = None
) -> Path:
    """Build and save a tiny model + tokenizer to `out_dir` once, safely under concurrent callers.

    Engine replicas start at the same time and may all build it: each saves into its own temporary
    folder and renames it into place; the first rename wins, so nobody ever reads a half-written folder.
    """
    out = Path(out_dir)
    if out.is_dir():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}."))
    if spec.tokenizer == "bpe":
        if texts is None:
            raise ValueError("a bpe tokenizer needs training text: the environment supplies it (env.kind repair)")
        tokenizer = build_bpe_tokenizer(texts(), spec.vocab_size)
    else:
        tokenizer = build_tokenizer()
    build_tiny_model(spec, len(tokenizer), seed, tokenizer).save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    try:
        os.rename(tmp, out)
    except OSError:  # another process got there first; its copy is identical (same spec and seed)
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def load_model(
    path: str | Path, device: str = "cpu", attention: str = "eager", native: bool = True
) -> tuple[torch.nn.Module, PreTrainedTokenizerFast]:
    """Load a causal LM and tokenizer by path: the same call for tiny and real checkpoints.

    `attention` ('eager' | 'sdpa' | 'varlen') must be the same wherever a role's model is loaded: its engine's
    sampling log-probabilities and its trainer's must come from the same kernel. One of planact's own tiny
    models loads as planact.llama's Llama (same files, same outputs, no transformers import) unless `native`
    is False (LoRA: peft wraps transformers' classes); anything else loads through transformers. A LoRA
    checkpoint's folder (adapter only) loads its base and applies the adapter.
    """
    from planact.lora import base_of, is_adapter_folder, resolve_base

    if is_adapter_folder(path):  # a LoRA checkpoint: its base loaded as configured, the adapter over it
        from peft import PeftModel

        base, tokenizer = load_model(resolve_base(base_of(path)), device, attention, native=False)
        if (Path(path) / "tokenizer_config.json").is_file():
            tokenizer = _transformers().AutoTokenizer.from_pretrained(str(path))
        # trainable: a role may go on training the adapter it starts from (model_path = a LoRA checkpoint)
        return PeftModel.from_pretrained(base, str(path), is_trainable=True).to(device), tokenizer
    config = Path(path) / "config.json"
    own = native and config.is_file() and llama.supports(json.loads(config.read_text()))
    if own:
        from planact.tokenizer import TinyTokenizer

        tokenizer = TinyTokenizer(path)
    else:
        tokenizer = _transformers().AutoTokenizer.from_pretrained(str(path))
    if tokenizer.pad_token_id is None or tokenizer.pad_token_id == tokenizer.eos_token_id:
        raise ValueError(f"{path}: the tokenizer needs a pad token distinct from EOS (logprob alignment depends on it)")
    if own:
        return llama.LlamaForCausalLM.from_pretrained(path, attention).to(device), tokenizer
    if attention == "varlen":
        import planact.rl.varlen  # noqa: F401  (registers the attention with transformers)
    model = _transformers().AutoModelForCausalLM.from_pretrained(
        str(path), dtype=torch.float32, attn_implementation=attention
    )
    return model.to(device), tokenizer


def param_count(model: torch.nn.Module, trainable_only: bool = False) -> int:
    """Number of parameters (tied weights counted once); with `trainable_only`, those an optimizer updates."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad or not trainable_only)


def tiny_code_model(out_dir: str | Path) -> Path:
    """A tiny untrained Llama with a BPE tokenizer fitted to a standard-library module: what a benchmark's
    tiny mode runs its model path on (its outputs are noise; only the path is exercised)."""
    import inspect
    import textwrap

    spec = TinyModelSpec(tokenizer="bpe", vocab_size=400, max_positions=512)
    return materialize_tiny(spec, out_dir, seed=0, texts=lambda: [Path(inspect.getsourcefile(textwrap)).read_text()])
