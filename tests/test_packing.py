"""Bit-packed postings (segment format 4): native packer vs the Python reference."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from clawkb.index import packing
from clawkb.index.blocks import block_arrays


def _postings(rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    """Random postings: empty, single and multi-block terms, gaps up to 2^31,
    frequencies 0-255 with absent fields."""
    n_docs = int(rng.choice([1, 300, 5000, 1 << 31]))
    offsets, docs = [0], []
    for _ in range(int(rng.integers(1, 30))):
        df = int(rng.integers(0, min(n_docs, 700) + 1))
        d = np.unique(rng.integers(0, n_docs, size=df))
        docs.append(d)
        offsets.append(offsets[-1] + len(d))
    doc_arr = np.concatenate(docs).astype(np.uint32)
    tfs = rng.integers(0, int(rng.integers(1, 257)), size=(len(doc_arr), 3)).astype(np.uint8)
    tfs[:, int(rng.integers(0, 3))] = 0
    off = np.array(offsets, np.int64)
    # field lengths only feed the other bound; one doc's worth, looked up by doc 0
    lens = np.zeros((1, 3), np.uint32)
    return off, doc_arr, tfs, block_arrays(off, doc_arr * 0, tfs, lens)["blk_maxtf"]


@pytest.mark.parametrize("seed", range(8))
def test_pack_round_trips_and_matches_the_python_reference(seed: int) -> None:
    off, docs, tfs, maxtf = _postings(np.random.default_rng(seed))
    p = packing.pack(off, docs, tfs, maxtf)
    got_docs, got_tfs = packing.unpack(off, p["packed"], p["blk_pos"], p["blk_last"], maxtf)
    assert np.array_equal(got_docs, docs) and np.array_equal(got_tfs, tfs)
    ref, ref_pos, ref_last = packing._pack_python(off, docs, tfs, maxtf)
    assert p["packed"].tobytes() == ref
    assert p["blk_pos"].tobytes() == ref_pos and p["blk_last"].tobytes() == ref_last
    d2, t2 = np.empty_like(docs), np.empty_like(tfs)
    packing._unpack_python(off, ref, p["blk_pos"], p["blk_last"], maxtf, d2, t2)
    assert np.array_equal(d2, docs) and np.array_equal(t2, tfs)


def test_packed_postings_are_much_smaller_than_raw_ones() -> None:
    """Dense lists of small frequencies (the common case) pack to ~1-2 bytes a posting."""
    rng = np.random.default_rng(5)
    docs = np.sort(rng.choice(100_000, 20_000, replace=False)).astype(np.uint32)
    tfs = np.zeros((len(docs), 3), np.uint8)
    tfs[:, 1] = rng.integers(1, 4, size=len(docs))
    off = np.array([0, len(docs)], np.int64)
    maxtf = block_arrays(off, docs, tfs, np.ones((100_000, 3), np.uint32))["blk_maxtf"]
    p = packing.pack(off, docs, tfs, maxtf)
    assert p["packed"].nbytes < 0.3 * (docs.nbytes + tfs.nbytes)


def test_native_merge_writes_the_same_segment_as_the_numpy_merge(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The streamed C merge (packed inputs, deleted docs dropped, terms left
    without postings dropped) equals the two-pass numpy merge."""
    from clawkb.index.segment import (
        DocFields,
        Segment,
        build_arrays,
        hash_terms,
        merge_segments,
        write_segment,
    )

    if not packing.NATIVE:
        pytest.skip("native packer not built")
    rng = np.random.default_rng(3)
    vocab = [f"t{i}" for i in range(400)]
    segs = []
    for s in range(3):
        docs = [
            DocFields(
                1000 * s + i,
                list(rng.choice(vocab, int(rng.integers(0, 3)))),
                list(rng.choice(vocab[: 50 + 100 * s], int(rng.integers(1, 60)))),
                ["only_in_a_deleted_doc"] if (s, i) == (1, 7) else [],
            )
            for i in range(300 + 100 * s)
        ]
        write_segment(tmp_path / f"s{s}", *build_arrays(iter(docs)))
        seg = Segment(tmp_path / f"s{s}")
        seg.delete(np.array([1000 * s + i for i in range(0, 300, 7)], np.int64))
        segs.append(seg)
    merge_segments(segs, tmp_path / "native")
    monkeypatch.setattr(packing, "NATIVE", False)
    merge_segments(segs, tmp_path / "numpy")
    a, b = Segment(tmp_path / "native"), Segment(tmp_path / "numpy")
    for name in ("chunk_ids", "lens", "terms", "offsets", "docs", "tfs"):
        assert np.array_equal(np.asarray(getattr(a, name)), np.asarray(getattr(b, name))), name
    # packed as it merges: the same files, byte for byte, as packing the merged arrays
    names = sorted(f.name for f in (tmp_path / "numpy").iterdir())
    assert names == sorted(f.name for f in (tmp_path / "native").iterdir())
    for name in names:
        assert (tmp_path / "native" / name).read_bytes() == (
            tmp_path / "numpy" / name
        ).read_bytes(), name
    gone = hash_terms(["only_in_a_deleted_doc"])[0]
    assert gone in set(segs[1].terms.tolist()) and gone not in set(a.terms.tolist())


