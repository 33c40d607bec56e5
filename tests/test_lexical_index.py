"""The BM25F segment index: native and numpy kernels agree, merges and deletes are exact."""

from __future__ import annotations

import math
import os
import random
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from clawkb.index.lexical import BM25FParams, LexicalIndex
from clawkb.index.scorer import NATIVE_AVAILABLE
from clawkb.index.segment import DocFields, hash_terms

#: ``CLAWKB_NO_NATIVE=1`` (the no-compiler leg of ``make test``) turns the C extensions off
#: on purpose; otherwise a missing kernel is a failed build, not a reason to skip.
NATIVE_OFF = os.environ.get("CLAWKB_NO_NATIVE", "") not in ("", "0")


def _need_native(built: bool) -> None:
    if NATIVE_OFF:
        pytest.skip("C extensions turned off (CLAWKB_NO_NATIVE)")
    if not built:
        pytest.fail("the native kernel was not built")


WORDS = [f"w{i}" for i in range(60)] + ["ddr", "阻抗", "走线", "stm32"]


def _docs(n: int, start: int = 1, seed: int = 0) -> list[DocFields]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        body = [rng.choice(WORDS[: 10 + i % 50]) for _ in range(rng.randint(0, 40))]
        title = [rng.choice(WORDS) for _ in range(rng.randint(0, 4))]
        code = [rng.choice(WORDS) for _ in range(rng.randint(0, 6))] if i % 3 == 0 else []
        out.append(DocFields(start + i, title, body, code))
    return out


def _brute(docs: list[DocFields], query: list[str], p: BM25FParams) -> dict[int, float]:
    """Textbook BM25F computed from scratch, as the reference."""
    n = len(docs)
    lens = np.array([[len(d.title), len(d.body), len(d.code)] for d in docs], float)
    avg = np.maximum(lens.mean(axis=0), 1e-9)
    scores: dict[int, float] = {}
    for term in dict.fromkeys(query):
        qw = query.count(term)
        df = sum(1 for d in docs if term in d.title or term in d.body or term in d.code)
        if not df:
            continue
        idf = math.log1p((n - df + 0.5) / (df + 0.5))
        for d, ln in zip(docs, lens, strict=True):
            x = 0.0
            for f, toks in enumerate((d.title, d.body, d.code)):
                tf = toks.count(term)
                b = p.b[f]
                x += p.weights[f] * tf / ((1 - b) + b * ln[f] / avg[f])
            if x > 0:
                scores[d.chunk_id] = scores.get(d.chunk_id, 0.0) + qw * idf * x * (p.k1 + 1) / (
                    x + p.k1
                )
    return scores


@pytest.mark.parametrize("native", [True, False])
def test_scores_match_textbook_bm25f(tmp_path: Path, native: bool) -> None:
    if native:
        _need_native(NATIVE_AVAILABLE)
    docs = _docs(300)
    idx = LexicalIndex(tmp_path / "lex", writable=True)
    idx.apply(docs[:120], [], 1)
    idx.apply(docs[120:], [], 2)  # two segments: global statistics must still be exact
    assert len(idx.segments) == 2
    for query in (["ddr"], ["w3", "w7", "阻抗"], ["w1", "w1", "stm32"], ["nothing-here"]):
        ref = _brute(docs, query, idx.params)
        ids, scores, matched = idx.search(query, k=10, use_native=native, prune=False)
        assert matched == len(ref)
        best = sorted(ref.items(), key=lambda kv: (-kv[1], kv[0]))[:10]
        assert [round(s, 3) for _, s in best] == [round(float(s), 3) for s in scores]
        assert set(ids.tolist()) <= set(ref)


def test_native_and_numpy_agree_on_random_queries(tmp_path: Path) -> None:
    _need_native(NATIVE_AVAILABLE)
    docs = _docs(500, seed=3)
    idx = LexicalIndex(tmp_path / "lex", writable=True)
    idx.apply(docs, [], 1)
    rng = random.Random(7)
    for _ in range(50):
        q = [rng.choice(WORDS) for _ in range(rng.randint(1, 5))]
        a = idx.search(q, k=7, use_native=True, prune=False)
        b = idx.search(q, k=7, use_native=False)
        np.testing.assert_allclose(a[1], b[1], rtol=1e-5)
        assert a[2] == b[2]


def test_deletes_then_merge_keep_results_exact(tmp_path: Path) -> None:
    docs = _docs(400, seed=5)
    idx = LexicalIndex(tmp_path / "lex", writable=True)
    for i in range(0, 400, 50):
        idx.apply(docs[i : i + 50], [], i + 1)
    removed = list(range(1, 401, 3))
    idx.apply([], removed, 1000)
    keep = [d for d in docs if d.chunk_id not in set(removed)]
    q = ["w2", "ddr", "w11"]
    before = idx.search(q, k=20)
    # Like Lucene, document frequencies count deleted docs until a merge drops them.
    assert not set(before[0].tolist()) & set(removed)
    idx.merge()
    assert len(idx.segments) == 1 and idx.segments[0].n_docs == len(keep)
    after = idx.search(q, k=20)
    ref = _brute(keep, q, idx.params)
    best = sorted(ref.items(), key=lambda kv: (-kv[1], kv[0]))[:20]
    assert [c for c, _ in best] == after[0].tolist()
    assert not set(after[0].tolist()) & set(removed)


def test_index_persists_and_reopens(tmp_path: Path) -> None:
    docs = _docs(100)
    idx = LexicalIndex(tmp_path / "lex", writable=True)
    idx.apply(docs, [], 41)
    idx.apply([], [5, 6], 42)
    res = idx.search(["w4"], k=5)
    again = LexicalIndex(tmp_path / "lex")
    assert again.applied_seq == 42
    assert again.search(["w4"], k=5)[0].tolist() == res[0].tolist()
    assert again.n_docs == 98


