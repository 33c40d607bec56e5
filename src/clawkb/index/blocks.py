"""Per-block score bounds of a segment's postings (for block-max top-k).

Every term's postings are cut into blocks of :data:`BLOCK` (the last one may
be shorter). For each block a segment keeps:

``blk_maxtf``    uint8  [B, 3]  largest term frequency per field in the block
``blk_minlen``   uint8  [B, 3]  smallest field length of a doc in the block, as
                                a one-byte code (:data:`LEN_OF_CODE`; format 5;
                                formats 3 and 4 stored uint16 lengths)
``term_blocks``  uint32 [T + 1] blocks of term i are ``term_blocks[i]:term_blocks[i+1]``

BM25F's pseudo-frequency ``x = sum_f tf_f * w_f / ((1 - b_f) + b_f * len_f / avg_f)``
grows with ``tf`` and shrinks with ``len``, so ``maxtf`` and ``minlen`` bound
every doc of the block for *any* average lengths and weights: the bounds stay
valid as the collection changes, and are stored once when a segment is written.
A block's last doc needs no array: it is the posting at the block's end.

Length codes: code ``c`` stands for ``LEN_OF_CODE[c]``, exact below 96, then
growing by at most 1/28 (3.6 %) a step up to 22,243; a block stores the
largest code whose length is at most its minimum, so the decoded length is
still a lower bound (``_bounds.h`` builds the same table in C).
"""

from __future__ import annotations

import numpy as np

BLOCK = 128
#: Blocks per numpy pass when computing bounds: bounds temporary memory.
_PASS_BLOCKS = 1 << 15
BLOCK_ARRAYS = ("blk_maxtf", "blk_minlen", "term_blocks")


def _len_table() -> np.ndarray:
    lengths = list(range(96))
    while len(lengths) < 256:
        lengths.append(lengths[-1] + lengths[-1] // 28)
    return np.array(lengths, np.uint16)


#: Field length each one-byte ``blk_minlen`` code stands for.
LEN_OF_CODE = _len_table()


def minlen_codes(lengths: np.ndarray) -> np.ndarray:
    """uint8 codes of minimum field lengths: the largest code whose length is
    at most the given one (so decoding gives a lower bound)."""
    codes = np.searchsorted(LEN_OF_CODE, np.asarray(lengths, np.int64), side="right") - 1
    return codes.astype(np.uint8)


def block_arrays(
    offsets: np.ndarray, docs: np.ndarray, tfs: np.ndarray, lens: np.ndarray
) -> dict[str, np.ndarray]:
    """The block arrays of a segment from its postings and field lengths."""
    offsets = np.asarray(offsets, np.int64)
    counts = np.diff(offsets)
    per_term = (counts + BLOCK - 1) // BLOCK
    term_blocks = np.zeros(len(counts) + 1, np.int64)
    np.cumsum(per_term, out=term_blocks[1:])
    n_blocks = int(term_blocks[-1])
    term_of = np.repeat(np.arange(len(counts), dtype=np.int64), per_term)
    starts = offsets[:-1][term_of] + BLOCK * (np.arange(n_blocks) - term_blocks[:-1][term_of])
    ends = np.minimum(starts + BLOCK, offsets[1:][term_of])
    del term_of
    blk_maxtf = np.empty((n_blocks, 3), np.uint8)
    blk_minlen = np.empty((n_blocks, 3), np.uint8)
    for i in range(0, n_blocks, _PASS_BLOCKS):
        j = min(i + _PASS_BLOCKS, n_blocks)
        a, z = int(starts[i]), int(ends[j - 1])
        rel = starts[i:j] - a
        blk_maxtf[i:j] = np.maximum.reduceat(np.asarray(tfs[a:z]), rel, axis=0)
        low = np.minimum.reduceat(np.asarray(lens)[np.asarray(docs[a:z])], rel, axis=0)
        blk_minlen[i:j] = minlen_codes(low)
    return {
        "blk_maxtf": blk_maxtf,
        "blk_minlen": blk_minlen,
        "term_blocks": term_blocks.astype(np.uint32),
    }
