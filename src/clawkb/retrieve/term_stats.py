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
    from clawkb.index.segment import Segment
    from clawkb.retrieve.source import RestrictedStats, TermCounts

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


#: Per index: (segments and write stamp, terms) -> sorted chunk ids holding any of
#: them, or None once asked (built on the second ask).
_HOLDERS: weakref.WeakKeyDictionary[Any, dict[tuple[object, ...], np.ndarray | None]] = (
    weakref.WeakKeyDictionary()
)


#: :func:`holders`' memo entry for terms it cannot answer for.
_MIXED = np.empty(0, np.int64)


def holders(lexical: RestrictedStats, terms: Sequence[str]) -> np.ndarray | None:
    """Sorted chunk ids of the live passages holding any of ``terms`` (None: an index
    that cannot list them). Kept until the index changes (its segments, or a write
    applied to them: deletes clear live bits): one pass over the terms' postings
    answers every later membership question about them, where a search restricted
    to a few chunk ids still walks those postings, at a hundred thousand chunks
    a few milliseconds for the commonest Chinese characters. Building the list costs
    about two such searches, so the first ask of an index state returns None (the
    caller searches as before: a one-off search pays nothing more) and the second
    builds it."""
    segments = getattr(lexical, "segments", None)
    if segments is None or not all(hasattr(s, "query_postings") for s in segments):
        return None
    stamp = (tuple(s.name for s in segments), getattr(lexical, "generation", None),
             getattr(lexical, "applied_seq", None))  # fmt: skip
    memo = _HOLDERS.get(lexical)
    if memo is None or next(iter(memo), (stamp,))[0] != stamp:
        memo = {}
        _HOLDERS[lexical] = memo
    key = (stamp, tuple(terms))
    if key not in memo:
        memo[key] = None
        return None
    got = memo[key]
    if got is None:
        # a term no passage scores above 0 (kept as _MIXED): the search decides
        got = _live_holders(lexical, segments, list(dict.fromkeys(terms)))
        got = memo[key] = _MIXED if got is None else got
    return None if got is _MIXED else got


def holding(lexical: RestrictedStats, term: str, ids: np.ndarray) -> set[int] | None:
    """The chunk ids among ``ids`` whose live passage holds ``term`` (None: an index
    that cannot list them): what a search for ``term`` restricted to ``ids`` finds,
    read from the term's postings alone, where that search also walks a mask over
    every chunk of each segment."""
    segments = getattr(lexical, "segments", None)
    if segments is None or not all(hasattr(s, "query_postings") for s in segments):
        return None
    have = _live_holders(lexical, segments, [term])
    if have is None:  # IDF <= 0 (more postings than live passages): no score above 0
        return set()
    return set(ids[among(ids, have)].tolist())


def among(ids: np.ndarray, sorted_ids: np.ndarray) -> np.ndarray:
    """Boolean mask of ``ids`` found in ``sorted_ids`` (sorted ascending)."""
    if not len(sorted_ids):
        return np.zeros(len(ids), bool)
    pos = np.minimum(np.searchsorted(sorted_ids, ids), len(sorted_ids) - 1)
    return np.asarray(sorted_ids[pos] == ids)


def _live_holders(
    lexical: RestrictedStats, segments: Sequence[Segment], terms: list[str]
) -> np.ndarray | None:
    """Sorted chunk ids of the live passages with a posting of any of ``terms`` that
    a search scores above 0 (a field weighted 0 adds nothing); None when a term's
    IDF is not above 0 (its document frequency counts the postings of deleted
    passages, the passage count does not): a search's sign then depends on the mix."""
    hashes = hash_terms(terms)
    if (np.asarray(lexical.idf(lexical.doc_freqs(hashes))) <= 0).any():
        return None
    params = getattr(lexical, "params", None)
    weights = np.asarray(params.weights if params is not None else (1.0,), np.float32)
    parts = [np.empty(0, np.int64)]
    for seg in segments:
        ranges, _, first = seg.lookup(hashes, blocks=True)
        if not (ranges[1::2] > ranges[0::2]).any():
            continue
        docs, tfs, local = seg.query_postings(ranges, first)
        mine = np.zeros(len(seg.chunk_ids), np.uint8)  # a mask: postings may repeat a doc
        for j in range(len(hashes)):
            s, e = int(local[2 * j]), int(local[2 * j + 1])
            if len(weights) == tfs.shape[1] and not (weights > 0).all():
                mine[docs[s:e][tfs[s:e] @ weights > 0]] = 1
            else:
                mine[docs[s:e]] = 1
        mine &= seg.live
        parts.append(np.asarray(seg.chunk_ids[mine.view(bool)], np.int64))
    ids = np.sort(np.concatenate(parts))
    if len(ids) > 1:  # a passage holding several of the terms, once
        ids = ids[np.concatenate(([True], ids[1:] != ids[:-1]))]
    return ids
