"""Which passages hold a term, read from its postings (:mod:`clawkb.retrieve.term_stats`).

The adaptive weights (the dense top's language) and the exact stage (an anchor's
holders among the candidates) once asked a lexical search restricted to the
candidates; they now read the terms' postings. The answer must stay the one that
search gives, through adds, replaced documents (deleted chunks) and merges.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from clawkb import KnowledgeBase
from clawkb.index.segment import hash_terms
from clawkb.kb import TextRecord
from clawkb.retrieve import adaptive, term_stats
from clawkb.retrieve.adaptive import CHINESE_MARKERS


def _texts(n: int, start: int = 0, version: int = 0) -> list[TextRecord]:
    out = []
    for i in range(start, start + n):
        if (i + version) % 3 == 0:
            text = f"串口 {i} 的 波特率 配置 是 ESP_UART{i % 4}_BAUD"
        else:
            text = f"UART{i % 4} baud rate note {i} ESP_UART{i % 4}_BAUD v{version}"
        out.append(TextRecord(path=f"d{i}", text=text))
    return out


def _searched(kb: KnowledgeBase, terms: list[str], ids: np.ndarray) -> set[int]:
    got, scores, _ = kb.lexical.search(terms, k=len(ids), allowed=ids)
    return {int(i) for i, s in zip(got.tolist(), scores.tolist(), strict=True) if s > 0}


def _live_ids(kb: KnowledgeBase) -> np.ndarray:
    return np.asarray([r[0] for r in kb.conn.execute("SELECT id FROM chunks")], np.int64)


def test_holders_equal_a_restricted_search_through_adds_deletes_and_merges(
    tmp_path: Path,
) -> None:
    terms = ["串口", "的", "esp_uart1_baud", "baud", "absent-term"]
    with KnowledgeBase.open(tmp_path / "kb", create=True) as kb:
        kb.index_texts(_texts(6))
        for batch in range(8):
            ids = _live_ids(kb)
            # deleted chunk ids too: a restricted search does not find them
            probe = np.unique(np.concatenate([ids, np.arange(1, int(ids.max()) + 3)]))
            for t in terms:
                assert term_stats.holding(kb.lexical, t, probe) == _searched(kb, [t], probe), t
            markers = list(CHINESE_MARKERS)
            assert term_stats.holders(kb.lexical, CHINESE_MARKERS) is None  # first ask
            have = term_stats.holders(kb.lexical, CHINESE_MARKERS)
            assert have is not None and np.all(np.diff(have) > 0)
            assert set(have.tolist()) == _searched(kb, markers, probe)
            assert set(probe[term_stats.among(probe, have)].tolist()) == set(have.tolist())
            # a batch of new documents and new versions of old ones (their chunks deleted)
            kb.index_texts(_texts(3, start=6 + 3 * batch) + _texts(2, start=batch, version=1))


def test_other_language_share_is_the_same_with_and_without_the_kept_list(tmp_path: Path) -> None:
    with KnowledgeBase.open(tmp_path / "kb", create=True) as kb:
        kb.index_texts(_texts(12))
        ids = _live_ids(kb)[:10]
        first = adaptive.other_language(kb.lexical, ids, False)  # a restricted search
        second = adaptive.other_language(kb.lexical, ids, False)  # the list, built
        assert term_stats.holders(kb.lexical, CHINESE_MARKERS) is not None
        assert first == second == round(len(_searched(kb, list(CHINESE_MARKERS), ids)) / 10, 4)
        assert adaptive.other_language(kb.lexical, ids, True) == round(1 - first, 4)


def test_among_marks_the_ids_in_a_sorted_list() -> None:
    ids = np.asarray([5, 1, 9, 7], np.int64)
    assert term_stats.among(ids, np.asarray([1, 7, 8], np.int64)).tolist() == [
        False,
        True,
        False,
        True,
    ]
    assert not term_stats.among(ids, np.empty(0, np.int64)).any()


def test_terms_scored_below_zero_are_left_to_the_search(tmp_path: Path) -> None:
    """Postings of replaced passages count in a term's document frequency until a
    merge: past the live passage count its IDF goes below 0, and a search scores
    nothing above 0. The kept list must then answer as that search does."""

    def chinese(v: int, n: int = 4) -> list[TextRecord]:
        return [TextRecord(path=f"c{i}", text=f"串口 的 配置 {i} v{v}") for i in range(n)]

    with KnowledgeBase.open(tmp_path / "kb", create=True) as kb:
        # Eight Chinese passages, four of them replaced each round: a run small
        # against what a merge would rewrite (no consolidation at its end drops the
        # replaced postings), and the dead postings push the common word's document
        # frequency past the live passage count
        kb.index_texts([*chinese(0, 8), TextRecord(path="e", text="uart baud rate")])
        below = 0
        for round_ in range(1, 5):
            kb.index_texts(chinese(round_))  # new versions: the old chunks deleted
            ids = _live_ids(kb)
            df = kb.lexical.doc_freqs(hash_terms(["的"]))
            below += int(kb.lexical.idf(df)[0] <= 0)
            want = len(_searched(kb, list(CHINESE_MARKERS), ids)) / len(ids)
            for _ in range(3):  # the restricted search, then the kept answer
                assert adaptive.other_language(kb.lexical, ids, False) == round(want, 4), round_
            assert term_stats.holding(kb.lexical, "串口", ids) == _searched(kb, ["串口"], ids)
        assert below  # the case this test is about happened
