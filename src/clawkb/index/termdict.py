"""The compact term dictionary of a segment (format 5).

Formats 3 and 4 kept, per term, its hash (8 bytes), its first posting (an
int64 offset) and its first block (a uint32): 20 bytes a term, and most terms
of a segment occur in one doc. Format 5 keeps the hashes (``terms.npy``) and
replaces the other two by what they are made of, the document frequency:

``dfs``         uint8 [T]        df of each term; 255 means "in the escapes"
``dict_index``  int64 [3 G + E]  per group of :data:`GROUP` terms, the first
                                 posting, first block and escape number of its
                                 first term; then the E escaped frequencies

A term's postings start at its group's first posting plus the frequencies of
the terms before it in the group (at most ``GROUP - 1`` bytes to add), and
its first block likewise with each frequency's block count: about 9.5 bytes a
term instead of 20. ``_dict.h`` does the same in C; the functions here are the
reference and serve the merges (which want whole offset arrays).
"""

from __future__ import annotations

import numpy as np

GROUP = 32
BLOCK = 128
ESCAPE = 255
ARRAYS = ("dfs", "dict_index")

try:  # pragma: no cover - which branch runs depends on the build
    from clawkb.index import _postings as _native  # type: ignore[attr-defined]

    _lookup = getattr(_native, "dict_lookup", None)
except ImportError:  # pragma: no cover
    _lookup = None


def encode(offsets: np.ndarray) -> dict[str, np.ndarray]:
    """``dfs`` and ``dict_index`` of a segment whose term ``i`` has postings
    ``offsets[i]:offsets[i + 1]`` (``offsets[0]`` is 0)."""
    offsets = np.asarray(offsets, np.int64)
    df = np.diff(offsets)
    escaped = df >= ESCAPE
    first = np.arange(0, len(df), GROUP)
    blocks = np.zeros(len(df) + 1, np.int64)
    np.cumsum((df + BLOCK - 1) // BLOCK, out=blocks[1:])
    esc = np.zeros(len(df) + 1, np.int64)
    np.cumsum(escaped, out=esc[1:])
    rows = np.stack([offsets[first], blocks[first], esc[first]], axis=1)
    return {
        "dfs": np.minimum(df, ESCAPE).astype(np.uint8),
        "dict_index": np.concatenate([rows.ravel(), df[escaped]]).astype(np.int64),
    }


def doc_freqs(dfs: np.ndarray, index: np.ndarray) -> np.ndarray:
    """int64 [T]: every term's document frequency."""
    df = np.asarray(dfs).astype(np.int64)
    n_groups = -(-len(df) // GROUP)
    escaped = df == ESCAPE
    df[escaped] = np.asarray(index[3 * n_groups :])
    return df


def n_postings(dfs: np.ndarray, index: np.ndarray) -> int:
    """Postings of all terms, from the last group alone."""
    if not len(dfs):
        return 0
    n_groups = -(-len(dfs) // GROUP)
    g = n_groups - 1
    run = np.asarray(dfs[g * GROUP :]).astype(np.int64)
    escaped = run == ESCAPE
    e = 3 * n_groups + int(index[3 * g + 2])
    run[escaped] = index[e : e + int(escaped.sum())]
    return int(index[3 * g]) + int(run.sum())


def offsets(dfs: np.ndarray, index: np.ndarray) -> np.ndarray:
    """int64 [T + 1]: the offsets formats 3 and 4 stored."""
    out = np.zeros(len(dfs) + 1, np.int64)
    np.cumsum(doc_freqs(dfs, index), out=out[1:])
    return out


def term_blocks(dfs: np.ndarray, index: np.ndarray) -> np.ndarray:
    """uint32 [T + 1]: blocks of term i are ``term_blocks[i]:term_blocks[i + 1]``."""
    out = np.zeros(len(dfs) + 1, np.int64)
    np.cumsum((doc_freqs(dfs, index) + BLOCK - 1) // BLOCK, out=out[1:])
    return out.astype(np.uint32)


def lookup(
    terms: np.ndarray, dfs: np.ndarray, index: np.ndarray, hashes: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(ranges [s, e, ...], doc freq, first block) per hashed query term; a
    term not in the dictionary gets an empty range and first block 0."""
    hashes = np.ascontiguousarray(hashes, np.uint64)
    if _lookup is not None:
        ranges = np.zeros(2 * len(hashes), np.int64)
        first = np.zeros(len(hashes), np.int64)
        _lookup(terms, dfs, index, hashes, ranges, first)
        return ranges, ranges[1::2] - ranges[0::2], first
    return _lookup_python(terms, dfs, index, hashes)


def _lookup_python(
    terms: np.ndarray, dfs: np.ndarray, index: np.ndarray, hashes: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    ranges = np.zeros(2 * len(hashes), np.int64)
    first = np.zeros(len(hashes), np.int64)
    n_terms = len(terms)
    if n_terms:
        pos = np.searchsorted(terms, hashes)
        n_groups = -(-n_terms // GROUP)
        for q, t in enumerate(pos.tolist()):
            if t >= n_terms or terms[t] != hashes[q]:
                continue
            g = t // GROUP
            s, b, e = (int(v) for v in index[3 * g : 3 * g + 3])
            run = np.asarray(dfs[g * GROUP : t + 1]).astype(np.int64)
            escaped = run == ESCAPE
            n_esc = int(escaped.sum())
            run[escaped] = index[3 * n_groups + e : 3 * n_groups + e + n_esc]
            ranges[2 * q] = s + int(run[:-1].sum())
            ranges[2 * q + 1] = ranges[2 * q] + int(run[-1])
            first[q] = b + int(((run[:-1] + BLOCK - 1) // BLOCK).sum())
    return ranges, ranges[1::2] - ranges[0::2], first
