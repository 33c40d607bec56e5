"""Recall: the BM25F index restricted to memories, bent by importance and recency.

Memory-only recall scores every matching memory chunk of the chosen
namespace/tags with the same index and tokenizer as search, multiplies the
score by :func:`clawkb.memory.model.memory_weight`, keeps each memory's best
chunk and returns the top ``limit``. Because the weight is applied to all
matches (not just a first top-k), the ordering is exact.

With ``include_documents`` the memory list and the normal document search
(which hides memories) are merged by reciprocal rank fusion, ``1 / (60 +
rank)`` per list, the same k=60 the retrieval design uses: the two lists'
scores need not share a scale, so document ranking can change (hybrid,
reranking) without breaking the blend. Ties go to the memory.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from clawkb.errors import ConfigError
from clawkb.memory import table
from clawkb.memory.model import MemoryRecord, RecallHit, RecallResult, Weighting, memory_weight
from clawkb.retrieve.search import make_hit
from clawkb.text import tokenize
from clawkb.types import Hit

if TYPE_CHECKING:
    from clawkb.kb import KnowledgeBase

RRF_K = 60


def recall(
    kb: KnowledgeBase,
    query: str,
    *,
    namespace: str | None,
    tags: tuple[str, ...],
    limit: int,
    include_documents: bool,
    explain: bool,
    now: float,
    weighting: Weighting,
) -> RecallResult:
    t0 = time.perf_counter()
    warnings = kb._catch_up()  # a reader repairs a lagging index, as search does
    tokens = tokenize(query)
    if not tokens:
        raise ConfigError(f"query {query!r} has no searchable terms")
    hits = _memory_hits(kb, tokens, namespace, tags, limit, now, weighting, explain)
    if include_documents:
        docs = kb.search(query, limit=limit, explain=explain)
        warnings += [w for w in docs.warnings if w not in warnings]
        hits = _blend(hits, docs.hits, limit)
    return RecallResult(query, hits, (time.perf_counter() - t0) * 1000, warnings)


def _memory_hits(
    kb: KnowledgeBase,
    tokens: list[str],
    namespace: str | None,
    tags: tuple[str, ...],
    limit: int,
    now: float,
    weighting: Weighting,
    explain: bool,
) -> list[RecallHit]:
    chunks = table.chunk_map(kb.conn, now, namespace, tags)
    if not chunks:
        return []
    allowed = np.fromiter(chunks, np.int64, len(chunks))
    ids, scores, _ = kb.lexical.search(tokens, k=len(chunks), allowed=allowed)
    best: dict[str, tuple[float, float, float, int]] = {}  # memory id -> (final, bm25, w, chunk)
    for cid, score in zip(ids.tolist(), scores.tolist(), strict=True):
        rec = chunks[cid]
        if rec.id in best:  # ids come best-first: the first chunk of a memory is its best
            continue
        w = memory_weight(rec.importance, now - rec.updated_at, weighting)
        best[rec.id] = (score * w, score, w, cid)
    top = sorted(best.items(), key=lambda kv: (-kv[1][0], kv[0]))[:limit]
    rows = kb.repo.chunks_by_ids(v[3] for _, v in top)
    out = []
    for rank, (_, (final, score, w, cid)) in enumerate(top, start=1):
        row = rows.get(cid)
        if row is None:  # removed by a concurrent writer
            continue
        rec = chunks[cid]
        exp = None
        if explain:
            exp = _explain(kb, tokens, cid, score, w, rec, now, weighting)
        hit = make_hit(row, rank, final, tokens, exp)
        out.append(RecallHit("memory", final, score, w, hit, rec))
    return out


def _explain(
    kb: KnowledgeBase,
    tokens: list[str],
    cid: int,
    score: float,
    w: float,
    rec: MemoryRecord,
    now: float,
    weighting: Weighting,
) -> dict[str, object]:
    return {
        "lexical": kb.lexical.explain(tokens, cid),
        "memory": {
            "relevance": round(score, 6),
            "importance": rec.importance,
            "age_days": round(max(0.0, now - rec.updated_at) / 86400, 4),
            "half_life_days": weighting.half_life_days,
            "recency_floor": weighting.recency_floor,
            "weight": round(w, 6),
            "formula": "relevance × (0.5 + importance) × (floor + (1 − floor) × 0.5^(age/half_life))",
        },
        "final": round(score * w, 6),
    }


def _blend(memories: list[RecallHit], documents: Sequence[Hit], limit: int) -> list[RecallHit]:
    """Reciprocal rank fusion of the memory list and the document list."""
    scored: list[tuple[float, int, int, RecallHit]] = []
    for rank, m in enumerate(memories, start=1):
        scored.append((1.0 / (RRF_K + rank), 0, rank, m))
    for rank, d in enumerate(documents, start=1):
        scored.append((1.0 / (RRF_K + rank), 1, rank, RecallHit("document", 0.0, d.score, 1.0, d)))
    scored.sort(key=lambda t: (-t[0], t[1], t[2]))
    out = []
    for i, (fused, _, _, h) in enumerate(scored[:limit], start=1):
        out.append(replace(h, score=fused, hit=replace(h.hit, rank=i)))
    return out


def containing_all_terms(records: Sequence[MemoryRecord], query: str) -> list[MemoryRecord]:
    """Memories whose text holds every search term of ``query`` (forget by query)."""
    wanted = set(tokenize(query))
    if not wanted:
        raise ConfigError(f"query {query!r} has no searchable terms")
    return [r for r in records if wanted <= set(tokenize(r.text))]
