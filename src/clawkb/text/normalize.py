"""Unicode normalisation shared by the tokenizer and anything that compares text.

Documents and queries must agree on what "the same text" means, whatever
keyboard or PDF extractor produced it: full-width ``ＳＴＭ３２`` and ``STM32``,
the ohm sign and the Greek capital omega, ``℃`` and ``°C``, ``Straße`` and
``STRASSE``. NFKC folds compatibility forms; case-folding then removes case
more thoroughly than ``lower()`` does.
"""

from __future__ import annotations

import unicodedata


def nfkc(text: str) -> str:
    """NFKC-normalise ``text``, skipping the work for text that already is.

    ``is_normalized`` is exact and, on CPython 3.11, tens of times cheaper than
    ``normalize`` on text that needs no change (most Chinese text without
    full-width punctuation, all ASCII).
    """
    if text.isascii() or unicodedata.is_normalized("NFKC", text):
        return text
    return unicodedata.normalize("NFKC", text)


def normalize(text: str) -> str:
    """NFKC, then case-fold: the canonical form for comparing text.

    Idempotent (``normalize(normalize(x)) == normalize(x)``), which the
    tokenizer tests rely on.
    """
    if text.isascii():
        return text.lower()
    return unicodedata.normalize("NFKC", text).casefold()
