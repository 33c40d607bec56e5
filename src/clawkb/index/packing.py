"""Bit-packed postings blocks (segment format 4).

Layout (also described in ``_packed.h``): a term's postings are cut into
blocks of 128; block ``b`` starts at byte ``blk_pos[b]`` of ``packed`` with
one byte, the bit width of its doc gaps, followed by one little-endian bit
stream (least significant bit first): the doc gaps, then the term
frequencies of field 0, 1 and 2, each field at the bit width of the block's
largest frequency of that field (``blk_maxtf``, so a field absent from the
block costs nothing), padded to a whole byte. The first doc of a term is
stored as is; every other doc as its distance to the previous one (across
blocks: to ``blk_last[b - 1]``). ``packed`` ends with 8 zero bytes.

``_postings.c`` packs and unpacks; the pure-Python functions here are the
reference (and the fallback when no compiler is available: then segments are
written in format 3 and packed segments are still readable, slowly).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

try:  # pragma: no cover - which branch runs depends on the build
    from clawkb.index import _postings  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover
    _postings = None

BLOCK = 128
#: True when the native packer is built (segments are then written packed).
NATIVE = _postings is not None
PACKED_ARRAYS = ("packed", "blk_pos", "blk_last")


def pack(
    offsets: np.ndarray, docs: np.ndarray, tfs: np.ndarray, blk_maxtf: np.ndarray
) -> dict[str, np.ndarray]:
    """Pack postings (``offsets`` int64 [T+1], ``docs`` uint32, ``tfs`` uint8 [P, 3])."""
    offsets = np.ascontiguousarray(offsets, np.int64)
    docs = np.ascontiguousarray(docs, np.uint32)
    tfs = np.ascontiguousarray(tfs, np.uint8)
    blk_maxtf = np.ascontiguousarray(blk_maxtf, np.uint8)
    if _postings is not None:
        data, pos, last = _postings.pack(offsets, docs, tfs, blk_maxtf)
    else:
        data, pos, last = _pack_python(offsets, docs, tfs, blk_maxtf)
    return {
        "packed": np.frombuffer(data, np.uint8),
        "blk_pos": np.frombuffer(pos, np.uint32),
        "blk_last": np.frombuffer(last, np.uint32),
    }


def unpack(
    offsets: np.ndarray,
    packed: np.ndarray,
    blk_pos: np.ndarray,
    blk_last: np.ndarray,
    blk_maxtf: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """(docs uint32 [P], tfs uint8 [P, 3]) of packed postings."""
    offsets = np.ascontiguousarray(offsets, np.int64)
    n = int(offsets[-1]) if len(offsets) else 0
    docs = np.empty(n, np.uint32)
    tfs = np.empty((n, 3), np.uint8)
    if _postings is not None:
        _postings.unpack(offsets, packed, blk_pos, blk_last, blk_maxtf, docs, tfs)
    else:
        _unpack_python(offsets, bytes(packed), blk_pos, blk_last, blk_maxtf, docs, tfs)
    return docs, tfs


def assemble(
    rank: np.ndarray, doc: np.ndarray, field: np.ndarray, tf: np.ndarray, n_terms: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Inverted entries (term rank, doc, field, tf; docs ascending) to segment
    postings: (offsets int64 [T+1], docs uint32 [P], tfs uint8 [P, 3]). Native only.

    The outputs are sized for one posting per entry (views of the part used
    are returned; untouched pages cost no memory), so nothing is copied.
    """
    assert _postings is not None, "assemble needs the native module"
    n = len(rank)
    off = np.empty(n_terms + 1, np.int64)
    docs = np.empty(n, np.uint32)
    tfs = np.zeros((n, 3), np.uint8)
    p = _postings.assemble(
        np.ascontiguousarray(rank, np.uint32),
        np.ascontiguousarray(doc, np.uint32),
        np.ascontiguousarray(field, np.uint8),
        np.ascontiguousarray(tf, np.uint8),
        int(n_terms),
        off,
        docs,
        tfs,
    )
    return off, docs[:p], tfs[:p]


def merge(inputs: list[tuple[np.ndarray, ...]]) -> tuple[np.ndarray, ...]:
    """Merged (terms, offsets, docs, tfs [P, 3]) of packed segments, streamed in C.

    ``inputs``: ``(terms, offsets, packed, blk_pos, blk_last, blk_maxtf, remap)``
    per segment, ``remap`` int32 [n_docs] the output doc number (-1: dropped).
    Native only.
    """
    assert _postings is not None, "merge needs the native module"
    inputs = [tuple(np.ascontiguousarray(a) for a in x) for x in inputs]
    max_t = sum(len(x[0]) for x in inputs)
    max_p = sum(int(x[1][-1]) for x in inputs)
    terms = np.empty(max_t, np.uint64)
    off = np.empty(max_t + 1, np.int64)
    docs = np.empty(max_p, np.uint32)
    tfs = np.empty((max_p, 3), np.uint8)
    n_terms, n_post = _postings.merge(inputs, terms, off, docs, tfs)
    return terms[:n_terms], off[: n_terms + 1], docs[:n_post], tfs[:n_post]


