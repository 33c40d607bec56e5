"""Recall: the BM25F index restricted to memories, bent by importance and recency.

Memory-only recall is the one retrieval pipeline (:mod:`clawkb.retrieve.pipeline`)
restricted to the memory chunks of the chosen namespace/tags: every matching
chunk is a candidate, its score is multiplied by
:func:`clawkb.memory.model.memory_weight` (a per-chunk boost), each memory
keeps its best chunk and the top ``limit`` are returned. Because the weight is
applied to all matches (not just a first top-k), the ordering is exact.

With ``include_documents`` the memory list and the normal document search
(which hides memories) are merged by reciprocal rank fusion, ``1 / (k +
rank)`` per list with the pipeline's ``retrieval.rrf_k``: the two lists'
scores need not share a scale, so document ranking can change (hybrid,
reranking) without breaking the blend. The lists share no item and weigh the
same, so ``k`` sets the scores but never the order: the lists interleave by
rank, ties to the memory.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from clawkb.errors import ConfigError
from clawkb.memory.model import MemoryRecord, RecallHit, RecallResult, Weighting, memory_weight
from clawkb.retrieve.fusion import Channel, rrf
from clawkb.retrieve.query import ChunkBoost, Query
from clawkb.retrieve.settings import from_config
from clawkb.retrieve.source import LocalSource
from clawkb.store import memory_repo as table
from clawkb.text import tokenize
from clawkb.types import Hit

if TYPE_CHECKING:
    from clawkb.kb import KnowledgeBase


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
    warnings = kb.ensure_fresh()  # as search does: a lagging index is a warning, not a write
    if not tokenize(query):
        raise ConfigError(f"query {query!r} has no searchable terms")
    hits = _memory_hits(kb, query, namespace, tags, limit, now, weighting, explain)
    if include_documents:
        docs = kb.search(query, limit=limit, explain=explain)
        warnings += [w for w in docs.warnings if w not in warnings]
        hits = _blend(hits, docs.hits, limit, from_config(kb.config).rrf_k)
    return RecallResult(query, hits, (time.perf_counter() - t0) * 1000, warnings)


def _memory_hits(
    kb: KnowledgeBase,
    query: str,
    namespace: str | None,
    tags: tuple[str, ...],
    limit: int,
    now: float,
    weighting: Weighting,
    explain: bool,
) -> list[RecallHit]:
    """The pipeline restricted to the memories' chunks, every match weighted, best per memory."""
    chunks = table.chunk_map(kb.conn, now, namespace, tags)
    if not chunks:
        return []
    weights = {
        cid: memory_weight(rec.importance, now - rec.updated_at, weighting)
        for cid, rec in chunks.items()
    }
    q = Query.make(
        query,
        limit=limit,
        mode="lexical",
        options={"candidates": len(chunks), "merge": False},
        explain=explain,
        include_memory=True,
        chunk_ids=np.fromiter(chunks, np.int64, len(chunks)),
        boost=ChunkBoost.from_map("memory", weights),
        group_of={cid: rec.id for cid, rec in chunks.items()},
    )
    res = kb.run_prepared(q, source=LocalSource(kb))  # memories live in the local store
    out = []
    for h, cid in zip(res.hits, res.chunk_ids, strict=True):
        rec, w = chunks[cid], weights[cid]
        relevance = h.score / w if w else 0.0
        if h.explanation is not None:
            h.explanation["memory"] = _explain(relevance, w, rec, now, weighting)
        out.append(RecallHit("memory", h.score, relevance, w, h, rec))
    return out


def _explain(
    relevance: float, w: float, rec: MemoryRecord, now: float, weighting: Weighting
) -> dict[str, object]:
    return {
        "relevance": round(relevance, 6),
        "importance": rec.importance,
        "age_days": round(max(0.0, now - rec.updated_at) / 86400, 4),
        "half_life_days": weighting.half_life_days,
        "recency_floor": weighting.recency_floor,
        "weight": round(w, 6),
        "formula": "relevance × (0.5 + importance) × (floor + (1 − floor) × 0.5^(age/half_life))",
    }


def _blend(
    memories: list[RecallHit], documents: Sequence[Hit], limit: int, k: int
) -> list[RecallHit]:
    """Reciprocal rank fusion (the pipeline's :func:`~clawkb.retrieve.fusion.rrf`) of
    the memory list and the document list; ties go to the memory."""
    items = [*memories, *(RecallHit("document", 0.0, d.score, 1.0, d) for d in documents)]
    n = len(memories)
    channels = {
        "memory": Channel(np.arange(n, dtype=np.int64), np.zeros(n)),
        "document": Channel(np.arange(n, len(items), dtype=np.int64), np.zeros(len(items) - n)),
    }
    fused = rrf(channels, {"memory": 1.0, "document": 1.0}, k)
    out = []
    for i, f in enumerate(fused[:limit], start=1):
        h = items[f.chunk_id]
        out.append(replace(h, score=f.score, hit=replace(h.hit, rank=i)))
    return out


def containing_all_terms(records: Sequence[MemoryRecord], query: str) -> list[MemoryRecord]:
    """Memories whose text holds every search term of ``query`` (forget by query)."""
    wanted = set(tokenize(query))
    if not wanted:
        raise ConfigError(f"query {query!r} has no searchable terms")
    return [r for r in records if wanted <= set(tokenize(r.text))]
