"""clawkb tokens written as ASCII words that every Milvus analyzer keeps whole.

Milvus Lite offers only the ``standard`` and ``jieba`` analyzers, which would
cut CJK text and identifiers differently from :func:`clawkb.text.tokenize`.
So each clawkb token becomes one surrogate word: the token's 64-bit term hash
(the same hash the local index uses) as 16 letters ``a``–``p`` (one letter
per 4 bits). A word of lowercase letters only is a single token under
Unicode word segmentation, unchanged by lowercasing, and no stop word, so
Milvus's BM25 sees exactly clawkb's tokens, documents and queries alike.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from clawkb.index.segment import hash_terms

WIDTH = 16
_SHIFTS = np.arange(WIDTH - 1, -1, -1, dtype=np.uint64) * np.uint64(4)


def encode(tokens: Sequence[str]) -> list[str]:
    """One surrogate word per token, in order (duplicates kept: they are term frequency)."""
    if not tokens:
        return []
    h = hash_terms(list(tokens))
    nibbles = (h[:, None] >> _SHIFTS[None, :]) & np.uint64(15)
    letters = (nibbles.astype(np.uint8) + ord("a")).tobytes()
    return [letters[i : i + WIDTH].decode("ascii") for i in range(0, len(letters), WIDTH)]


def decode_word(word: str) -> int:
    """The term hash a surrogate word stands for."""
    if len(word) != WIDTH or not all("a" <= c <= "p" for c in word):
        raise ValueError(f"not a surrogate word: {word!r}")
    value = 0
    for c in word:
        value = (value << 4) | (ord(c) - ord("a"))
    return value


def surrogate_text(tokens: Sequence[str], max_chars: int = 65000) -> str:
    """The VARCHAR value fed to the BM25 function (cut at ``max_chars``, whole words)."""
    words = encode(tokens)
    limit = max_chars // (WIDTH + 1)
    return " ".join(words[:limit])


def glossary(tokens: Sequence[str]) -> dict[str, str]:
    """Surrogate word → token, to explain a lexical match in clawkb's own terms."""
    return dict(zip(encode(tokens), tokens, strict=True))