def test_allowed_filter_and_tiered_merge(tmp_path: Path) -> None:
    idx = LexicalIndex(tmp_path / "lex", writable=True)
    docs = _docs(8 * 12, seed=9)
    for i in range(0, len(docs), 12):
        idx.apply(docs[i : i + 12], [], i + 1)
    assert len(idx.segments) < 8  # eight same-tier segments were merged
    allowed = np.array([d.chunk_id for d in docs if d.chunk_id % 2 == 0], np.int64)
    ids, _, _ = idx.search(["w1", "w5"], k=30, allowed=allowed)
    assert len(ids) and all(i % 2 == 0 for i in ids.tolist())


def test_merge_policy_big_tiers_cap_and_full_segments(tmp_path: Path) -> None:
    """Segments of BIG_DOCS docs or more merge BIG_MERGE_FACTOR at a time (the
    smallest first, within the size cap, kept in index order), and so do the
    smaller ones as one tail tier once a big one exists; a segment over half
    the cap is never merged again; results stay those of the exhaustive scan."""
    idx = LexicalIndex(tmp_path / "lex", writable=True)
    idx.MAX_MERGED_DOCS, idx.BIG_DOCS = 130, 20  # 30-doc segments count as big
    docs = _docs(70 + 5 * 30 + 4 * 5, seed=4)
    idx.apply(docs[:70], [], 1)  # over half the cap: stays as it is
    for i in range(3):
        idx.apply(docs[70 + 30 * i : 100 + 30 * i], [], 2 + i)
    for i in range(3):  # small segments of a large index: one tail tier, 3 < 4
        idx.apply(docs[220 + 5 * i : 225 + 5 * i], [], 5 + i)
    assert [s.n_docs for s in idx.segments] == [70, 30, 30, 30, 5, 5, 5]
    idx.apply(docs[160:190], [], 8)  # a fourth big one: four of 30 fit under the cap
    assert [s.n_docs for s in idx.segments] == [70, 120, 5, 5, 5]
    assert idx.segments[1].chunk_ids.tolist() == [d.chunk_id for d in docs[70:190]]
    idx.apply(docs[190:220], [], 9)
    assert sorted(s.n_docs for s in idx.segments) == [5, 5, 5, 30, 70, 120]
    idx.apply(docs[235:], [], 10)  # a fourth in the tail tier
    assert [s.n_docs for s in idx.segments] == [70, 120, 20, 30]
    for q in (["w1", "w5"], ["w2", "ddr", "阻抗"], ["stm32"]):
        a = idx.search(q, k=20)
        b = idx.search(q, k=20, prune=False)
        assert a[0].tolist() == b[0].tolist() and a[1].tolist() == b[1].tolist(), q


def _same_results(a: LexicalIndex, b: LexicalIndex) -> None:
    for q in (["w1", "w5"], ["w2", "ddr", "阻抗"], ["stm32"], ["w3", "w7", "w9", "w11"]):
        ra, rb = a.search(q, k=20), b.search(q, k=20)
        assert ra[0].tolist() == rb[0].tolist() and ra[1].tolist() == rb[1].tolist(), q


def test_consolidation_after_a_bulk_write_only(tmp_path: Path) -> None:
    """A run that wrote at least CONSOLIDATE_SHARE of the docs a consolidation
    rewrites ends with the index merged into one segment (same results); a
    small run never starts a big merge, whatever the writer wrote before it;
    deleted docs are dropped; CONSOLIDATE_MAX_DOCS splits the output."""
    docs = _docs(400, seed=5)
    idx = LexicalIndex(tmp_path / "lex", writable=True)
    idx.MAX_MERGED_DOCS = 100  # the write path's merges stay small
    for i in range(0, 300, 50):
        idx.apply(docs[i : i + 50], [], 1 + i)
    assert len(idx.segments) > 1 and idx.docs_written == 300
    before = [s.name for s in idx.segments]
    ref = LexicalIndex(tmp_path / "ref", writable=True)
    ref.apply(docs[:300], [], 1)
    assert not idx.consolidate(149)  # under half of the 300 docs it would rewrite
    assert [s.name for s in idx.segments] == before
    assert idx.consolidate(300)
    assert [s.n_docs for s in idx.segments] == [300]
    assert idx.segments[0].chunk_ids.tolist() == [d.chunk_id for d in docs[:300]]
    _same_results(idx, ref)
    reader = LexicalIndex(tmp_path / "lex")  # published
    assert len(reader.segments) == 1
    _same_results(reader, ref)
    reader.close()
    # a small run after it: its own segment stays, however much came before
    idx.apply(docs[300:310], [], 400)
    start = idx.docs_written - 10
    assert not idx.consolidate(idx.docs_written - start)
    assert [s.n_docs for s in idx.segments] == [300, 10]
    # deletes: dropped by the merge (the index then scores as a fresh one of its
    # live docs: document frequencies no longer count the deleted ones)
    idx.apply([], [d.chunk_id for d in docs[:200]], 401)
    assert idx.consolidate(110)
    assert [(s.n_docs, s.n_live) for s in idx.segments] == [(110, 110)]
    fresh = LexicalIndex(tmp_path / "fresh", writable=True)
    fresh.apply(docs[200:310], [], 1)
    _same_results(idx, fresh)
    # the size cap: runs of adjacent segments, none over CONSOLIDATE_MAX_DOCS
    idx.apply(docs[310:355], [], 402)
    idx.apply(docs[355:400], [], 403)
    idx.CONSOLIDATE_MAX_DOCS = 150
    assert [s.n_live for s in idx.segments] == [110, 45, 45]
    assert idx.consolidate(90)
    assert [s.n_live for s in idx.segments] == [110, 90]
    fresh.apply(docs[310:400], [], 2)
    _same_results(idx, fresh)


