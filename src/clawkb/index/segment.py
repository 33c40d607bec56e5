"""Immutable on-disk segments of the lexical index.

A segment is a folder of ``.npy`` arrays, memory-mapped when opened:

``chunk_ids``  int64 [N]      store chunk id of each local doc number
``lens``       uint32 [N, 3]  token count per field (title, body, code)
``terms``      uint64 [T]     sorted 64-bit term hashes
``dfs``, ``dict_index``        format 5: the compact term dictionary
                               (:mod:`clawkb.index.termdict`): where each
                               term's postings and blocks start
``offsets``    int64 [T + 1]  formats 3 and 4: postings of term i are
                              ``offsets[i]:offsets[i+1]`` (format 5 derives them)
``blk_*``, ``term_blocks``             per-block score bounds (:mod:`clawkb.index.blocks`;
                                       ``term_blocks`` derived in format 5)

and the postings themselves, local doc numbers ascending within a term with
per-field term frequencies (saturated at 255), in one of two layouts:

``packed``, ``blk_pos``, ``blk_last``  formats 4 and 5: blocks of 128 postings, doc gaps
                                       and frequencies bit-packed
                                       (:mod:`clawkb.index.packing`)
``docs``, ``tfs``                      format 3: uint32 [P] and uint8 [P, 3]

Format 5 is written whenever the native packer is built (format 3 without a
compiler); all three are read (format 4 is format 5 with the plain offsets
and ``term_blocks`` instead of the compact dictionary). Format 3 added the
block arrays (the index's engine
string changed with it, so older indexes are rebuilt from the store); a
segment lacking them anyway gets them computed in memory when first needed. Deletions never rewrite a segment: a separate ``live.npy`` mask (uint8 [N]) is
replaced atomically. Segments are merged (dropping deleted docs) by
:func:`merge_segments`. Terms are stored as hashes so that a lookup is one
binary search in a memory-mapped array, with no vocabulary to load.
"""

from __future__ import annotations

import contextlib
import copy
import itertools
import json
import os
import shutil
import threading
import weakref
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from clawkb.errors import IndexCorruptError
from clawkb.index import npyfile, packing, scorer, termdict
from clawkb.index.blocks import BLOCK_ARRAYS, block_arrays, minlen_codes
from clawkb.index.generations import replace_atomically
from clawkb.text.tokenize import NATIVE_INVERT, TextInverter, tokenize

#: Version of the files a segment folder holds (meta.json "format").
SEGMENT_FORMAT = (6 if scorer.BLOCKMAX_AVAILABLE else 5) if packing.NATIVE else 3

#: Format 6 stores a membership bitmap (``member_*`` files) for each posting
#: list holding at least one doc in MEMBER_DENSITY (and two blocks), longest
#: first, while their bytes stay under MEMBER_BUDGET times the packed
#: postings': a query's probe into such a list is one bit test and its
#: posting is found by rank, with no list decoded at query time.
MEMBER_DENSITY = 32
MEMBER_BUDGET = 0.25
#: the member files, in the order ``scorer.member_cache`` takes them
MEMBER_FILES = ("member_keys", "member_bits", "member_rank")
N_FIELDS = 3
FIELDS = ("title", "body", "code")
_FLUSH = 1 << 16
_ARRAYS = ("chunk_ids", "lens", "terms")
#: Block bound files every format has (format 5 derives ``term_blocks``).
_BOUNDS = ("blk_maxtf", "blk_minlen")
_RAW = ("docs", "tfs")


_MASK = (1 << 64) - 1

try:  # the native module computes the same hashes, much faster
    from clawkb.index import _bm25native as _native  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - no compiler on this machine
    _native = None


def damaged_segment(folder: Path, exc: Exception) -> IndexCorruptError:
    """One line naming a segment whose arrays contradict themselves (found while
    reading it: a change the quick check on open cannot see)."""
    what = exc.args[-1] if exc.args else type(exc).__name__
    return IndexCorruptError(f"{folder}: damaged segment ({what})")


@contextlib.contextmanager
def reading_segment(folder: Path) -> Iterator[None]:
    """Reads of the segment in ``folder``: the kernels' ValueError on damaged
    arrays, and numpy's IndexError where the Python fallback indexes with
    them, become :class:`IndexCorruptError`."""
    try:
        yield
    except (ValueError, IndexError) as exc:
        raise damaged_segment(folder, exc) from None


