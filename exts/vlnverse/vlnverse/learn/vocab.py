"""Instruction tokenizer and vocabulary (built from the training instructions; saved in checkpoints)."""
from __future__ import annotations

import re
from collections import Counter
from typing import Any, Iterable

import numpy as np

from ..core.errors import ConfigError

PAD, UNK = "<pad>", "<unk>"
PAD_ID, UNK_ID = 0, 1
_TOKEN = re.compile(r"[a-z0-9]+(?:'[a-z]+)?|[^\sa-z0-9]")


def tokenize(text: str) -> list[str]:
    """Lower-cased words (with their apostrophe suffix) and punctuation marks."""
    return _TOKEN.findall(str(text).lower())


class Vocabulary:
    """Word ↔ index table; index 0 is padding, 1 is UNK (any word not seen in training)."""

    def __init__(self, words: Iterable[str]):
        self.words = [PAD, UNK] + [w for w in words if w not in (PAD, UNK)]
        self.index = {w: i for i, w in enumerate(self.words)}
        if len(self.index) != len(self.words):
            raise ConfigError("duplicate words in vocabulary", field="vocab", expected="unique words")

    @classmethod
    def build(cls, texts: Iterable[str], min_count: int = 1) -> "Vocabulary":
        """The words occurring at least ``min_count`` times in ``texts``, most frequent first (ties alphabetical)."""
        counts = Counter(tok for text in texts for tok in tokenize(text))
        words = sorted((w for w, c in counts.items() if c >= min_count), key=lambda w: (-counts[w], w))
        return cls(words)

    def __len__(self) -> int:
        return len(self.words)

    def encode(self, text: str, max_length: int) -> np.ndarray:
        """Token ids (int64, length ``max_length``; truncated, zero-padded); unknown words → UNK."""
        ids = [self.index.get(t, UNK_ID) for t in tokenize(text)][:max_length]
        out = np.zeros(max_length, dtype=np.int64)
        out[:len(ids)] = ids
        if not ids:  # an empty instruction still has one (UNK) token for the encoder to read
            out[0] = UNK_ID
        return out

    def decode(self, ids: Iterable[int]) -> list[str]:
        """Words of ``ids`` (padding dropped)."""
        return [self.words[i] if 0 <= i < len(self.words) else UNK for i in ids if i != PAD_ID]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (stored in checkpoints)."""
        return {"words": self.words[2:]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Vocabulary":
        """Inverse of ``to_dict``."""
        return cls(data["words"])