def test_rebuild_ends_consolidated(tmp_path: Path) -> None:
    """A rebuild wrote every doc: its staged segments are published as one."""
    docs = _docs(240, seed=6)
    idx = LexicalIndex(tmp_path / "lex", writable=True)
    idx.begin_rebuild()
    for i in range(0, 240, 40):
        idx.apply(docs[i : i + 40], [], -1)
    idx.finish_rebuild(7)
    assert [s.n_docs for s in idx.segments] == [240] and idx.applied_seq == 7
    ref = LexicalIndex(tmp_path / "ref", writable=True)
    ref.apply(docs, [], 1)
    _same_results(idx, ref)


def test_orphan_segments_of_a_crashed_writer_are_removed(tmp_path: Path) -> None:
    idx = LexicalIndex(tmp_path / "lex", writable=True)
    idx.apply(_docs(10), [], 1)
    (tmp_path / "lex" / "seg-999999.tmp").mkdir()
    (tmp_path / "lex" / "seg-999998").mkdir()
    LexicalIndex(tmp_path / "lex")  # a reader leaves them alone
    assert (tmp_path / "lex" / "seg-999998").exists()
    LexicalIndex(tmp_path / "lex", writable=True)
    assert not (tmp_path / "lex" / "seg-999998").exists()
    assert not (tmp_path / "lex" / "seg-999999.tmp").exists()