def merge_packed(inputs: list[tuple[np.ndarray, ...]], lens: np.ndarray) -> dict[str, np.ndarray]:
    """Like :func:`merge`, but returns the merged segment's packed postings and
    block arrays (``terms``, ``offsets``, ``term_blocks``, ``packed``, ``blk_pos``,
    ``blk_last``, ``blk_maxtf``, ``blk_minlen``) without ever holding its raw
    postings: ``lens`` uint32 [N, 3] are the output docs' field lengths. Native only.

    The C merge writes straight into arrays sized for the worst case; only
    the pages it writes become resident, and the results are views of them
    (no copy of the output is ever made).
    """
    assert _postings is not None, "merge_packed needs the native module"
    inputs = [tuple(np.ascontiguousarray(a) for a in x) for x in inputs]
    max_t = sum(len(x[0]) for x in inputs)
    max_b = sum(len(x[3]) for x in inputs)
    out: dict[str, np.ndarray] = {
        "terms": np.empty(max_t, np.uint64),
        "offsets": np.empty(max_t + 1, np.int64),
        "term_blocks": np.empty(max_t + 1, np.uint32),
        "packed": np.empty(max_b * (1 + BLOCK * 7) + 24, np.uint8),
        "blk_pos": np.empty(max_b, np.uint32),
        "blk_last": np.empty(max_b, np.uint32),
        "blk_maxtf": np.empty((max_b, 3), np.uint8),
        "blk_minlen": np.empty((max_b, 3), np.uint8),
    }
    # inputs whose packed postings are file mappings: their pages are dropped as read
    release = sum(1 << i for i, x in enumerate(inputs[:64]) if _file_mapped(x[2]))
    n_terms, n_blocks, n_bytes = _postings.merge_packed(
        inputs, np.ascontiguousarray(lens, np.uint32), *out.values(), release
    )
    for name in ("terms", "blk_pos", "blk_last", "blk_maxtf", "blk_minlen"):
        out[name] = out[name][: n_blocks if name.startswith("blk_") else n_terms]
    out["offsets"] = out["offsets"][: n_terms + 1]
    out["term_blocks"] = out["term_blocks"][: n_terms + 1]
    out["packed"] = out["packed"][:n_bytes]
    return out


def _file_mapped(arr: np.ndarray) -> bool:
    """True when ``arr`` views a read-only memory-mapped file (a segment opened
    from disk): dropping its pages loses nothing, the file still has them."""
    base: object = arr
    while isinstance(base, np.ndarray):
        if isinstance(base, np.memmap):
            return base.mode == "r"
        base = base.base
    return False


def _blocks(offsets: np.ndarray) -> Iterator[tuple[int, int, int, bool]]:
    """(block number, first posting, count, first block of its term?) in order."""
    b = 0
    for t in range(len(offsets) - 1):
        s, e = int(offsets[t]), int(offsets[t + 1])
        for start in range(s, e, BLOCK):
            yield b, start, min(BLOCK, e - start), start == s
            b += 1


def _pack_python(
    offsets: np.ndarray, docs: np.ndarray, tfs: np.ndarray, blk_maxtf: np.ndarray
) -> tuple[bytes, bytes, bytes]:
    out = bytearray()
    pos: list[int] = []
    last: list[int] = []
    prev = 0
    for b, start, n, first in _blocks(offsets):
        if first:
            prev = 0
        d = docs[start : start + n].astype(np.int64)
        gaps = np.diff(d, prepend=prev)
        prev = int(d[-1])
        pos.append(len(out))
        last.append(prev)
        wd = int(gaps.max()).bit_length()
        bits, nbits = 0, 0
        for value, width in [(int(g), wd) for g in gaps] + [
            (int(tfs[start + i, f]), int(blk_maxtf[b, f]).bit_length())
            for f in range(3)
            for i in range(n)
        ]:
            bits |= value << nbits
            nbits += width
        out.append(wd)
        out += bits.to_bytes((nbits + 7) // 8, "little")
    out += bytes(8)
    return (
        bytes(out),
        np.array(pos, np.uint32).tobytes(),
        np.array(last, np.uint32).tobytes(),
    )


def _unpack_python(
    offsets: np.ndarray,
    packed: bytes,
    blk_pos: np.ndarray,
    blk_last: np.ndarray,
    blk_maxtf: np.ndarray,
    docs: np.ndarray,
    tfs: np.ndarray,
) -> None:
    for b, start, n, first in _blocks(offsets):
        at = int(blk_pos[b])
        wd = packed[at]
        widths = [wd] * n + [int(blk_maxtf[b, f]).bit_length() for f in range(3) for _ in range(n)]
        nbytes = (sum(widths) + 7) // 8
        bits = int.from_bytes(packed[at + 1 : at + 1 + nbytes], "little")
        vals = []
        for w in widths:
            vals.append(bits & ((1 << w) - 1))
            bits >>= w
        prev = 0 if first else int(blk_last[b - 1])
        for i in range(n):
            prev += vals[i]
            docs[start + i] = prev
        for f in range(3):
            tfs[start : start + n, f] = vals[n * (f + 1) : n * (f + 2)]
