"""The model-free token estimate that sizes chunks, spreadsheet row blocks and
answer contexts: a CJK character is 0.7 token, a Latin word 1.3 tokens (more
for long identifiers, ~4 chars a token), punctuation half a token; 350 tokens
is therefore about 500 CJK characters. Weights are integers in tenths of a
token (:func:`weight`), so the chunker's packing arithmetic is exact.

It lives in ``text/`` because the parsers (:mod:`clawkb.parsers.sheet_table`),
the chunker (:mod:`clawkb.ingest.chunker`) and the answer context all need it;
``_chunknative.c`` is its hot path, ``_weight_python`` the reference and the
fallback without a compiler.
"""

from __future__ import annotations

import re
from collections.abc import Callable

#: The CJK ranges (``_chunknative.c`` keeps the same table).
CJK = (
    "\u3000-\u303f\u3040-\u30ff\u3100-\u312f\u3400-\u4dbf\u4e00-\u9fff"
    "\uac00-\ud7af\uf900-\ufaff\uff00-\uffef\U00020000-\U0003134f"
)
_CJK_CHAR = re.compile(rf"[{CJK}]")
_WORD = re.compile(rf"[^\W{CJK}]+")
_SYMBOL = re.compile(rf"[^\w\s{CJK}]")


def estimate_tokens(text: str) -> int:
    """Rough model-free token count (see the module docstring)."""
    return (weight(text) + 9) // 10


def _weight_python(text: str) -> int:
    """Token estimate in tenths of a token; sub-additive over concatenation.

    The reference (and the fallback without a C compiler): the three token
    classes counted with one ``findall`` each. The native ``weight`` gives the
    same numbers in one pass and without slicing the text.
    """
    words = _WORD.findall(text)
    long_words = sum((n * 5 + 1) // 2 for n in map(len, words) if n > 5)
    short_words = sum(1 for n in map(len, words) if n <= 5)
    return (
        7 * len(_CJK_CHAR.findall(text))
        + 13 * short_words
        + long_words
        + 5 * len(_SYMBOL.findall(text))
    )


def _weight_slice(text: str, start: int = 0, end: int | None = None) -> int:
    return _weight_python(text[start:end])


try:
    from clawkb.text._chunknative import weight as _native_weight
except ImportError:  # pragma: no cover - no compiler on this machine
    _native_weight = None

#: ``weight(text, start=0, end=len(text))``: the estimate of ``text[start:end]``
#: in tenths of a token (runs on every slice of every file).
weight: Callable[..., int] = _native_weight or _weight_slice