@pytest.mark.parametrize("flush", [None, 50])
def test_native_and_python_inversion_build_identical_segments(
    flush: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Native inversion (C counting sort, several flushed parts when ``flush`` is
    small) builds the same arrays as the Python reference, saturated tfs included."""
    from clawkb.index import segment

    _need_native(segment._native is not None)
    if flush is not None:
        monkeypatch.setattr(segment, "_FLUSH", flush)
    docs = _docs(700, seed=21)
    docs.append(DocFields(9999, ["走线", "阻抗"], ["Ω", "é", "x" * 70], []))
    docs.append(DocFields(10000, [], ["many"] * 300, ["many"] * 2))
    a = segment.build_arrays(iter(docs), use_native=True)
    b = segment.build_arrays(iter(docs), use_native=False)
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x, y)
    terms = ["ddr", "走线阻抗", "", "0x4001_3000", "Ω"]
    assert segment.hash_terms(terms).tolist() == [segment.term_hash(t) for t in terms]


def test_index_from_an_older_engine_is_rebuilt(tmp_path: Path) -> None:
    import json

    idx = LexicalIndex(tmp_path / "lex", writable=True)
    idx.apply(_docs(20), [], 7)
    manifest = tmp_path / "lex" / "manifest.json"
    data = json.loads(manifest.read_text())
    data["engine"] = "clawkb-bm25f-segments/0"
    manifest.write_text(json.dumps(data))
    old = LexicalIndex(tmp_path / "lex")
    assert old.applied_seq == -1 and old.segments == []


def test_pruned_search_returns_the_exhaustive_top_k(tmp_path: Path) -> None:
    """MaxScore pruning must never change results, across segments and filters."""
    rng = random.Random(5)
    vocab = [f"r{i}" for i in range(400)] + ["common"] * 30 + ["often"] * 15
    docs = [
        DocFields(i + 1, [], [rng.choice(vocab) for _ in range(rng.randint(3, 30))], [])
        for i in range(3000)
    ]
    idx = LexicalIndex(tmp_path / "lex", writable=True)
    idx.PRUNE_MIN_POSTINGS = 0  # prune even these short lists
    for i in range(0, 3000, 700):  # several segments of different sizes
        idx.apply(docs[i : i + 700], [], i + 1)
    allowed = np.array([d.chunk_id for d in docs if d.chunk_id % 3], np.int64)
    for trial in range(120):
        q = [rng.choice(vocab) for _ in range(rng.randint(2, 6))]
        for flt in (None, allowed):
            for k in (1, 5, 20):
                a = idx.search(q, k=k, allowed=flt, prune=True)
                b = idx.search(q, k=k, allowed=flt, prune=False)
                assert a[0].tolist() == b[0].tolist(), (trial, q, k)
                np.testing.assert_allclose(a[1], b[1], rtol=1e-6)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_blockmax_search_returns_the_exhaustive_top_k(tmp_path: Path, seed: int) -> None:
    """Block-max MaxScore is exact: same ids, same scores, ties by chunk id, with
    skewed term frequencies (long low-idf lists like CJK unigrams), repeated
    documents (exact ties), deletes, filters and several segments."""
    from clawkb.index.scorer import BLOCKMAX_AVAILABLE

    if not BLOCKMAX_AVAILABLE:
        pytest.skip("block-max kernel not built (no C compiler at install)")
    rng = random.Random(seed)
    common = ["线", "的", "电", "阻"]  # in most docs, like CJK unigrams
    vocab = [f"r{i}" for i in range(300)] + [f"m{i}" for i in range(20)] * 10
    docs = []
    for i in range(4000):
        if i % 97 == 5:  # an exact copy of an earlier doc: equal scores
            src = docs[rng.randrange(len(docs))]
            docs.append(DocFields(i + 1, src.title, src.body, src.code))
            continue
        body = [rng.choice(vocab) for _ in range(rng.randint(2, 40))]
        body += [c for c in common if rng.random() < 0.7] * rng.randint(1, 3)
        title = [rng.choice(vocab) for _ in range(rng.randint(0, 4))]
        code = [rng.choice(vocab) for _ in range(rng.randint(0, 6))] if i % 4 == 0 else []
        docs.append(DocFields(i + 1, title, body, code))
    idx = LexicalIndex(tmp_path / "lex", writable=True)
    idx.BLOCKMAX_MIN_POSTINGS = 0  # use the block-max kernel on every segment
    for start in range(0, 4000, 1300):
        idx.apply(docs[start : start + 1300], [], start + 1)
    idx.apply([], [d.chunk_id for d in docs if d.chunk_id % 11 == 0], 5000)
    allowed = np.array([d.chunk_id for d in docs if d.chunk_id % 3], np.int64)
    for trial in range(60):
        q = [rng.choice(vocab) for _ in range(rng.randint(1, 4))]
        q += rng.sample(common, rng.randint(0, 4))
        for flt in (None, allowed):
            for k in (1, 10, 50):
                a = idx.search(q, k=k, allowed=flt, prune=True)
                b = idx.search(q, k=k, allowed=flt, prune=False)
                assert a[0].tolist() == b[0].tolist(), (trial, q, k)
                assert a[1].tolist() == b[1].tolist(), (trial, q, k)


def _as_format3(folder: Path, seg: Any) -> None:
    """Rewrite a copied segment folder in the unpacked layout (format 3)."""
    np.save(folder / "docs.npy", np.asarray(seg.docs))
    np.save(folder / "tfs.npy", np.asarray(seg.tfs))
    np.save(folder / "offsets.npy", np.asarray(seg.offsets))
    np.save(folder / "term_blocks.npy", np.asarray(seg.term_blocks))
    for name in ("packed", "blk_pos", "blk_last", "dfs", "dict_index"):
        (folder / f"{name}.npy").unlink(missing_ok=True)


def test_segments_without_block_files_still_search(tmp_path: Path) -> None:
    """A format-3 segment without block files (an older layout) gets its bounds
    and packed postings computed in memory, equal to the stored ones; inside a
    published index missing block files are damage the manifest check reports
    (and readers rebuild from the store)."""
    from clawkb.index.segment import Segment

    rng = random.Random(9)
    vocab = [f"w{i}" for i in range(50)]
    docs = [DocFields(i + 1, [], [rng.choice(vocab) for _ in range(12)], []) for i in range(500)]
    idx = LexicalIndex(tmp_path / "lex", writable=True)
    idx.apply(docs, [], 1)
    expected = idx.search(["w1", "w2", "w3"], k=5, prune=False)
    assert len(expected[0]) == 5
    for seg in idx.segments:
        stored = {n: np.array(a) for n, a in seg.blocks.items()}
        copy = tmp_path / "copy" / seg.folder.name
        shutil.copytree(seg.folder, copy)
        _as_format3(copy, seg)
        for name in ("blk_maxtf", "blk_minlen", "term_blocks"):
            (copy / f"{name}.npy").unlink()
        old_layout = Segment(copy)
        computed = old_layout.blocks
        for name, arr in stored.items():
            assert np.array_equal(np.asarray(computed[name]), arr), name
        for name, arr in seg.packed.items():
            assert np.array_equal(np.asarray(old_layout.packed[name]), np.asarray(arr)), name
        for name in ("blk_maxtf", "blk_minlen", "term_blocks"):
            (seg.folder / f"{name}.npy").unlink(missing_ok=True)  # format 5: no term_blocks
    old = LexicalIndex(tmp_path / "lex")
    assert old.damaged and "blk_" in old.damaged, old.damaged
    assert old.search(["w1", "w2", "w3"], k=5)[0].tolist() == []


def test_blockmax_skips_the_long_low_idf_lists(tmp_path: Path) -> None:
    """Common terms in every doc (CJK unigrams) next to rare ones: the kernel
    must score only a small share of the matching docs, and still be exact."""
    from clawkb.index import scorer

    if not scorer.BLOCKMAX_AVAILABLE:
        pytest.skip("block-max kernel not built (no C compiler at install)")
    rng = random.Random(4)
    common = ["线", "的", "电", "阻"]
    vocab = [f"r{i}" for i in range(300)]
    docs = [
        DocFields(i + 1, [], [rng.choice(vocab) for _ in range(rng.randint(2, 40))] + common, [])
        for i in range(4000)
    ]
    idx = LexicalIndex(tmp_path / "lex", writable=True)
    idx.apply(docs, [], 1)
    seg = idx.segments[0]
    counts = []
    for _ in range(20):
        q = [rng.choice(vocab), rng.choice(vocab), *common]
        uniq, qw = idx._query_terms(q, None)
        hashes = hash_terms(uniq)
        ranges, df, first = seg.lookup(hashes)
        w = (idx.idf(df) * np.asarray(qw)).astype(np.float32)
        local, sc, scored = scorer.score_topk_blockmax(
            seg.packed,
            idx._factor(seg),
            ranges,
            first,
            seg.blocks,
            w,
            seg.live,
            idx._block_params(),
            idx.params.k1,
            10,
        )
        args = (seg.docs, seg.tfs, idx._factor(seg), ranges)
        exp_local, exp_sc, matched = scorer.score_topk(*args, w, seg.live, idx.params.k1, 10)
        assert local.tolist() == exp_local.tolist() and sc.tolist() == exp_sc.tolist()
        counts.append((scored, matched))
    assert all(m == 4000 for _, m in counts)
    assert sum(s for s, _ in counts) < 0.1 * sum(m for _, m in counts), counts


def test_explain_reads_one_terms_blocks_and_matches_the_search_score(tmp_path: Path) -> None:
    """Explain decodes only the query terms' blocks of a packed segment (nothing
    else is unpacked) and its per-term total equals the ranked score, for a doc
    in a term's third block."""
    docs = [DocFields(i + 1, [], ["common"] * (1 + i % 3) + [f"u{i}"], []) for i in range(400)]
    idx = LexicalIndex(tmp_path / "lex", writable=True)
    idx.apply(docs, [], 1)
    ids, scores, _ = idx.search(["common", "u300"], k=1)
    assert ids.tolist() == [301]
    seg = idx.segments[0]
    seg.drop_unpacked()
    info = idx.explain(["common", "u300"], 301)
    assert {t["term"] for t in info["terms"]} == {"common", "u300"}
    assert info["total"] == pytest.approx(float(scores[0]), rel=1e-5)
    assert seg._raw is None or not (seg.folder / "packed.npy").exists()


