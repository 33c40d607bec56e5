"""Top-k BM25F scoring of one segment: the native kernel, or numpy when it is absent.

Both implementations compute exactly the same function (a test checks it):
``score(d) = sum_t w_t * x * (k1 + 1) / (x + k1)`` with
``x = sum_f tf_f(t, d) * factor_f(d)`` and ``factor_f(d) = weight_f / B_f(d)``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

try:  # pragma: no cover - which branch runs depends on the build
    from clawkb.index import _bm25native as _native  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover
    _native = None

try:  # pragma: no cover
    from clawkb.index import _blockmax  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover
    _blockmax = None

NATIVE_AVAILABLE = _native is not None
#: True when the block-max kernel (_blockmax.c) is built.
BLOCKMAX_AVAILABLE = _blockmax is not None


def score_topk(
    docs: np.ndarray,
    tfs: np.ndarray,
    factor: np.ndarray,
    ranges: np.ndarray,
    weights: np.ndarray,
    live: np.ndarray | None,
    k1: float,
    k: int,
    *,
    use_native: bool = True,
) -> tuple[np.ndarray, np.ndarray, int]:
    """Return (local doc numbers, scores, number of docs matched) for the best ``k``.

    ``ranges`` is an int64 array ``[s0, e0, s1, e1, ...]`` of posting ranges, one
    pair per query term, aligned with float32 ``weights``. Results are sorted by
    descending score, ties by ascending doc number.
    """
    n_docs = factor.shape[0]
    if k <= 0 or len(weights) == 0 or n_docs == 0:
        return np.empty(0, np.int64), np.empty(0, np.float32), 0
    if use_native and _native is not None:
        out_docs = np.empty(k, np.int64)
        out_scores = np.empty(k, np.float32)
        n, matched = _native.score_topk(
            docs,
            tfs,
            factor,
            np.ascontiguousarray(ranges, np.int64),
            np.ascontiguousarray(weights, np.float32),
            live,
            float(k1),
            int(n_docs),
            out_docs,
            out_scores,
        )
        return out_docs[:n], out_scores[:n], int(matched)
    return _score_numpy(docs, tfs, factor, ranges, weights, live, k1, k)


def _score_numpy(
    docs: np.ndarray,
    tfs: np.ndarray,
    factor: np.ndarray,
    ranges: np.ndarray,
    weights: np.ndarray,
    live: np.ndarray | None,
    k1: float,
    k: int,
) -> tuple[np.ndarray, np.ndarray, int]:
    acc = np.zeros(factor.shape[0], np.float32)
    seen = np.zeros(factor.shape[0], bool)
    kp1 = np.float32(k1 + 1.0)
    fk1 = np.float32(k1)
    for t in range(len(weights)):
        s, e = int(ranges[2 * t]), int(ranges[2 * t + 1])
        if e <= s:
            continue
        d = docs[s:e]
        tf = tfs[s:e].astype(np.float32)
        x = (tf * factor[d]).sum(axis=1, dtype=np.float32)
        pos = x > 0
        d, x = d[pos], x[pos]
        acc[d] += np.float32(weights[t]) * x * kp1 / (x + fk1)
        seen[d] = True
    matched = int(seen.sum())
    if live is not None:
        seen &= live.astype(bool)
    cand = np.flatnonzero(seen)
    if cand.size == 0:
        return np.empty(0, np.int64), np.empty(0, np.float32), matched
    sc = acc[cand]
    order = np.lexsort((cand, -sc))[:k]
    return cand[order].astype(np.int64), sc[order], matched


def score_topk_pruned(
    docs: np.ndarray,
    tfs: np.ndarray,
    factor: np.ndarray,
    ranges: np.ndarray,
    weights: np.ndarray,
    upper: np.ndarray,
    live: np.ndarray | None,
    k1: float,
    k: int,
    theta0: float = 0.0,
) -> tuple[np.ndarray, np.ndarray, int, np.ndarray]:
    """Exact top-k like :func:`score_topk`, skipping work that cannot matter.

    Terms must come sorted by ``upper`` (an upper bound of each term's score
    contribution), largest first. ``theta0`` is a score some k docs elsewhere
    already reach. Returns (docs, scores, matched or -1 when pruning stopped
    counting, largest x per fully scanned term or -1).
    """
    n_terms = len(weights)
    if _native is None or k <= 0 or n_terms == 0 or factor.shape[0] == 0:
        local, sc, m = score_topk(docs, tfs, factor, ranges, weights, live, k1, k)
        return local, sc, m, np.full(n_terms, -1.0, np.float32)
    out_docs = np.empty(k, np.int64)
    out_scores = np.empty(k, np.float32)
    out_maxx = np.empty(n_terms, np.float32)
    n, touched, scanned = _native.score_topk_pruned(
        docs,
        tfs,
        factor,
        np.ascontiguousarray(ranges, np.int64),
        np.ascontiguousarray(weights, np.float32),
        np.ascontiguousarray(upper, np.float32),
        live,
        float(k1),
        int(factor.shape[0]),
        out_docs,
        out_scores,
        out_maxx,
        float(theta0),
    )
    matched = int(touched) if scanned == n_terms else -1
    return out_docs[:n], out_scores[:n], matched, out_maxx


def score_topk_blockmax(
    packed: dict[str, np.ndarray],
    factor: np.ndarray,
    ranges: np.ndarray,
    first_blocks: np.ndarray,
    blocks: dict[str, np.ndarray],
    weights: np.ndarray,
    live: np.ndarray | None,
    params: np.ndarray,
    k1: float,
    k: int,
    theta0: float = 0.0,
) -> tuple[np.ndarray, np.ndarray, int]:
    """Exact top-k like :func:`score_topk` by block-max MaxScore (``_blockmax.c``).

    ``packed`` holds the segment's bit-packed postings (:mod:`clawkb.index.packing`;
    only blocks that cannot be skipped are decoded), ``first_blocks`` each
    term's first block number, ``blocks`` the
    segment's block arrays, ``params`` float32 ``[weight x3, b x3, avg len x3]``
    and ``theta0`` a score k docs elsewhere already reach (docs below it are
    skipped). Weights must be positive. Returns (local doc numbers, scores,
    number of docs scored in full), the last for measuring the pruning.
    """
    if _blockmax is None:
        raise RuntimeError("the block-max kernel is not built")
    out_docs = np.empty(max(k, 0), np.int64)
    out_scores = np.empty(max(k, 0), np.float32)
    n, scored = _blockmax.topk(
        packed["packed"],
        packed["blk_pos"],
        packed["blk_last"],
        factor,
        np.ascontiguousarray(ranges, np.int64),
        np.ascontiguousarray(first_blocks, np.int64),
        blocks["blk_maxtf"],
        blocks["blk_minlen"],
        np.ascontiguousarray(weights, np.float32),
        live,
        np.ascontiguousarray(params, np.float32),
        float(k1),
        int(factor.shape[0]),
        out_docs,
        out_scores,
        float(theta0),
    )
    return out_docs[:n], out_scores[:n], int(scored)


def member_cache(
    n_docs: int,
    budget: int,
    density: int,
    stored: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
) -> object | None:
    """A cache of membership bitmaps for one segment of ``n_docs`` docs
    (``_blockmax.member_cache``): passed as a segment's 15th item to
    :func:`search_segments`, the kernel gives each list of at least
    ``n_docs / density`` postings a bitmap while their bytes stay within
    ``budget``; None when the kernel is not built. ``stored``: the segment's
    own bitmaps (keys, bits, rank, as :func:`member_bitmaps` makes them),
    used as they are; their bytes count against ``budget``, so the kernel
    builds others only while stored and built bitmaps together fit."""
    if _blockmax is None:
        return None
    if stored is None:
        return _blockmax.member_cache(n_docs, budget, density)
    return _blockmax.member_cache(n_docs, budget, density, *stored)


def member_words(n_docs: int) -> int:
    """64-bit words of one membership bitmap of a segment of ``n_docs`` docs."""
    return (n_docs + 63) // 64 + 1


def member_bitmaps(
    packed: dict[str, np.ndarray], keys: np.ndarray, n_docs: int
) -> tuple[np.ndarray, np.ndarray] | None:
    """(bits uint64, rank uint32), one row of :func:`member_words` per list of
    ``keys`` (int64 [L, 3]: first posting, end, first block), decoded from the
    packed postings by the kernel; None when it is not built. ValueError on
    damaged postings."""
    if _blockmax is None:
        return None
    words = member_words(n_docs)
    bits = np.empty((len(keys), words), np.uint64)
    rank = np.empty((len(keys), words), np.uint32)
    _blockmax.member_bitmaps(
        packed["packed"],
        packed["blk_pos"],
        packed["blk_last"],
        np.ascontiguousarray(packed["blk_maxtf"]),
        np.ascontiguousarray(keys, np.int64),
        n_docs,
        bits,
        rank,
    )
    return bits, rank


def member_stats(cache: object) -> tuple[int, int, int]:
    """(lists given a bitmap at query time, bytes of all its bitmaps, lists
    whose bitmap the segment stores) of a :func:`member_cache`."""
    if _blockmax is None or cache is None:
        return 0, 0, 0
    n, size, stored = _blockmax.member_stats(cache)
    return int(n), int(size), int(stored)


def search_segments(
    segs: list[tuple[Any, ...]],
    hashes: np.ndarray,
    qweights: np.ndarray,
    params: np.ndarray,
    k1: float,
    n_live: int,
    k: int,
    *,
    exact_bounds: bool = True,
    field_major: bool = False,
    path: int = 0,
) -> tuple[np.ndarray, np.ndarray] | None:
    """A whole query in one native call (``_blockmax.search``): term lookup in
    every segment, idf, and block-max top-k over all segments with one heap.

    ``segs`` are ``(terms, dfs, dict_index, packed, blk_pos, blk_last,
    blk_maxtf, blk_minlen, factor, live or None, chunk_ids)`` tuples, biggest
    segment first, optionally followed by a float32 block cache (one slot per
    block, zeros at first): the kernel keeps there each block's bound once
    computed, the exact one with ``exact_bounds``, else the max-tf/min-length
    one. ``field_major``: every ``factor`` is float32 [3, N] (one field's
    factors together) instead of [N, 3]: same scores, fewer cache lines
    read. Returns (chunk ids, scores) sorted by descending score, ties
    by ascending chunk id, or None when a term's weight is not positive (the
    general path handles that case). ``path``: how each segment is scored, 0
    chosen by the kernel from the query's postings against the segment's
    docs, 1 block-max, 2 term at a time into a dense accumulator (same scores,
    bit for bit: tests force each).
    """
    if _blockmax is None:
        raise RuntimeError("the block-max kernel is not built")
    out_ids = np.empty(max(k, 0), np.int64)
    out_scores = np.empty(max(k, 0), np.float32)
    n = _blockmax.search(
        segs,
        np.ascontiguousarray(hashes, np.uint64),
        np.ascontiguousarray(qweights, np.float64),
        params,
        float(k1),
        int(n_live),
        out_ids,
        out_scores,
        exact_bounds,
        field_major,
        path,
    )
    if n < 0:
        return None
    return out_ids[:n], out_scores[:n]
