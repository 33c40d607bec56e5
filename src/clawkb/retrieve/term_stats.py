"""Document frequencies of query terms, kept per index generation.

Scaling a query's glossary translations (:func:`clawkb.retrieve.crossling.balance`)
needs the document frequency of every query token: a dictionary lookup in
each segment, which at a hundred thousand chunks cost more than building the
hits. A term's frequency depends only on the segments the index holds, and
segments never change once written (deletes clear live bits, merges write new
segments under new names), so the value is kept per term until the set of
segments changes. Terms recur across queries: the glossary's translations,
the common words of a corpus.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from clawkb.index.segment import hash_terms

if TYPE_CHECKING:
    from clawkb.retrieve.source import TermCounts

#: Terms kept per index; past this the memo starts again (a bound, not an LRU).
MAX_TERMS = 200_000

_MEMO: weakref.WeakKeyDictionary[Any, tuple[tuple[str, ...], dict[str, int]]] = (
    weakref.WeakKeyDictionary()
)


def _known(lexical: TermCounts) -> dict[str, int] | None:
    """The memo of ``lexical``'s current segments (None: an index without segments)."""
    segments = getattr(lexical, "segments", None)
    if segments is None:
        return None
    key = tuple(s.name for s in segments)
    entry = _MEMO.get(lexical)
    if entry is None or entry[0] != key or len(entry[1]) > MAX_TERMS:
        entry = (key, {})
        _MEMO[lexical] = entry
    return entry[1]


def doc_freqs(lexical: TermCounts, terms: Sequence[str]) -> np.ndarray:
    """``lexical.doc_freqs`` of ``terms`` (int64, in order), looking up only unseen terms."""
    known = _known(lexical)
    if known is None:  # another engine (Milvus statistics): ask it each time
        return np.asarray(lexical.doc_freqs(hash_terms(list(terms))), np.int64)
    missing = [t for t in dict.fromkeys(terms) if t not in known]
    if missing:
        got = lexical.doc_freqs(hash_terms(missing))
        known.update(zip(missing, (int(d) for d in got), strict=True))
    return np.fromiter((known[t] for t in terms), np.int64, len(terms))