def _entries(rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    """Inverted entries as the inverter emits them: docs ascending; per doc a few
    terms in up to three fields (a term may appear in several fields of a doc);
    some terms of the table in no doc at all."""
    n_terms = int(rng.integers(1, 400))
    rank, doc, field, tf = [], [], [], []
    for d in range(int(rng.integers(0, 300))):
        for f in range(3):
            for t in np.unique(rng.integers(0, n_terms, size=int(rng.integers(0, 12)))):
                rank.append(t)
                doc.append(d * 7)  # gaps between doc numbers
                field.append(f)
                tf.append(int(rng.integers(1, 256)))
    return (
        np.array(rank, np.uint32),
        np.array(doc, np.uint32),
        np.array(field, np.uint8),
        np.array(tf, np.uint8),
        n_terms,
    )


def _assemble_reference(rank, doc, field, tf, n_terms):  # type: ignore[no-untyped-def]
    rows: dict[tuple[int, int], list[int]] = {}
    for r, d, f, t in zip(rank.tolist(), doc.tolist(), field.tolist(), tf.tolist(), strict=True):
        rows.setdefault((r, d), [0, 0, 0])[f] = t
    keys = sorted(rows)
    off = np.searchsorted(np.array([k[0] for k in keys], np.int64), np.arange(n_terms + 1))
    docs = np.array([k[1] for k in keys], np.uint32)
    tfs = np.array([rows[k] for k in keys], np.uint8).reshape(-1, 3)
    return off.astype(np.int64), docs, tfs


@pytest.mark.skipif(not packing.NATIVE, reason="assemble is native only")
@pytest.mark.parametrize("seed", range(6))
def test_assemble_folds_fields_and_orders_postings_by_term_then_doc(seed: int) -> None:
    entries = _entries(np.random.default_rng(seed))
    off, docs, tfs = packing.assemble(*entries)
    ref_off, ref_docs, ref_tfs = _assemble_reference(*entries)
    assert np.array_equal(off, ref_off)
    assert np.array_equal(docs, ref_docs) and np.array_equal(tfs, ref_tfs)


@pytest.mark.skipif(not packing.NATIVE, reason="assemble is native only")
def test_assemble_rejects_a_rank_outside_the_term_table() -> None:
    rank, doc, field, tf, n_terms = _entries(np.random.default_rng(1))
    rank = rank.copy()
    rank[len(rank) // 2] = n_terms
    with pytest.raises(ValueError, match="out of range"):
        packing.assemble(rank, doc, field, tf, n_terms)
