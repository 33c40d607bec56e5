"""Ranking metrics on ranked document-id lists and graded relevance judgements.

The definitions follow ``pytrec_eval`` / ``trec_eval`` (what BEIR reports), so
numbers here are comparable with published BEIR tables:

* A document is *relevant* when its grade is > 0; grades <= 0 and unjudged
  documents count as non-relevant.
* nDCG uses **linear gain** (gain = grade, as trec_eval's ``ndcg_cut``), not the
  exponential ``2**grade - 1`` of some other toolkits, with the standard
  ``1 / log2(rank + 1)`` discount. The ideal ranking is built from the qrels,
  not from the retrieved list.
* A ranking is treated as a list of *distinct* documents: a repeated id counts
  only at its first (best) position, so duplicated chunks cannot inflate gain.

All functions are pure and take ``qrels`` as ``{doc_id: grade}`` for one query.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

#: Relevance judgements for one query: document id -> graded relevance.
Qrels = Mapping[str, int]


def _check_k(k: int) -> None:
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")


def _distinct(ranking: Sequence[str], k: int) -> list[str]:
    """First ``k`` distinct ids of ``ranking``, keeping each at its best position."""
    _check_k(k)
    seen: set[str] = set()
    out: list[str] = []
    for doc_id in ranking:
        if doc_id in seen:
            continue
        seen.add(doc_id)
        out.append(doc_id)
        if len(out) == k:
            break
    return out


def _relevant(qrels: Qrels) -> dict[str, int]:
    return {doc_id: grade for doc_id, grade in qrels.items() if grade > 0}


def dcg(gains: Iterable[float]) -> float:
    """Discounted cumulative gain of gains listed in rank order (rank 1 first)."""
    return sum(gain / math.log2(rank + 1) for rank, gain in enumerate(gains, start=1))


def ndcg_at_k(ranking: Sequence[str], qrels: Qrels, k: int) -> float:
    """nDCG@k with linear gains; 0.0 when the query has no relevant document."""
    _check_k(k)
    relevant = _relevant(qrels)
    ideal = dcg(sorted(relevant.values(), reverse=True)[:k])
    if ideal == 0:
        return 0.0
    got = dcg(relevant.get(doc_id, 0) for doc_id in _distinct(ranking, k))
    return got / ideal


def first_relevant_rank(ranking: Sequence[str], qrels: Qrels) -> int | None:
    """1-based rank of the first relevant document among distinct ids, or None."""
    relevant = _relevant(qrels)
    for rank, doc_id in enumerate(_distinct(ranking, max(len(ranking), 1)), start=1):
        if doc_id in relevant:
            return rank
    return None


def mrr_at_k(ranking: Sequence[str], qrels: Qrels, k: int) -> float:
    """Reciprocal rank of the first relevant document within the top k, else 0."""
    relevant = _relevant(qrels)
    for rank, doc_id in enumerate(_distinct(ranking, k), start=1):
        if doc_id in relevant:
            return 1.0 / rank
    return 0.0


def recall_at_k(ranking: Sequence[str], qrels: Qrels, k: int) -> float:
    """Share of the relevant documents found in the top k; 0.0 if none exist."""
    relevant = _relevant(qrels)
    if not relevant:
        return 0.0
    found = sum(1 for doc_id in _distinct(ranking, k) if doc_id in relevant)
    return found / len(relevant)


def hit_at_k(ranking: Sequence[str], qrels: Qrels, k: int) -> float:
    """1.0 when at least one relevant document is in the top k, else 0.0."""
    relevant = _relevant(qrels)
    return 1.0 if any(doc_id in relevant for doc_id in _distinct(ranking, k)) else 0.0


#: Metric name -> function; names are used as ``f"{name}@{k}"`` in reports.
METRICS = {
    "ndcg": ndcg_at_k,
    "mrr": mrr_at_k,
    "recall": recall_at_k,
    "hit": hit_at_k,
}


def score_query(ranking: Sequence[str], qrels: Qrels, k_values: Iterable[int]) -> dict[str, float]:
    """Every metric in :data:`METRICS` at every k, keyed like ``"ndcg@10"``."""
    return {
        f"{name}@{k}": func(ranking, qrels, k) for k in k_values for name, func in METRICS.items()
    }


def mean(values: Iterable[float]) -> float:
    """Arithmetic mean; 0.0 for no values (an empty run scores nothing)."""
    items = list(values)
    return sum(items) / len(items) if items else 0.0


def aggregate(per_query: Iterable[Mapping[str, float]]) -> dict[str, float]:
    """Mean of each metric over queries (the macro average BEIR reports)."""
    rows = list(per_query)
    names = {name for row in rows for name in row}
    return {name: mean(row.get(name, 0.0) for row in rows) for name in sorted(names)}


def percentile(values: Sequence[float], pct: float) -> float:
    """Percentile with linear interpolation between order statistics (numpy's default)."""
    if not values:
        return 0.0
    if not 0 <= pct <= 100:
        raise ValueError(f"percentile must be within 0..100, got {pct}")
    ordered = sorted(values)
    pos = (len(ordered) - 1) * pct / 100
    low = math.floor(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)
