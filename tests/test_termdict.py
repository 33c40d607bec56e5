"""The compact term dictionary (segment format 5): native and Python lookups
agree with the plain offsets it replaces, escapes and group edges included."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from clawkb.index import termdict
from clawkb.index.segment import DocFields, Segment, build_arrays, hash_terms, write_segment


def _offsets(rng: np.random.Generator, n_terms: int) -> np.ndarray:
    df = rng.choice([1, 1, 1, 2, 5, 127, 128, 129, 254, 255, 256, 1000, 70_000], n_terms)
    return np.concatenate([[0], np.cumsum(df)]).astype(np.int64)


@pytest.mark.parametrize("n_terms", [0, 1, 31, 32, 33, 500])
def test_lookup_matches_plain_offsets(n_terms: int) -> None:
    rng = np.random.default_rng(n_terms)
    off = _offsets(rng, n_terms)
    terms = np.unique(rng.integers(1, 2**62, n_terms)).astype(np.uint64) * np.uint64(2)
    assert len(terms) == n_terms
    enc = termdict.encode(off)
    assert enc["dfs"].dtype == np.uint8 and enc["dict_index"].dtype == np.int64
    assert np.array_equal(termdict.offsets(enc["dfs"], enc["dict_index"]), off)
    per_term = (np.diff(off) + 127) // 128
    blocks = np.concatenate([[0], np.cumsum(per_term)]).astype(np.uint32)
    assert np.array_equal(termdict.term_blocks(enc["dfs"], enc["dict_index"]), blocks)
    assert termdict.n_postings(enc["dfs"], enc["dict_index"]) == int(off[-1])
    missing = np.array([1, 2**63 + 5], np.uint64)  # never drawn (odd / too big)
    queries = np.concatenate([terms[::-1], missing]) if n_terms else missing
    got = termdict.lookup(terms, enc["dfs"], enc["dict_index"], queries)
    ref = termdict._lookup_python(terms, enc["dfs"], enc["dict_index"], queries)
    for a, b in zip(got, ref, strict=True):
        assert np.array_equal(a, b)
    ranges, df, first = got
    for q, h in enumerate(queries.tolist()):
        pos = np.searchsorted(terms, h)
        if pos < n_terms and terms[pos] == h:
            assert (ranges[2 * q], ranges[2 * q + 1]) == (off[pos], off[pos + 1])
            assert first[q] == blocks[pos] and df[q] == off[pos + 1] - off[pos]
        else:
            assert ranges[2 * q] == ranges[2 * q + 1] == 0 and first[q] == 0


def test_segment_files_and_lookup(tmp_path: Path) -> None:
    """A written segment holds the compact dictionary, not offsets, and looks
    terms up as the plain arrays would."""
    docs = [DocFields(i, ["t"], ["common"] + [f"w{i % 300}"] * (1 + i % 3), []) for i in range(900)]
    write_segment(tmp_path / "s", *build_arrays(iter(docs)))
    names = {p.name for p in (tmp_path / "s").iterdir()}
    assert {"dfs.npy", "dict_index.npy"} <= names
    assert not names & {"offsets.npy", "term_blocks.npy"}
    seg = Segment(tmp_path / "s")
    ranges, df, _ = seg.lookup(hash_terms(["common", "w7", "absent"]))
    assert df.tolist() == [900, 3, 0]
    assert seg.n_postings == int(seg.offsets[-1]) == int(np.diff(seg.offsets).sum())
    d = seg.docs[ranges[2] : ranges[3]]
    assert d.tolist() == [7, 307, 607]


def test_minlen_codes_are_tight_lower_bounds() -> None:
    from clawkb.index.blocks import LEN_OF_CODE, minlen_codes

    lengths = np.arange(0, 70_000)
    dec = LEN_OF_CODE[minlen_codes(lengths)].astype(np.int64)
    assert (dec <= lengths).all()
    assert (dec[:96] == lengths[:96]).all()
    low = lengths <= int(LEN_OF_CODE[-1])
    assert ((lengths[low] - dec[low]) <= lengths[low] / 27).all()  # within one 1/28 step


def test_native_merge_codes_long_fields_like_python(tmp_path: Path) -> None:
    """Block minimum lengths past the exact range: the C merge and the numpy
    bounds agree code for code."""
    from clawkb.index import packing
    from clawkb.index.segment import merge_segments

    if not packing.NATIVE:
        pytest.skip("native module not built")
    rng = np.random.default_rng(3)
    segs = []
    for s in range(2):
        docs = [
            DocFields(1000 * s + i, ["t"], ["x"] * int(rng.integers(1, 30_000)), [])
            for i in range(200)
        ]
        write_segment(tmp_path / f"s{s}", *build_arrays(iter(docs)))
        segs.append(Segment(tmp_path / f"s{s}"))
    merge_segments(segs, tmp_path / "m")
    merged = Segment(tmp_path / "m")
    ref = Segment(tmp_path / "s0")  # numpy bounds of the same kind of data
    assert merged.blocks["blk_minlen"].dtype == np.uint8 == ref.blocks["blk_minlen"].dtype
    from clawkb.index.blocks import block_arrays

    again = block_arrays(merged.offsets, merged.docs, merged.tfs, merged.lens)
    assert np.array_equal(again["blk_minlen"], merged.blocks["blk_minlen"])