@pytest.mark.parametrize("exact", [True, False])
def test_cached_block_bounds_are_right_and_follow_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, exact: bool
) -> None:
    """The kernel caches, per block it bounds, a bound of the block's BM25F
    pseudo-frequencies: exact (``EXACT_BLOCK_BOUNDS``), it must equal their
    maximum computed from the raw postings; loose (the default), the bound from
    the block's max tf and min lengths, never below that maximum. A write that
    changes the average lengths (every doc's factor) must drop the cache, so
    searches stay equal to the exhaustive scan."""
    from clawkb.index.blocks import LEN_OF_CODE
    from clawkb.index.scorer import BLOCKMAX_AVAILABLE

    if not BLOCKMAX_AVAILABLE:
        pytest.skip("block-max kernel not built (no C compiler at install)")
    import clawkb.index.lexical as lexical_mod

    monkeypatch.setattr(lexical_mod, "EXACT_BLOCK_BOUNDS", exact)
    rng = random.Random(21)
    common = ["线", "电", "阻"]
    vocab = [f"r{i}" for i in range(200)]

    def make(start: int, n: int, long_docs: bool) -> list[DocFields]:
        out = []
        for i in range(start, start + n):
            body = [rng.choice(vocab) for _ in range(rng.randint(2, 90 if long_docs else 20))]
            body += rng.sample(vocab[:12], rng.randint(0, 3))
            body += [c for c in common if rng.random() < 0.6] * rng.randint(1, 3)
            title = [rng.choice(vocab + common) for _ in range(rng.randint(0, 3))]
            out.append(DocFields(i, title, body, []))
        return out

    idx = LexicalIndex(tmp_path / "lex", writable=True)
    idx.apply(make(1, 1500, False), [], 1)
    # no list short enough for the warm-up pass to settle the top k alone
    queries = [rng.sample(vocab[:12] + common, rng.randint(2, 5)) for _ in range(60)]

    def check() -> None:
        for q in queries:
            a = idx.search(q, k=10)
            b = idx.search(q, k=10, prune=False)
            assert a[0].tolist() == b[0].tolist() and a[1].tolist() == b[1].tolist(), q

    check()
    seg = idx.segments[0]
    entry = next(e for e in idx._native_args or [] if e[0] is seg)
    cache = entry[3]
    assert (cache != 0).sum() > 0
    x = (seg.tfs.astype(np.float32) * idx._factor(seg)[seg.docs]).sum(axis=1, dtype=np.float32)
    par = idx._block_params()
    blk_last = np.asarray(seg.packed["blk_last"])
    first = seg.term_blocks
    offsets = np.asarray(seg.offsets)
    checked = 0
    for t in range(len(offsets) - 1):
        s, e = int(offsets[t]), int(offsets[t + 1])
        for j, p in enumerate(range(s, e, 128)):
            b = int(first[t]) + j
            assert int(seg.docs[min(p + 127, e - 1)]) == int(blk_last[b])
            if cache[b] != 0:
                want = float(x[p : min(p + 128, e)].max())
                if exact:
                    assert cache[b] == (want if want > 0 else -1.0), (t, j)
                else:
                    lens = LEN_OF_CODE[np.asarray(seg.blocks["blk_minlen"][b], np.int64)]
                    maxtf = np.asarray(seg.blocks["blk_maxtf"][b], np.float64)
                    wf, bf, avg = (np.asarray(par[i : i + 3], np.float64) for i in (0, 3, 6))
                    loose = float((maxtf * wf / ((1 - bf) + bf * lens / avg)).sum())
                    assert cache[b] == pytest.approx(loose, rel=1e-5), (t, j)
                    assert cache[b] >= want * (1 - 1e-6), (t, j)
                checked += 1
    assert checked > 20
    # longer docs change the averages and so every factor: bounds must follow.
    # The new segment is the bigger one: searched first, it sets the bar the
    # old segment's (recomputed) bounds are pruned against.
    idx.apply(make(1501, 3000, True), [], 2)
    assert [s.n_docs for s in idx.segments] == [1500, 3000]
    check()


