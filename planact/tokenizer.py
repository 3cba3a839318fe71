"""The tokenizer of planact's own tiny models, read without transformers.

transformers' AutoTokenizer imports most of its model stack on the way (~4 CPU-s per process in 5.24); a
tiny model's tokenizer is a plain `tokenizers` file (tokenizer.json) plus its special tokens
(tokenizer_config.json), both as transformers wrote them, and this class reads those same files and gives
the same ids and text for them (tests compare the two). Real checkpoints keep transformers' tokenizers
(chat templates and the rest).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")
SPECIAL = ("pad", "bos", "eos", "unk")


class TinyTokenizer:
    """A `tokenizers.Tokenizer` with the named special tokens; the subset of transformers' tokenizer API
    planact calls (encode, decode, the special-token ids, len, save_pretrained)."""

    chat_template = None  # prompts are BOS + their tokens (planact.engines.base.encode_prompt)

    def __init__(self, folder: str | Path):
        from tokenizers import Tokenizer

        folder = Path(folder)
        # The files as read: a checkpoint saved later writes them unchanged, even if `folder` is gone by then.
        self.files = {name: (folder / name).read_bytes() for name in FILES if (folder / name).is_file()}
        self._tok = Tokenizer.from_str(self.files["tokenizer.json"].decode())
        cfg = json.loads(self.files["tokenizer_config.json"])
        for name in SPECIAL:
            token = cfg.get(f"{name}_token")
            setattr(self, f"{name}_token", token)
            setattr(self, f"{name}_token_id", self._tok.token_to_id(token) if token else None)

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        """The ids of `text` (its template adds no special tokens either way)."""
        return self._tok.encode(text, add_special_tokens=add_special_tokens).ids

    def decode(self, ids: Iterable[int], skip_special_tokens: bool = False) -> str:
        """The text of `ids`."""
        return self._tok.decode(list(ids), skip_special_tokens=skip_special_tokens)

    def __len__(self) -> int:
        return self._tok.get_vocab_size(with_added_tokens=True)

    def get_vocab(self) -> dict[str, int]:
        """Token -> id, special tokens included."""
        return self._tok.get_vocab(with_added_tokens=True)

    def convert_tokens_to_ids(self, tokens: str | list[str]) -> int | list[int] | None:
        """Id of a token (or of each of a list); None for a token not in the vocabulary."""
        if isinstance(tokens, str):
            return self._tok.token_to_id(tokens)
        return [self._tok.token_to_id(t) for t in tokens]

    def save_pretrained(self, out: str | Path) -> None:
        """The files this tokenizer was read from, into `out` (a checkpoint's folder)."""
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        for name, data in self.files.items():
            (out / name).write_bytes(data)
