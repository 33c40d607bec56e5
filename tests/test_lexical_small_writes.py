"""Small writes: the floor tier keeps segments few, and the per-segment shortcuts of a
query (one-term searches in the native kernel, the doc-freq memo, small segments'
postings kept unpacked) give exactly the results of the paths they replace."""

from __future__ import annotations

import os
import random
from pathlib import Path

import numpy as np
import pytest

from clawkb.index import segment as segment_mod
from clawkb.index.lexical import BM25FParams, LexicalIndex
from clawkb.index.scorer import BLOCKMAX_AVAILABLE
from clawkb.index.segment import DocFields, hash_terms

NATIVE_OFF = os.environ.get("CLAWKB_NO_NATIVE", "") not in ("", "0")
WORDS = [f"w{i}" for i in range(80)] + ["ddr", "阻抗", "走线", "stm32"]


def _docs(n: int, start: int, seed: int) -> list[DocFields]:
    rng = random.Random(seed)
    return [
        DocFields(
            start + i,
            [rng.choice(WORDS) for _ in range(rng.randint(0, 4))],
            [rng.choice(WORDS[: 10 + i % 70]) for _ in range(rng.randint(1, 40))],
            [rng.choice(WORDS) for _ in range(rng.randint(0, 6))] if i % 3 == 0 else [],
        )
        for i in range(n)
    ]


def _small_writes(idx: LexicalIndex, rounds: int, *, deletes: bool) -> list[int]:
    """One 600-doc write, then ``rounds`` writes of 6 docs (rewriting 6 older docs
    when ``deletes``); the segment count after each write."""
    idx.apply(_docs(600, 1, 0), [], 1)
    counts, next_id, rng = [], 1000, random.Random(5)
    for r in range(rounds):
        gone = rng.sample(range(1, 600), 6) if deletes else []
        idx.apply(_docs(6, next_id, 100 + r), gone, 2 + r)
        next_id += 6
        counts.append(len(idx.segments))
    return counts


def test_floor_tier_keeps_small_writes_to_a_few_segments(tmp_path: Path) -> None:
    """40 small writes: at most FLOOR_MERGE_FACTOR segments beside the first big
    one, which no small write rewrites, and no merge rewrites more than
    FLOOR_MERGE_FACTOR x FLOOR_DOCS docs; without the floor tier (the power-of-8
    tiers alone) seven such writes already leave eight segments."""
    idx = LexicalIndex(tmp_path / "floor", writable=True)
    merged: list[int] = []
    real = idx._merge

    def spy(group: list[segment_mod.Segment]) -> None:
        merged.append(sum(s.n_live for s in group))
        real(group)

    idx._merge = spy  # type: ignore[method-assign]
    counts = _small_writes(idx, 40, deletes=True)
    first = idx.segments[0]
    assert first.name == "seg-000001" and first.n_docs == 600  # never rewritten
    assert max(counts) <= idx.FLOOR_MERGE_FACTOR + 1
    assert merged and max(merged) <= idx.FLOOR_MERGE_FACTOR * idx.FLOOR_DOCS
    old = LexicalIndex(tmp_path / "tiers", writable=True)
    old.FLOOR_DOCS = 0  # the tiers alone
    assert _small_writes(old, 7, deletes=True)[-1] == 8


def test_floor_merged_index_scores_as_one_batch(tmp_path: Path) -> None:
    """After small writes and their floor merges, every query returns the ids and
    scores (bit for bit) of an index written in one batch, on every path."""
    idx = LexicalIndex(tmp_path / "lex", writable=True)
    _small_writes(idx, 20, deletes=False)
    assert 1 < len(idx.segments) <= idx.FLOOR_MERGE_FACTOR + 1
    ref = LexicalIndex(tmp_path / "ref", writable=True)
    docs = _docs(600, 1, 0) + [d for r in range(20) for d in _docs(6, 1000 + 6 * r, 100 + r)]
    ref.apply(docs, [], 1)
    rng = random.Random(2)
    for _ in range(40):
        q = [rng.choice(WORDS) for _ in range(rng.randint(1, 4))]
        for kw in ({}, {"prune": False}, {"use_native": False}):
            a, b = idx.search(q, k=15, **kw), ref.search(q, k=15, **kw)  # type: ignore[arg-type]
            assert a[0].tolist() == b[0].tolist(), (q, kw)
            assert a[1].tolist() == b[1].tolist(), (q, kw)