def test_readers_share_segment_maps_but_not_live_masks(tmp_path: Path) -> None:
    """Readers of one process map a segment once (a server renews a view per thread
    after every write); each keeps its own live mask, so a reader of an older
    generation still sees the chunks a later one deleted."""
    docs = _docs(120, seed=3)
    writer = LexicalIndex(tmp_path / "lex", writable=True)
    writer.apply(docs[:60], [], 1)
    writer.apply(docs[60:], [], 2)
    old = LexicalIndex(tmp_path / "lex")
    again = LexicalIndex(tmp_path / "lex")
    assert len(old.segments) == 2
    for a, b in zip(old.segments, again.segments, strict=True):
        assert a is not b and a.terms is b.terms and a.chunk_ids is b.chunk_ids
        assert a.live is not b.live
    gone = [d.chunk_id for d in docs[:60] if "w3" in d.body][:5]
    assert gone
    writer.apply([], gone, 3)
    new = LexicalIndex(tmp_path / "lex")
    old_ids = set(old.search(["w3"], k=200)[0].tolist())
    new_ids = set(new.search(["w3"], k=200)[0].tolist())
    assert set(gone) <= old_ids and not set(gone) & new_ids
    assert new_ids == old_ids - set(gone)
    # merged-away segments leave the shared set when a reader opens the new generation
    writer.merge()
    merged = LexicalIndex(tmp_path / "lex")
    assert set(merged.search(["w3"], k=200)[0].tolist()) == new_ids
    from clawkb.index import segment

    mine = [k for k in segment._SHARED if k.startswith(str(tmp_path / "lex"))]
    assert sorted(Path(k).name for k in mine) == [s.name for s in merged.segments]
    # the shared set holds only segments an open reader still uses
    for reader in (old, again, new, merged):
        reader.close()
    del a, b
    assert not [k for k in segment._SHARED if k.startswith(str(tmp_path / "lex"))]


def test_manifest_to_dict_is_asdict() -> None:
    """The manifest's own dict form (every publish writes it) stays the dataclass's,
    field for field, when fields are added."""
    from dataclasses import asdict

    from clawkb.index.lexical import _Manifest

    m = _Manifest(
        segments=["seg-000001"],
        applied_seq=3,
        next_segment=2,
        generation=4,
        store_id="s",
        live={"seg-000001": "live-00000004.npy"},
        files={"seg-000001/terms.npy": [10, 20]},
    )
    assert m.to_dict() == asdict(m)


def test_vector_and_scalar_block_decoding_give_the_same_results(tmp_path: Path) -> None:
    """The AVX2 doc-gap decoder (taken where the CPU has it) and the scalar loop
    decode every block alike: rare terms (wide gaps), common ones (narrow gaps)
    and last blocks of every length give the same ids and scores both ways."""
    from clawkb.index import scorer

    if not scorer.BLOCKMAX_AVAILABLE:
        pytest.skip("block-max kernel not built (no C compiler at install)")
    kernel = scorer._blockmax
    rng = random.Random(7)
    vocab = [f"v{i}" for i in range(2000)]
    docs = []
    for i in range(6000):
        body = [vocab[min(int(rng.paretovariate(0.7)), 1999)] for _ in range(rng.randint(3, 30))]
        docs.append(DocFields(i + 1, [], body, [rng.choice(vocab)] if i % 5 == 0 else []))
    idx = LexicalIndex(tmp_path / "lex", writable=True)
    idx.BLOCKMAX_MIN_POSTINGS = 0
    idx.apply(docs, [], 1)
    queries = [rng.sample(vocab[:400], rng.randint(2, 6)) for _ in range(80)]
    was = kernel.vector_decode(True)
    try:
        vec = [idx.search(q, k=20) for q in queries]
        kernel.vector_decode(False)
        idx._invalidate()  # block bounds and impacts filled anew by the scalar path
        sca = [idx.search(q, k=20) for q in queries]
    finally:
        kernel.vector_decode(was)
    assert sum(len(v[0]) for v in vec) > 80 * 10
    for v, s in zip(vec, sca, strict=True):
        assert v[0].tolist() == s[0].tolist()
        assert v[1].tolist() == s[1].tolist()