def term_hash(term: str) -> int:
    """Stable 64-bit hash of a token: FNV-1a over UTF-8, then the splitmix64 mixer.

    Independent of PYTHONHASHSEED and identical to the native kernel's hash.
    """
    h = 0xCBF29CE484222325
    for byte in term.encode("utf-8"):
        h = ((h ^ byte) * 0x100000001B3) & _MASK
    h = ((h ^ (h >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    h = ((h ^ (h >> 27)) * 0x94D049BB133111EB) & _MASK
    return h ^ (h >> 31)


def hash_terms(terms: Sequence[str]) -> np.ndarray:
    if _native is not None:
        return np.frombuffer(_native.term_hashes(list(terms)), np.uint64).copy()
    return np.fromiter((term_hash(t) for t in terms), dtype=np.uint64, count=len(terms))


@dataclass(frozen=True, slots=True)
class DocFields:
    """Tokens of one chunk, per field."""

    chunk_id: int
    title: list[str]
    body: list[str]
    code: list[str]


@dataclass(frozen=True, slots=True)
class DocTexts:
    """Text of one chunk per field (title + heading path, body, code), tokenized
    as it is inverted: with the native tokenizer no token list is ever made."""

    chunk_id: int
    title: str
    body: str
    code: str

    def fields(self) -> DocFields:
        """The same chunk as token lists."""
        return DocFields(
            self.chunk_id,
            tokenize(self.title) if self.title else [],
            tokenize(self.body) if self.body else [],
            tokenize(self.code) if self.code else [],
        )


def _save(folder: Path, name: str, arr: np.ndarray) -> None:
    with open(folder / f"{name}.npy", "wb") as fh:
        np.save(fh, arr)
        fh.flush()
        os.fsync(fh.fileno())


def write_segment(
    folder: Path,
    chunk_ids: np.ndarray,
    lens: np.ndarray,
    terms: np.ndarray,
    offsets: np.ndarray,
    docs: np.ndarray,
    tfs: np.ndarray,
) -> None:
    """Write arrays into ``folder`` via a temporary sibling and an atomic rename."""
    arrays: dict[str, np.ndarray] = dict(
        chunk_ids=chunk_ids.astype(np.int64, copy=False),
        lens=lens.astype(np.uint32, copy=False),
        terms=terms.astype(np.uint64, copy=False),
        offsets=offsets.astype(np.int64, copy=False),
    )
    docs = np.ascontiguousarray(docs, np.uint32)
    tfs = np.ascontiguousarray(tfs, np.uint8)
    arrays.update(block_arrays(arrays["offsets"], docs, tfs, arrays["lens"]))
    if SEGMENT_FORMAT >= 4:
        arrays.update(packing.pack(arrays["offsets"], docs, tfs, arrays["blk_maxtf"]))
    else:
        arrays.update(docs=docs, tfs=tfs)
    del docs, tfs
    _write_folder(folder, arrays)


def _write_folder(folder: Path, arrays: dict[str, np.ndarray]) -> None:
    """Save a segment's arrays and meta.json into ``folder`` via a temporary sibling."""
    tmp = folder.with_name(folder.name + ".tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    try:
        _fill_folder(tmp, arrays)
    except BaseException:  # a full disk, an interrupt: leave no half-written segment behind
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    os.replace(tmp, folder)


def member_keys(offsets: np.ndarray, n_docs: int, packed_bytes: int) -> np.ndarray:
    """int64 [L, 3] (first posting, end, first block) of the lists format 6
    stores a membership bitmap for (MEMBER_DENSITY, MEMBER_BUDGET), by start."""
    offsets = np.asarray(offsets, np.int64)
    df = np.diff(offsets)
    first_block = np.zeros(len(df), np.int64)
    if len(df) > 1:
        np.cumsum(((df + 127) // 128)[:-1], out=first_block[1:])
    long = np.flatnonzero((df >= 256) & (df * MEMBER_DENSITY >= n_docs))
    if len(long):
        long = long[np.argsort(-df[long], kind="stable")]
        each = scorer.member_words(n_docs) * 12
        long = np.sort(long[: int(packed_bytes * MEMBER_BUDGET) // each])
    return np.stack([offsets[long], offsets[long + 1], first_block[long]], axis=1).astype(np.int64)


def _member_arrays(arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Format 6's membership bitmaps of a packed segment's long lists."""
    n_docs = len(arrays["chunk_ids"])
    keys = member_keys(arrays["offsets"], n_docs, len(arrays["packed"]))
    made = scorer.member_bitmaps(arrays, keys, n_docs)
    assert made is not None
    return dict(zip(MEMBER_FILES, (keys, *made), strict=True))


def _fill_folder(tmp: Path, arrays: dict[str, np.ndarray]) -> None:
    n_postings = int(arrays["offsets"][-1]) if len(arrays["offsets"]) else 0
    fmt = 3
    if "packed" in arrays:  # format 5: the compact dictionary replaces offsets
        arrays = dict(arrays)
        fmt = 5
        if SEGMENT_FORMAT >= 6:
            arrays.update(_member_arrays(arrays))
            fmt = 6
        arrays.update(termdict.encode(arrays.pop("offsets")))
        arrays.pop("term_blocks", None)
    for name, arr in arrays.items():
        _save(tmp, name, np.ascontiguousarray(arr))
    meta = {
        "format": fmt,
        "n_docs": len(arrays["chunk_ids"]),
        "n_terms": len(arrays["terms"]),
        "n_postings": n_postings,
    }
    (tmp / "meta.json").write_text(json.dumps(meta))


def build_arrays(
    batch: Iterable[DocFields | DocTexts], *, use_native: bool = True
) -> tuple[np.ndarray, ...]:
    """Invert a batch of docs (token lists or texts) into segment arrays.

    ``batch`` may be a generator: each doc is dropped once it is counted, so
    memory follows the number of postings, not of tokens. With the native
    tokenizer and packer, texts are tokenized and counted in one C pass
    (:class:`~clawkb.text.tokenize.TextInverter`); otherwise they are
    tokenized here and the native kernel counts and hashes the tokens, or the
    fallback uses ``Counter``. All yield identical segments.
    """
    if use_native and NATIVE_INVERT and packing.NATIVE:
        return _build_streamed(batch)
    fields = (d.fields() if isinstance(d, DocTexts) else d for d in batch)
    return _build_from_tokens(fields, use_native=use_native)


#: Docs handed to the C inverter per call.
_ADD_DOCS = 512


def _build_streamed(batch: Iterable[DocFields | DocTexts]) -> tuple[np.ndarray, ...]:
    """:func:`build_arrays` through the native text inverter: about 10 bytes per
    (term, doc, field) entry, no token strings for the tokens it has seen."""
    release_free_heap()  # what the process freed before (a worker's earlier tasks)
    inv = TextInverter()
    ids_list: list[int] = []
    lens_parts: list[bytes] = []
    rows: list[tuple[int, str | list[str], str | list[str], str | list[str]]] = []
    for doc in batch:
        rows.append((len(ids_list), doc.title, doc.body, doc.code))
        ids_list.append(doc.chunk_id)
        if len(rows) >= _ADD_DOCS:
            lens_parts.append(inv.add(rows))
            rows = []
    if rows:
        lens_parts.append(inv.add(rows))
    del rows
    h, rank, doc_of, field_of, tf_of = inv.finish()  # the term table is freed
    release_free_heap()
    n = len(ids_list)
    chunk_ids = np.array(ids_list, np.int64)
    lens = np.frombuffer(b"".join(lens_parts), np.uint32).reshape(n, N_FIELDS).copy()
    del ids_list, lens_parts
    hashes = np.frombuffer(h, np.uint64)
    off, dd, tt = packing.assemble(
        np.frombuffer(rank, np.uint32),
        np.frombuffer(doc_of, np.uint32),
        np.frombuffer(field_of, np.uint8),
        np.frombuffer(tf_of, np.uint8),
        len(hashes),
    )
    return chunk_ids, lens, hashes, off, dd, tt


def _build_from_tokens(
    batch: Iterable[DocFields], *, use_native: bool = True
) -> tuple[np.ndarray, ...]:
    """:func:`build_arrays` for token lists (the native kernel or ``Counter``)."""
    ids_list: list[int] = []
    len_list: list[tuple[int, int, int]] = []

    def docs() -> Iterator[DocFields]:
        for doc in batch:
            ids_list.append(doc.chunk_id)
            len_list.append((len(doc.title), len(doc.body), len(doc.code)))
            yield doc

    if use_native and _native is not None and packing.NATIVE:
        inverted = _invert_native(docs())
    elif use_native and _native is not None:
        postings = _postings_native(docs())
        inverted = None if postings is None else _assemble(len(ids_list), *postings)
    else:
        postings = _postings_python(docs())
        inverted = None if postings is None else _assemble(len(ids_list), *postings)
    n = len(ids_list)
    chunk_ids = np.array(ids_list, np.int64)
    lens = np.array(len_list, np.uint32).reshape(n, N_FIELDS)
    if inverted is None:
        return (
            chunk_ids,
            lens,
            np.empty(0, np.uint64),
            np.zeros(1, np.int64),
            np.empty(0, np.uint32),
            np.empty((0, N_FIELDS), np.uint8),
        )
    return (chunk_ids, lens, *inverted)


_Postings = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def _native_batches(docs: Iterator[DocFields]) -> Iterator[list[tuple[int, int, list[str]]]]:
    """(doc number, field, tokens) rows for the C inverter, cut every ``_FLUSH * 4``
    tokens so its temporaries stay bounded."""
    rows: list[tuple[int, int, list[str]]] = []
    pending = 0
    for d, doc in enumerate(docs):
        for f, toks in enumerate((doc.title, doc.body, doc.code)):
            if toks:
                rows.append((d, f, toks))
                pending += len(toks)
        if pending >= _FLUSH * 4:
            yield rows
            rows, pending = [], 0
    if rows:
        yield rows


def _invert_native(docs: Iterator[DocFields]) -> tuple[np.ndarray, ...] | None:
    """(sorted hashes, offsets, docs, tfs), inverted in C with ~10 bytes per
    (term, doc, field) entry plus a 4-byte sort index as the only temporaries."""
    parts: list[tuple[np.ndarray, ...]] = []

    def flush(rows: list[tuple[int, int, list[str]]]) -> None:
        h, t, d, f, c = _native.invert(rows)
        rows.clear()  # the tokens go now, not when the next batch is built
        tf = np.frombuffer(c, np.uint32)
        parts.append(
            (
                np.frombuffer(h, np.uint64),
                np.frombuffer(t, np.uint32),
                np.frombuffer(d, np.uint32),
                np.frombuffer(f, np.uint8),
                np.minimum(tf, 255).astype(np.uint8),
            )
        )

    for rows in _native_batches(docs):
        flush(rows)
        release_free_heap()
    if not parts:
        return None
    hashes = _sorted_unique(np.concatenate([p[0] for p in parts]))
    n = sum(len(p[1]) for p in parts)
    rank = np.empty(n, np.uint32)
    doc_of = np.empty(n, np.uint32)
    field_of = np.empty(n, np.uint8)
    tf_of = np.empty(n, np.uint8)
    at = 0
    parts.reverse()
    while parts:  # each part is freed once copied: never two copies of all entries
        h, t, d, f, tf = parts.pop()
        # the part's term numbers -> ranks in the sorted hashes (vocabulary-sized map)
        rank[at : at + len(t)] = np.searchsorted(hashes, h).astype(np.uint32)[t]
        doc_of[at : at + len(t)] = d
        field_of[at : at + len(t)] = f
        tf_of[at : at + len(t)] = tf
        at += len(t)
        del h, t, d, f, tf
    release_free_heap()
    off, dd, tt = packing.assemble(rank, doc_of, field_of, tf_of, len(hashes))
    del rank, doc_of, field_of, tf_of
    return hashes, off, dd, tt


def _sorted_unique(values: np.ndarray) -> np.ndarray:
    """``np.unique(values)`` by sorting: numpy 2.4 hashes integer arrays first,
    which on a batch's term hashes (millions of uint64) is ~30x slower."""
    ordered = np.sort(values)
    if len(ordered) < 2:
        return ordered
    keep = np.empty(len(ordered), bool)
    keep[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=keep[1:])
    return ordered[keep]


_TRIM: list[object] = []


def release_free_heap() -> None:
    """Hand free heap pages back to the OS (glibc's ``malloc_trim``).

    Each token batch leaves freed string memory between the batch's
    long-lived postings arrays: glibc keeps those pages, so without this an
    index worker's resident size grows by the tokens of many batches. A no-op
    where there is no glibc."""
    if not _TRIM:
        try:
            import ctypes

            _TRIM.append(ctypes.CDLL("libc.so.6").malloc_trim)
        except (OSError, AttributeError):
            _TRIM.append(None)
    trim = _TRIM[0]
    if trim is not None:
        trim(0)  # type: ignore[operator]


def _postings_native(docs: Iterator[DocFields]) -> _Postings | None:
    """(sorted hashes, term number, doc, field, tf) per (term, doc, field), via C."""
    parts: list[tuple[np.ndarray, ...]] = []

    def flush(rows: list[tuple[int, int, list[str]]]) -> None:
        h, t, d, f, c = _native.invert(rows)
        hashes = np.frombuffer(h, np.uint64)
        post_hash = hashes[np.frombuffer(t, np.uint32)]
        parts.append(
            (
                post_hash,
                np.frombuffer(d, np.uint32),
                np.frombuffer(f, np.uint8),
                np.minimum(np.frombuffer(c, np.uint32), 255).astype(np.uint8),
            )
        )

    for rows in _native_batches(docs):
        flush(rows)
    if not parts:
        return None
    post_hash = np.concatenate([p[0] for p in parts])
    hashes, term_no = np.unique(post_hash, return_inverse=True)
    del post_hash
    doc_of = np.concatenate([p[1] for p in parts]).astype(np.int64)
    field_of = np.concatenate([p[2] for p in parts]).astype(np.int64)
    tf_arr = np.concatenate([p[3] for p in parts])
    return hashes, term_no.astype(np.int64).ravel(), doc_of, field_of, tf_arr


def _postings_python(docs: Iterator[DocFields]) -> _Postings | None:
    """The same postings as :func:`_postings_native`, with ``Counter`` and numpy."""
    vocab: dict[str, int] = {}
    counter = itertools.count()
    setdefault = vocab.setdefault
    # Python int lists are flushed to numpy every _FLUSH entries: list appends
    # are fast, and the flush keeps memory at 8 bytes per posting.
    raw: list[int] = []
    tf_list: list[int] = []
    raw_parts: list[np.ndarray] = []
    tf_parts: list[np.ndarray] = []
    runs: list[tuple[int, int, int]] = []  # (doc, field, number of distinct terms)
    for d, doc in enumerate(docs):
        for f, toks in enumerate((doc.title, doc.body, doc.code)):
            if not toks:
                continue
            c = Counter(toks)
            raw.extend(map(setdefault, c.keys(), counter))
            tf_list.extend(c.values())
            runs.append((d, f, len(c)))
        if len(raw) >= _FLUSH:
            raw_parts.append(np.array(raw, np.int64))
            tf_parts.append(np.minimum(np.array(tf_list, np.int64), 255).astype(np.uint8))
            raw, tf_list = [], []
    raw_parts.append(np.array(raw, np.int64))
    tf_parts.append(np.minimum(np.array(tf_list, np.int64), 255).astype(np.uint8))
    if not runs:
        return None
    run_arr = np.array(runs, np.int64)
    doc_of = np.repeat(run_arr[:, 0], run_arr[:, 2])
    field_of = np.repeat(run_arr[:, 1], run_arr[:, 2])
    raw_ids = np.concatenate(raw_parts)
    tf_arr = np.concatenate(tf_parts)
    # Dense term numbers in hash order, so postings come out grouped by hash.
    uniq_raw = np.fromiter(vocab.values(), dtype=np.int64, count=len(vocab))
    hashes = hash_terms(list(vocab.keys()))
    order = np.argsort(hashes, kind="stable")
    hashes = hashes[order]
    dense = np.empty(len(order), np.int64)
    dense[order] = np.arange(len(order))
    by_raw = np.argsort(uniq_raw)
    term_no = dense[by_raw[np.searchsorted(uniq_raw[by_raw], raw_ids)]]
    return hashes, term_no, doc_of, field_of, tf_arr


def _assemble(
    n: int,
    hashes: np.ndarray,
    term_no: np.ndarray,
    doc_of: np.ndarray,
    field_of: np.ndarray,
    tf_arr: np.ndarray,
) -> tuple[np.ndarray, ...]:
    """Order postings by (term hash, doc) and fold fields into one row each."""
    doc_bits = max(1, int(n).bit_length())
    key = (term_no << (doc_bits + 2)) | (doc_of << 2) | field_of
    del term_no, doc_of, field_of
    perm = np.argsort(key)  # keys are unique: no need for a stable sort
    key = key[perm]
    tf_arr = tf_arr[perm]
    del perm
    pair = key >> 2
    new_pair = np.r_[True, pair[1:] != pair[:-1]]
    post_of_key = np.cumsum(new_pair) - 1
    starts = np.flatnonzero(new_pair)
    tfs = np.zeros((len(starts), N_FIELDS), np.uint8)
    tfs[post_of_key, (key & 3).astype(np.intp)] = tf_arr
    pair_start = pair[starts]
    docs = (pair_start & ((1 << doc_bits) - 1)).astype(np.uint32)
    term_of_post = pair_start >> doc_bits
    offsets = np.searchsorted(term_of_post, np.arange(len(hashes) + 1)).astype(np.int64)
    return hashes, offsets, docs, tfs


def _open_array(path: Path) -> np.ndarray:
    """A read-only memory map of an ``.npy`` file, as a plain ndarray view."""
    return npyfile.load(path, mmap=True)


#: Segments opened for reading, by folder. Segment files never change once
#: published, so every reader of a generation that still lists a segment maps it
#: once (see :meth:`Segment.shared`). Held weakly: each view keeps its base alive,
#: so a segment (and its maps' file descriptors) goes with the last view using it,
#: whether its KB was closed or a merge retired it.
_SHARED: weakref.WeakValueDictionary[str, Segment] = weakref.WeakValueDictionary()
_SHARED_LOCK = threading.Lock()
#: Segments with at most this many postings keep them unpacked once a query reads
#: them (7 bytes a posting: under 0.5 MB each), instead of decoding each query
#: term's blocks again per query: the small segments of recent writes, where that
#: per-term Python work costs more than the scoring.
SMALL_POSTINGS = 65_536
_RAW_LOCK = threading.Lock()


class Segment:
    """A read-only, memory-mapped segment plus its (replaceable) live mask."""

    @classmethod
    def shared(cls, folder: Path, key: tuple[Any, ...] | None = None) -> Segment:
        """A reader's view of the segment in ``folder``: its mapped arrays opened once
        per process and shared; the live mask (and what is derived lazily) its own.

        A server renews its readers' views after every write; opening each
        segment's dozen maps again per reader thread and generation was most of
        a search's CPU under writes. ``key`` names the segment's content (the
        manifest's size and CRC-32 of each of its files); without one it is the
        identity (inode, time, size) of every file but the live masks. Either
        way a segment rebuilt or repaired under the same name is opened afresh.
        """
        if key is None:
            with os.scandir(folder) as entries:
                key = tuple(
                    sorted(
                        (e.name, st.st_ino, st.st_mtime_ns, st.st_size)
                        for e in entries
                        if not e.name.startswith("live") and (st := e.stat())
                    )
                )
        name = str(folder)
        with _SHARED_LOCK:
            found = _SHARED.get(name)
        if found is None or found._share_key != key:
            found = cls(folder)
            found._share_key = key
            with _SHARED_LOCK:
                _SHARED[name] = found
        view = copy.copy(found)
        view._base = found  # keeps the shared entry alive while this view lives
        view.live = view._read_live()
        return view

    @staticmethod
    def forget_shared(index_folder: Path, keep: Iterable[str]) -> None:
        """Drop shared segments of ``index_folder`` that are not in ``keep`` (merged
        away); views still held by older readers keep their maps until they go."""
        prefix, names = str(index_folder), set(keep)
        with _SHARED_LOCK:
            for name in list(_SHARED):
                head, _, seg = name.rpartition(os.sep)
                if head == prefix and seg not in names:
                    del _SHARED[name]

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        #: what :meth:`shared` opened this segment for (None: not shared)
        self._share_key: tuple[Any, ...] | None = None
        #: the shared segment this view copies, if any
        self._base: Segment | None = None
        self.name = folder.name
        # Plain ndarray views of the maps: np.memmap's indexing overhead is
        # several microseconds per call, paid on every query term lookup.
        arrs = {n: _open_array(folder / f"{n}.npy") for n in _ARRAYS}
        self.chunk_ids: np.ndarray = arrs["chunk_ids"]
        self.lens: np.ndarray = arrs["lens"]
        self.terms: np.ndarray = arrs["terms"]
        #: format 5: (dfs, dict_index) as stored; older formats: plain offsets
        self._dict: tuple[np.ndarray, np.ndarray] | None = None
        self._offsets: np.ndarray | None = None
        self.compact = (folder / "dfs.npy").exists()
        if self.compact:
            self._dict = (_open_array(folder / "dfs.npy"), _open_array(folder / "dict_index.npy"))
        else:
            self._offsets = _open_array(folder / "offsets.npy")
        self._raw: tuple[np.ndarray, np.ndarray] | None = None
        self._packed: dict[str, np.ndarray] | None = None
        if (folder / "packed.npy").exists():
            self._packed = {n: _open_array(folder / f"{n}.npy") for n in packing.PACKED_ARRAYS}
        else:
            self._raw = (_open_array(folder / "docs.npy"), _open_array(folder / "tfs.npy"))
        #: format 6: the stored membership bitmaps (MEMBER_FILES), else None
        self.members: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        if (folder / "member_keys.npy").exists():
            keys, bits, rank = (_open_array(folder / f"{n}.npy") for n in MEMBER_FILES)
            self.members = (keys, bits, rank)
        self.live: np.ndarray = self._read_live()
        self._sorted_ids: np.ndarray | None = None
        self._blocks: dict[str, np.ndarray] | None = None
        names = _BOUNDS if self.compact else BLOCK_ARRAYS
        if all((folder / f"{n}.npy").exists() for n in names):
            blocks = {n: _open_array(folder / f"{n}.npy") for n in names}
            minlen = blocks["blk_minlen"]
            if minlen.dtype == np.uint16:  # formats 3 and 4 stored lengths: code them
                blocks["blk_minlen"] = minlen_codes(minlen)
            if blocks["blk_minlen"].dtype == np.uint8:  # else an early layout: recompute
                self._blocks = blocks
        self._check_layout()

    def _check_layout(self) -> None:
        """Raise ValueError unless every array has its type and a length that
        agrees with the others: the kernels index the maps by these lengths. A
        few comparisons; the values themselves are checked as they are read
        (``_dict.h``, ``_packed.h``)."""
        n, t = len(self.chunk_ids), len(self.terms)
        want: list[tuple[str, np.ndarray | None, str, tuple[int | None, ...]]] = [
            ("chunk_ids", self.chunk_ids, "<i8", (n,)),
            ("lens", self.lens, "<u4", (n, N_FIELDS)),
            ("terms", self.terms, "<u8", (t,)),
        ]
        if self._dict is not None:
            want += [
                ("dfs", self._dict[0], "|u1", (t,)),
                ("dict_index", self._dict[1], "<i8", (None,)),
            ]
        if self._offsets is not None:
            want.append(("offsets", self._offsets, "<i8", (t + 1,)))
        if self._packed is not None:
            b = len(self._packed["blk_pos"])
            want += [
                ("packed", self._packed["packed"], "|u1", (None,)),
                ("blk_pos", self._packed["blk_pos"], "<u4", (b,)),
                ("blk_last", self._packed["blk_last"], "<u4", (b,)),
            ]
            if self._blocks is not None:
                want.append(("blk_maxtf", self._blocks["blk_maxtf"], "|u1", (b, N_FIELDS)))
                want.append(("blk_minlen", self._blocks["blk_minlen"], "|u1", (b, N_FIELDS)))
        if self.members is not None:
            n_lists, words = len(self.members[0]), scorer.member_words(n)
            want += [
                ("member_keys", self.members[0], "<i8", (n_lists, 3)),
                ("member_bits", self.members[1], "<u8", (n_lists, words)),
                ("member_rank", self.members[2], "<u4", (n_lists, words)),
            ]
        if self._raw is not None:
            p = len(self._raw[0])
            want += [
                ("docs", self._raw[0], "<u4", (p,)),
                ("tfs", self._raw[1], "|u1", (p, N_FIELDS)),
            ]
        for name, arr, dtype, shape in want:
            if arr is None:
                continue
            ok = arr.dtype.str == dtype and arr.ndim == len(shape) and arr.flags.c_contiguous
            if not ok or any(
                w is not None and w != got for w, got in zip(shape, arr.shape, strict=False)
            ):
                raise ValueError(
                    f"{self.folder / name}.npy: {arr.dtype.str} {arr.shape}, expected {dtype} {shape}"
                )

    def _read_live(self) -> np.ndarray:
        live_path = self.folder / "live.npy"
        if live_path.exists():
            return npyfile.load(live_path)
        return np.ones(len(self.chunk_ids), np.uint8)

    @property
    def offsets(self) -> np.ndarray:
        """int64 [T + 1]: postings of term i are ``offsets[i]:offsets[i+1]``
        (derived from the compact dictionary once, for merges and full scans)."""
        if self._offsets is None:
            assert self._dict is not None
            self._offsets = termdict.offsets(*self._dict)
        return self._offsets

    @property
    def term_dict(self) -> tuple[np.ndarray, np.ndarray]:
        """(dfs, dict_index) of :mod:`clawkb.index.termdict` (built in memory
        for segments written before format 5)."""
        if self._dict is None:
            enc = termdict.encode(self.offsets)
            self._dict = (enc["dfs"], enc["dict_index"])
        return self._dict

    @property
    def blocks(self) -> dict[str, np.ndarray]:
        """Block bounds (``blocks.BLOCK_ARRAYS``); computed once for older
        segments; format 5 keeps ``blk_maxtf`` and ``blk_minlen`` only
        (``term_blocks`` is :attr:`term_blocks`)."""
        if self._blocks is None:
            docs, tfs = self.raw
            self._blocks = block_arrays(self.offsets, docs, tfs, self.lens)
        return self._blocks

    @property
    def term_blocks(self) -> np.ndarray:
        """uint32 [T + 1]: blocks of term i are ``term_blocks[i]:term_blocks[i+1]``."""
        stored = self.blocks.get("term_blocks")
        if stored is not None:
            return stored
        return termdict.term_blocks(*self.term_dict)

    @property
    def packed(self) -> dict[str, np.ndarray]:
        """Bit-packed postings (``packing.PACKED_ARRAYS``); packed in memory for format 3."""
        if self._packed is None:
            docs, tfs = self.raw
            self._packed = packing.pack(self.offsets, docs, tfs, self.blocks["blk_maxtf"])
        return self._packed

    @property
    def raw(self) -> tuple[np.ndarray, np.ndarray]:
        """(docs uint32 [P], tfs uint8 [P, 3]); unpacked once for format 4 (merges, explain)."""
        if self._raw is None:
            p = self.packed
            self._raw = packing.unpack(
                self.offsets, p["packed"], p["blk_pos"], p["blk_last"], self.blocks["blk_maxtf"]
            )
        return self._raw

    def term_postings(self, s: int, e: int, first_block: int) -> tuple[np.ndarray, np.ndarray]:
        """(docs, tfs) of one term's postings ``s:e`` (first block ``first_block``),
        decoding only its blocks."""
        if self._raw is not None or e <= s:
            docs, tfs = self.raw if e > s else (np.empty(0, np.uint32), np.empty((0, 3), np.uint8))
            return docs[s:e], tfs[s:e]
        p, nb = self.packed, -(-(e - s) // packing.BLOCK)
        blk = slice(first_block, first_block + nb)
        return packing.unpack(
            np.array([0, e - s], np.int64),
            p["packed"],
            np.ascontiguousarray(p["blk_pos"][blk]),
            np.ascontiguousarray(p["blk_last"][blk]),
            np.ascontiguousarray(self.blocks["blk_maxtf"][blk]),
        )

    @property
    def has_raw(self) -> bool:
        """True when raw postings are at hand (format 3, or unpacked already)."""
        return self._raw is not None

    def query_postings(
        self, ranges: np.ndarray, first_blocks: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(docs, tfs, ranges) covering the given term ranges: the segment's raw
        arrays when at hand, else only these terms' blocks unpacked and laid end
        to end (ranges renumbered), so an exhaustive scan never unpacks a segment."""
        if self._raw is None and self.n_postings <= SMALL_POSTINGS:
            self._raw = self._shared_raw()
        if self._raw is not None:
            return self._raw[0], self._raw[1], ranges
        parts = [
            self.term_postings(int(ranges[2 * j]), int(ranges[2 * j + 1]), int(first_blocks[j]))
            for j in range(len(ranges) // 2)
        ]
        sizes = np.array([len(d) for d, _ in parts], np.int64)
        ends = np.cumsum(sizes)
        local = np.empty(len(ranges), np.int64)
        local[0::2] = ends - sizes
        local[1::2] = ends
        docs = np.concatenate([d for d, _ in parts]) if parts else np.empty(0, np.uint32)
        tfs = np.concatenate([t for _, t in parts]) if parts else np.empty((0, 3), np.uint8)
        return docs, tfs, local

    def _shared_raw(self) -> tuple[np.ndarray, np.ndarray]:
        """:attr:`raw`, unpacked once for every view of a shared segment (a server's
        views are renewed after each write; the segment's postings are not)."""
        base = self._base if self._base is not None else self
        with _RAW_LOCK:
            raw = base.raw
        return raw

    @property
    def docs(self) -> np.ndarray:
        return self.raw[0]

    @property
    def tfs(self) -> np.ndarray:
        return self.raw[1]

    @property
    def n_postings(self) -> int:
        if self._offsets is None and self._dict is not None:
            return termdict.n_postings(*self._dict)
        return int(self.offsets[-1]) if len(self.offsets) else 0

    def drop_unpacked(self) -> None:
        """Forget postings unpacked for a merge or an exhaustive scan (formats 4
        and 5), and offsets derived from a compact dictionary."""
        if self._packed is not None and (self.folder / "packed.npy").exists():
            self._raw = None
        if self.compact:
            self._offsets = None

    @property
    def n_docs(self) -> int:
        return int(self.chunk_ids.shape[0])

    @property
    def n_live(self) -> int:
        return int(self.live.sum())

    def term_ranges(self, hashes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Return (ranges [s,e,...], doc freq per term) for hashed query terms."""
        ranges, df, _ = self.lookup(hashes, blocks=False)
        return ranges, df

    def lookup(
        self, hashes: np.ndarray, *, blocks: bool = True
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(ranges [s,e,...], doc freq, first block number) per hashed query term.

        Terms not in the segment get an empty range and first block 0.
        """
        n_terms = len(self.terms)
        if not n_terms:
            zeros = np.zeros(len(hashes), np.int64)
            return np.zeros(2 * len(hashes), np.int64), zeros, zeros
        if self.compact:
            ranges, df, first = termdict.lookup(self.terms, *self.term_dict, hashes)
            return ranges, df, first if blocks else np.zeros(len(hashes), np.int64)
        pos = np.searchsorted(self.terms, hashes)
        pos_c = np.minimum(pos, n_terms - 1)
        found = (pos < n_terms) & (self.terms[pos_c] == hashes)
        starts = np.where(found, self.offsets[pos_c], 0)
        ends = np.where(found, self.offsets[pos_c + 1], 0)
        limit = len(self._raw[0]) if self._raw is not None else int(self.offsets[-1])
        if found.any() and ((starts < 0) | (ends < starts) | (ends > limit)).any():
            raise ValueError("term offsets outside the postings")
        ranges = np.empty(2 * len(hashes), np.int64)
        ranges[0::2] = starts
        ranges[1::2] = ends
        first = (
            np.asarray(self.blocks["term_blocks"][pos_c], np.int64)
            if blocks
            else np.zeros(len(hashes), np.int64)
        )
        return ranges, ends - starts, first

    def locate(self, chunk_ids: np.ndarray) -> np.ndarray:
        """Local doc numbers of the given chunk ids that live in this segment."""
        if self._sorted_ids is None:
            order = np.argsort(self.chunk_ids, kind="stable")
            self._sorted_ids = order
        order = self._sorted_ids
        sorted_ids = self.chunk_ids[order]
        pos = np.searchsorted(sorted_ids, chunk_ids)
        pos_c = np.minimum(pos, max(len(sorted_ids) - 1, 0))
        hit = (
            (pos < len(sorted_ids)) & (sorted_ids[pos_c] == chunk_ids)
            if len(sorted_ids)
            else (np.zeros(len(chunk_ids), bool))
        )
        return order[pos_c[hit]]

    def delete(self, chunk_ids: np.ndarray) -> int:
        """Clear live bits of these chunk ids in memory; return how many changed."""
        local = self.locate(chunk_ids)
        if local.size == 0:
            return 0
        before = int(self.live[local].sum())
        if before:
            self.live = np.array(self.live, copy=True)
            self.live[local] = 0
        return before

    def save_live(self) -> None:
        live = self.live
        replace_atomically(
            self.folder / "live.npy", lambda fh: np.save(fh, live), self.folder / "live.npy.tmp"
        )


def merge_segments(segments: Sequence[Segment], folder: Path) -> None:
    """Write one segment holding the live docs of ``segments``, in their order.

    Two passes over the inputs keep memory near the size of the output: the
    first counts postings per term, the second scatters one segment at a time.
    A segment whose arrays turn out damaged (a change the quick check on open
    cannot see) stops the merge with one :class:`IndexCorruptError` naming
    it; nothing is written.
    """
    keep = [np.flatnonzero(s.live) for s in segments]
    chunk_ids = np.concatenate([s.chunk_ids[k] for s, k in zip(segments, keep, strict=True)])
    lens = np.concatenate([s.lens[k] for s, k in zip(segments, keep, strict=True)])
    if packing.NATIVE:
        inputs: list[tuple[np.ndarray, ...]] = []
        base = 0
        for s, k in zip(segments, keep, strict=True):
            remap = np.full(s.n_docs, -1, np.int32)
            remap[k] = np.arange(base, base + len(k), dtype=np.int32)
            base += len(k)
            with reading_segment(s.folder):
                p, maxtf = s.packed, s.blocks["blk_maxtf"]
                inputs.append(
                    (s.terms, s.offsets, p["packed"], p["blk_pos"], p["blk_last"], maxtf, remap)
                )
            s.drop_unpacked()  # the input tuple holds the derived offsets
        # streamed term by term in C, packed as it goes: raw postings are
        # held for one term at a time, never for the whole output
        arrays: dict[str, np.ndarray] = {
            "chunk_ids": chunk_ids.astype(np.int64),
            "lens": lens.astype(np.uint32),
        }
        try:
            arrays.update(packing.merge_packed(inputs, arrays["lens"]))
        except ValueError as exc:  # the C merge names the damaged input by its place
            n = exc.args[0] if len(exc.args) == 2 and isinstance(exc.args[0], int) else -1
            raise damaged_segment(
                segments[n].folder if 0 <= n < len(segments) else folder, exc
            ) from None
        _write_folder(folder, arrays)
        del arrays
        # the merged arrays were the process's largest allocations: give their
        # pages back now, not at some later trim (a KB process goes on to serve queries)
        release_free_heap()
        return
    terms = np.unique(np.concatenate([np.asarray(s.terms) for s in segments]))
    counts = np.zeros(len(terms), np.int64)
    for s in segments:
        with reading_segment(s.folder):
            counts += _live_term_counts(s, np.searchsorted(terms, s.terms), len(terms))
    offsets = np.zeros(len(terms) + 1, np.int64)
    np.cumsum(counts, out=offsets[1:])
    docs = np.empty(int(offsets[-1]), np.uint32)
    tfs = np.empty((int(offsets[-1]), N_FIELDS), np.uint8)
    fill = offsets[:-1].copy()
    base = 0
    # int32 temporaries (terms, docs and positions all fit): merge memory is
    # dominated by these per-posting arrays.
    for s, k in zip(segments, keep, strict=True):
        remap = np.full(s.n_docs, -1, np.int32)
        remap[k] = np.arange(base, base + len(k), dtype=np.int32)
        base += len(k)
        with reading_segment(s.folder):
            _scatter(s, terms, remap, fill, docs, tfs)
        s.drop_unpacked()
    nonempty = counts > 0
    if not nonempty.all():
        terms = terms[nonempty]
        offsets = np.r_[0, np.cumsum(counts[nonempty])]
    write_segment(folder, chunk_ids, lens, terms, offsets, docs, tfs)


def _scatter(
    s: Segment,
    terms: np.ndarray,
    remap: np.ndarray,
    fill: np.ndarray,
    docs: np.ndarray,
    tfs: np.ndarray,
) -> None:
    """Copy the live postings of ``s`` to their places in the merged arrays
    (``fill``: each merged term's next free slot, advanced)."""
    tpos = np.searchsorted(terms, s.terms).astype(np.int32)
    if len(tpos) > 1 and not bool(np.all(tpos[1:] > tpos[:-1])):
        # the placement below relies on it: out of order, postings would land on
        # other terms' slots and leave some of the merged arrays unwritten
        raise damaged_segment(s.folder, ValueError("term hashes not in ascending order"))
    post_term = np.repeat(tpos, np.diff(s.offsets))
    new_doc = remap[s.docs]
    ok = new_doc >= 0
    if not ok.all():
        post_term, new_doc = post_term[ok], new_doc[ok]
    # postings of one term inside one segment are contiguous and ascending
    tcounts = np.bincount(post_term, minlength=len(terms))
    first = np.r_[0, np.cumsum(tcounts)[:-1]]
    dest = fill[post_term]
    dest -= first[post_term]
    dest += np.arange(len(post_term))
    del first
    docs[dest] = new_doc
    tfs[dest] = s.tfs[ok] if not ok.all() else s.tfs
    fill += tcounts


def _live_term_counts(seg: Segment, tpos: np.ndarray, n_terms: int) -> np.ndarray:
    """Postings per (merged) term number that belong to live docs."""
    per_term = np.diff(seg.offsets)
    if seg.live.all():
        return np.bincount(tpos, weights=per_term, minlength=n_terms).astype(np.int64)
    alive = seg.live.astype(bool)[seg.docs]
    post_term = np.repeat(tpos, per_term)
    return np.bincount(post_term[alive], minlength=n_terms).astype(np.int64)