@pytest.mark.parametrize("deletes", [False, True])
def test_one_term_native_search_matches_the_scan(tmp_path: Path, deletes: bool) -> None:
    """A one-term search through the native kernel gives the scan's ids, scores
    and match count (its document frequency, deleted docs included), with and
    without an allowed set; with deletes some terms' IDF drops to 0 or below
    and the scan answers (the kernel declines)."""
    if NATIVE_OFF or not BLOCKMAX_AVAILABLE:
        pytest.skip("the block-max kernel is off or not built")
    idx = LexicalIndex(tmp_path / "lex", writable=True)
    idx.FLOOR_DOCS = 0  # many segments
    _small_writes(idx, 12, deletes=deletes)
    allowed = np.arange(1, 2000, 3, dtype=np.int64)
    for term in WORDS:
        for kw in ({}, {"allowed": allowed}):
            a = idx.search([term], k=12, **kw)  # type: ignore[arg-type]
            b = idx.search([term], k=12, prune=False, **kw)  # type: ignore[arg-type]
            assert a[0].tolist() == b[0].tolist() and a[1].tolist() == b[1].tolist(), term
            assert a[2] == b[2], term


def test_one_term_with_a_zero_field_weight_counts_by_the_scan(tmp_path: Path) -> None:
    """A field weighted 0 scores some postings 0: those are not matches, so the
    count cannot be the document frequency and the scan answers."""
    params = BM25FParams(weights=(0.0, 1.0, 0.6))
    idx = LexicalIndex(tmp_path / "lex", params, writable=True)
    idx.apply([DocFields(1, ["ddr"], ["w1"], []), DocFields(2, [], ["ddr"], [])], [], 1)
    ids, _, matched = idx.search(["ddr"], k=5)
    assert ids.tolist() == [2] and matched == 1


def test_doc_freq_memo_follows_writes_and_merges(tmp_path: Path) -> None:
    idx = LexicalIndex(tmp_path / "lex", writable=True)
    hashes = hash_terms(WORDS)

    def direct() -> list[int]:
        df = np.zeros(len(hashes), np.int64)
        for seg in idx.segments:
            df += seg.term_ranges(hashes)[1]
        return df.tolist()

    rng = random.Random(9)
    idx.apply(_docs(50, 1, 1), [], 1)
    for r in range(12):
        assert idx.doc_freqs(hashes).tolist() == direct()
        idx.apply(_docs(5, 100 + 5 * r, 50 + r), rng.sample(range(1, 50), 2), 2 + r)
    idx.merge()
    assert idx.doc_freqs(hashes).tolist() == direct()
    assert idx.doc_freqs(hashes[::-1]).tolist() == direct()[::-1]  # any order, repeats
    assert idx.doc_freqs(hashes[[3, 3, 0]]).tolist() == [direct()[3], direct()[3], direct()[0]]


def test_small_segments_unpacked_once_give_the_same_results(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Small segments keep their postings unpacked (shared by every reader's view):
    the same results as decoding each term's blocks per query."""
    idx = LexicalIndex(tmp_path / "lex", writable=True)
    idx.FLOOR_DOCS = 0
    _small_writes(idx, 12, deletes=True)
    queries = [[w] for w in WORDS[:30]] + [["w1", "w2", "ddr"], ["阻抗", "w70"]]

    def run() -> list[tuple[list[int], list[float], int]]:
        reader = LexicalIndex(tmp_path / "lex")
        out = [
            (a.tolist(), b.tolist(), m)
            for q in queries
            for a, b, m in [reader.search(q, k=10, prune=False)]
        ]
        reader.close()
        return out

    monkeypatch.setattr(segment_mod, "SMALL_POSTINGS", 0)
    decoded = run()
    monkeypatch.setattr(segment_mod, "SMALL_POSTINGS", 65_536)
    assert run() == decoded