def test_impact_bytes_on_or_off_give_the_same_results(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The per-posting impact cache (off by default: it held ~130 MB at 0.77M docs
    and saved no CPU) only tightens pruning bounds: with it on, the first pass
    fills it and the second reads it, and both give the ids and scores of the
    default path."""
    from clawkb.index import lexical, scorer

    if not scorer.BLOCKMAX_AVAILABLE:
        pytest.skip("block-max kernel not built (no C compiler at install)")
    rng = random.Random(11)
    vocab = [f"w{i}" for i in range(3000)]
    docs = []
    for i in range(8000):
        body = [vocab[min(int(rng.paretovariate(0.6)), 2999)] for _ in range(rng.randint(3, 40))]
        docs.append(DocFields(i + 1, [rng.choice(vocab)], body, []))
    idx = LexicalIndex(tmp_path / "lex", writable=True)
    idx.BLOCKMAX_MIN_POSTINGS = 0
    idx.apply(docs, [], 1)
    queries = [rng.sample(vocab[:500], rng.randint(2, 6)) for _ in range(60)]
    assert lexical.IMPACTS is False
    plain = [idx.search(q, k=10) for q in queries]
    monkeypatch.setattr(lexical, "IMPACTS", True)
    idx._invalidate()
    filled = [idx.search(q, k=10) for q in queries]
    cached = [idx.search(q, k=10) for q in queries]
    assert any(e[4] is not None and e[4].any() for e in idx._native_args or [])
    assert sum(len(p[0]) for p in plain) > 60 * 5
    for p, f, c in zip(plain, filled, cached, strict=True):
        assert p[0].tolist() == f[0].tolist() == c[0].tolist()
        assert p[1].tolist() == f[1].tolist() == c[1].tolist()


def _member_kb(tmp_path: Path) -> tuple[LexicalIndex, list[DocFields], list[str], list[str]]:
    """Two segments (3,500 + 1,500 docs) where a few common terms get bitmaps."""
    rng = random.Random(11)
    common = ["a0", "a1", "a2", "a3", "a4"]  # in 5-60 % of the docs: get bitmaps
    vocab = [f"u{i}" for i in range(400)]
    docs = []
    for i in range(5000):
        body = [rng.choice(vocab) for _ in range(rng.randint(2, 25))]
        body += [c for j, c in enumerate(common) if rng.random() < 0.05 + 0.12 * j]
        title = [rng.choice(vocab + common)] if i % 3 == 0 else []
        docs.append(DocFields(i + 1, title, body, []))
    idx = LexicalIndex(tmp_path / "lex", writable=True)
    idx.BLOCKMAX_MIN_POSTINGS = 0
    idx.apply(docs[:3500], [], 1)
    idx.apply(docs[3500:], [], 2)
    return idx, docs, common, vocab


@pytest.mark.parametrize("fmt", [5, 6])
def test_membership_bitmaps_give_the_same_results(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fmt: int
) -> None:
    """Long lists found by bitmap and rank (membership bitmaps) instead of seeks
    give the same ids and scores as without them, with deletes, a filter and
    several segments: bitmaps stored in the segment (format 6) or built by the
    kernel at query time (format 5 segments, still read); a zero budget builds
    none at query time and changes nothing either."""
    from clawkb.index import lexical, scorer, segment

    if not scorer.BLOCKMAX_AVAILABLE:
        pytest.skip("block-max kernel not built (no C compiler at install)")
    monkeypatch.setattr(segment, "SEGMENT_FORMAT", fmt)
    idx, docs, common, vocab = _member_kb(tmp_path)
    assert all((s.members is not None) == (fmt == 6) for s in idx.segments)
    idx.apply([], [d.chunk_id for d in docs if d.chunk_id % 13 == 0], 3)
    rng = random.Random(12)
    allowed = np.array([d.chunk_id for d in docs if d.chunk_id % 4], np.int64)
    queries = [
        rng.sample(vocab, rng.randint(1, 3)) + rng.sample(common, rng.randint(1, 5))
        for _ in range(60)
    ]

    def run() -> list[Any]:
        idx._invalidate()
        return [
            idx.search(q, k=k, allowed=f) for q in queries for k in (1, 10) for f in (None, allowed)
        ]

    saved = lexical.MEMBER_DENSITY, lexical.MEMBER_BUDGET
    try:
        lexical.MEMBER_DENSITY, lexical.MEMBER_BUDGET = 32, 4.0
        with_bits = run()
        built = [scorer.member_stats(e[8]) for e in idx._native_args or []]
        lexical.MEMBER_DENSITY = 0
        without = run()
        lexical.MEMBER_DENSITY, lexical.MEMBER_BUDGET = 32, 0.0
        no_budget = run()
        none_built = [scorer.member_stats(e[8]) for e in idx._native_args or []]
    finally:
        lexical.MEMBER_DENSITY, lexical.MEMBER_BUDGET = saved
    if fmt == 6:  # the segments' own bitmaps serve: none built at query time
        assert built and all(n == 0 and stored >= 3 for n, _, stored in built), built
    else:
        assert built and all(n >= 3 and stored == 0 for n, _, stored in built), built
    assert all(n == 0 for n, _, _ in none_built), none_built
    assert sum(len(r[0]) for r in without) > 200
    for a, b, c in zip(with_bits, without, no_budget, strict=True):
        assert a[0].tolist() == b[0].tolist() == c[0].tolist()
        assert a[1].tolist() == b[1].tolist() == c[1].tolist()


def test_stored_membership_bitmaps_match_the_postings(tmp_path: Path) -> None:
    """Format 6's member files hold, for exactly the lists the write rule picks,
    each list's docs as bits and the postings before each word as ranks (a
    plain numpy reference on the decoded postings); merged segments too."""
    from clawkb.index import scorer, segment

    if not scorer.BLOCKMAX_AVAILABLE or segment.SEGMENT_FORMAT < 6:
        pytest.skip("block-max kernel not built (no C compiler at install)")
    idx, _docs, _common, _vocab = _member_kb(tmp_path)
    segs = list(idx.segments)
    idx.merge()  # the merged segment gets its own
    assert len(idx.segments) == 1
    for seg in [*segs, *idx.segments]:
        assert seg.members is not None
        keys, bits, rank = seg.members
        n = seg.n_docs
        df = np.diff(seg.offsets)
        want = segment.member_keys(seg.offsets, n, len(seg.packed["packed"]))
        assert keys.tolist() == want.tolist()
        assert len(keys) >= 3
        assert all(df[i] * segment.MEMBER_DENSITY >= n for i in range(len(df)) if df[i] >= 256)
        docs, _tfs = seg.raw
        blocks = seg.term_blocks
        for (s, e, b0), row_bits, row_rank in zip(keys, bits, rank, strict=True):
            t = int(np.searchsorted(seg.offsets, s))
            assert seg.offsets[t + 1] == e and blocks[t] == b0
            flags = np.zeros(scorer.member_words(n) * 64, bool)
            flags[docs[s:e]] = True
            ref = np.packbits(flags, bitorder="little").view(np.uint64)
            assert row_bits.tolist() == ref.tolist()
            counts = np.array([bin(int(w)).count("1") for w in ref], np.int64)
            assert row_rank.tolist() == (np.cumsum(counts) - counts).tolist()


def test_damaged_stored_bitmap_reads_as_a_damaged_segment(tmp_path: Path) -> None:
    """A member_rank file whose ranks do not count its bits (a flipped word) is
    reported as a damaged segment naming its folder, never read past."""
    from clawkb.errors import IndexCorruptError
    from clawkb.index import scorer, segment

    if not scorer.BLOCKMAX_AVAILABLE or segment.SEGMENT_FORMAT < 6:
        pytest.skip("block-max kernel not built (no C compiler at install)")
    idx, _docs, common, _vocab = _member_kb(tmp_path)
    seg = max(idx.segments, key=lambda s: s.n_docs)
    path = seg.folder / "member_rank.npy"
    rank = np.load(path)
    rank[0, len(rank[0]) // 2] += 7
    np.save(path, rank)  # in place: the segment's map sees it
    idx._invalidate()
    with pytest.raises(IndexCorruptError, match=seg.folder.name):
        idx.search([*common, "u1"], k=10)


def test_field_major_factors_give_the_same_results(tmp_path: Path) -> None:
    """The one-call kernel reads the length factors field-major ([3, N]) as the
    index passes them; the same call on the doc-major [N, 3] rows gives the
    same ids and bit-identical scores (docs with titles, bodies and code)."""
    from clawkb.index import scorer

    if not scorer.BLOCKMAX_AVAILABLE:
        pytest.skip("block-max kernel not built (no C compiler at install)")
    rng = random.Random(5)
    vocab = [f"w{i}" for i in range(300)]
    docs = [
        DocFields(
            i + 1,
            rng.sample(vocab, rng.randint(0, 3)),
            [rng.choice(vocab) for _ in range(rng.randint(1, 40))],
            rng.sample(vocab, rng.randint(0, 2)) if i % 4 == 0 else [],
        )
        for i in range(3000)
    ]
    idx = LexicalIndex(tmp_path / "lex", writable=True)
    idx.apply(docs[:2000], [], 1)
    idx.apply(docs[2000:], [], 2)
    compared = 0
    for _ in range(40):
        terms = rng.sample(vocab[:60], rng.randint(2, 5))
        ids, scores, _ = idx.search(terms, k=10)
        segs = idx._native_segments(None)
        rows = [
            (*s[:8], idx._factor(seg), *s[9:])
            for s, seg in zip(segs, sorted(idx.segments, key=lambda x: -x.n_docs), strict=True)
        ]
        assert all(
            s[8].shape == (3, seg.n_docs)
            for s, seg in zip(segs, sorted(idx.segments, key=lambda x: -x.n_docs), strict=True)
        )
        uniq, weights = idx._query_terms(terms, None)
        args = (
            hash_terms(uniq),
            np.asarray(weights, np.float64),
            idx._block_params(),
            idx.params.k1,
            idx.n_docs,
            10,
        )
        got = scorer.search_segments(rows, *args, field_major=False)
        assert got is not None
        assert got[0].tolist() == ids.tolist() and got[1].tolist() == scores.tolist()
        compared += len(ids)
    assert compared > 200


def test_query_terms_count_repeats_in_first_seen_order() -> None:
    """A bag of query terms: each term once, first-seen order, its count as weight."""
    assert LexicalIndex._query_terms(["b", "a", "c"], None) == (["b", "a", "c"], [1.0, 1.0, 1.0])
    assert LexicalIndex._query_terms(["b", "a", "b", "b"], None) == (["b", "a"], [3.0, 1.0])
    assert LexicalIndex._query_terms([], None) == ([], [])
    assert LexicalIndex._query_terms(["x", "y", "x"], [0.5, 0.0, 1.0]) == (["x"], [1.5])


def test_term_at_a_time_path_gives_the_block_max_results(tmp_path: Path) -> None:
    """The kernel's two ways of scoring a segment, forced (path 1: block-max,
    path 2: term at a time into a dense accumulator) and chosen (0), give the
    same ids and bit-identical scores: titles, bodies and code, two segments,
    deleted docs, an allowed set, short and long lists, k above the matches."""
    from clawkb.index import scorer

    if not scorer.BLOCKMAX_AVAILABLE:
        pytest.skip("block-max kernel not built (no C compiler at install)")
    rng = random.Random(8)
    vocab = [f"w{i}" for i in range(400)]
    docs = [
        DocFields(
            i + 1,
            rng.sample(vocab, rng.randint(0, 3)),
            [rng.choice(vocab[: 20 + i % 380]) for _ in range(rng.randint(1, 40))],
            rng.sample(vocab, rng.randint(0, 2)) if i % 4 == 0 else [],
        )
        for i in range(4000)
    ]
    idx = LexicalIndex(tmp_path / "lex", writable=True)
    idx.apply(docs[:3000], [], 1)
    idx.apply(docs[3000:], [d.chunk_id for d in docs[::7]], 2)
    allowed = np.array([d.chunk_id for d in docs if d.chunk_id % 3], np.int64)
    compared = 0
    for trial in range(60):
        pool = vocab[:30] if trial % 2 else vocab
        terms = rng.sample(pool, rng.randint(2, 6))
        uniq, weights = idx._query_terms(terms, None)
        segs = idx._native_segments(allowed if trial % 3 == 0 else None)
        args = (
            hash_terms(uniq),
            np.asarray(weights, np.float64),
            idx._block_params(),
            idx.params.k1,
            idx.n_docs,
            10 if trial % 5 else 5000,
        )
        got = [scorer.search_segments(segs, *args, field_major=True, path=p) for p in (1, 2, 0)]
        if got[0] is None:
            assert got[1] is None and got[2] is None
            continue
        for other in got[1:]:
            assert other is not None
            assert other[0].tolist() == got[0][0].tolist()
            assert other[1].tobytes() == got[0][1].tobytes()
        compared += len(got[0][0])
    assert compared > 500
