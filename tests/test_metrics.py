"""Known-answer tests for the ranking metrics (values worked out by hand)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from clawkb.evaluate.metrics import (
    aggregate,
    dcg,
    first_relevant_rank,
    hit_at_k,
    mean,
    mrr_at_k,
    ndcg_at_k,
    percentile,
    recall_at_k,
    score_query,
)

# d2 (grade 3) at rank 2, d4 (grade 1) at rank 4, d5 (grade 2) never retrieved.
RANKING = ["d1", "d2", "d3", "d4"]
QRELS = {"d2": 3, "d4": 1, "d5": 2, "d1": 0}


def test_dcg_uses_log2_discount() -> None:
    # 3/log2(2) + 2/log2(3) + 1/log2(4) = 3 + 1.261860 + 0.5
    assert dcg([3, 2, 1]) == pytest.approx(4.761860, abs=1e-6)


def test_ndcg_uses_linear_gain_and_ideal_from_qrels() -> None:
    # DCG@3 = 3/log2(3) = 1.892789; IDCG@3 = 3 + 2/log2(3) + 1/2 = 4.761860.
    # With exponential gain (2^rel - 1) the value would be 0.470202 instead.
    assert ndcg_at_k(RANKING, QRELS, 3) == pytest.approx(0.397490, abs=1e-6)


def test_ndcg_counts_a_repeated_doc_once() -> None:
    # Distinct top 2 = [d2, d4]: (3 + 1/log2(3)) / (3 + 2/log2(3)) = 0.851959.
    assert ndcg_at_k(["d2", "d2", "d4"], QRELS, 2) == pytest.approx(0.851959, abs=1e-6)


def test_ndcg_perfect_and_empty() -> None:
    assert ndcg_at_k(["d2", "d5", "d4"], QRELS, 10) == pytest.approx(1.0)
    assert ndcg_at_k([], QRELS, 10) == 0.0
    assert ndcg_at_k(["d1"], {"d1": 0}, 10) == 0.0  # no relevant document at all


def test_mrr_recall_hit() -> None:
    assert mrr_at_k(RANKING, QRELS, 1) == 0.0
    assert mrr_at_k(RANKING, QRELS, 3) == 0.5
    assert recall_at_k(RANKING, QRELS, 3) == pytest.approx(1 / 3)
    assert recall_at_k(RANKING, QRELS, 4) == pytest.approx(2 / 3)
    assert hit_at_k(RANKING, QRELS, 1) == 0.0
    assert hit_at_k(RANKING, QRELS, 2) == 1.0
    assert first_relevant_rank(RANKING, QRELS) == 2
    assert first_relevant_rank(["d1", "d3"], QRELS) is None


def test_grade_zero_is_not_relevant() -> None:
    assert mrr_at_k(["d1"], QRELS, 10) == 0.0
    assert recall_at_k(["d1"], {"d1": 0}, 10) == 0.0


def test_k_must_be_positive() -> None:
    with pytest.raises(ValueError, match="k must be"):
        ndcg_at_k(RANKING, QRELS, 0)


def test_score_query_and_aggregate() -> None:
    row = score_query(RANKING, QRELS, (1, 10))
    assert row["mrr@10"] == 0.5
    assert row["hit@1"] == 0.0
    assert set(row) == {f"{m}@{k}" for m in ("ndcg", "mrr", "recall", "hit") for k in (1, 10)}
    means = aggregate([{"mrr@10": 1.0, "hit@1": 1.0}, {"mrr@10": 0.5, "hit@1": 0.0}])
    assert means == {"hit@1": 0.5, "mrr@10": 0.75}
    assert mean([]) == 0.0


def test_percentile_known_values() -> None:
    assert percentile([4.0, 1.0, 3.0, 2.0], 50) == pytest.approx(2.5)
    assert percentile([1.0, 2.0, 3.0, 4.0], 95) == pytest.approx(3.85)
    assert percentile([], 50) == 0.0
    with pytest.raises(ValueError):
        percentile([1.0], 101)


@given(
    st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=1, max_size=50),
    st.floats(0, 100),
)
def test_percentile_matches_numpy(values: list[float], pct: float) -> None:
    expected = float(np.percentile(values, pct))
    assert math.isclose(percentile(values, pct), expected, rel_tol=1e-9, abs_tol=1e-6)
