"""Run a BEIR-layout dataset through a throw-away knowledge base and score it.

Each corpus document becomes a virtual document keyed by its BEIR id, so the
KB chunks and indexes it exactly like a file. Search returns chunks; the
ranking that is scored keeps each document once, at the rank of its best
chunk (max-score per document), which is how passage-level systems are
compared on document-level qrels.

How a query is searched lives in :func:`rank_documents` alone and extra
``kb.search`` keywords pass through ``search_options``, so a retrieval mode
(lexical / dense / hybrid) is one more option, not a new runner.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clawkb.errors import ConfigError
from clawkb.evaluate.beir import BeirDataset, BeirQuery, load_beir
from clawkb.evaluate.metrics import aggregate, first_relevant_rank, percentile, score_query

if TYPE_CHECKING:
    from clawkb.kb import KnowledgeBase

#: Chunks fetched per distinct document wanted: long documents yield several
#: chunk hits, so asking for 3x the deepest cut-off usually fills it.
CHUNKS_PER_DOC = 3

#: How many top document ids each per-query row keeps for inspection.
TOP_IDS_KEPT = 10


@dataclass(frozen=True, slots=True)
class QueryResult:
    """One query's outcome: its metrics, latency and what came back on top."""

    query_id: str
    query: str
    latency_ms: float
    metrics: dict[str, float]
    first_relevant_rank: int | None
    relevant: int
    top_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class EvalReport:
    """Aggregate and per-query results of one evaluation run."""

    dataset: str
    metrics: dict[str, float]
    queries: tuple[QueryResult, ...]
    doc_count: int
    chunk_count: int
    failed_docs: int
    index_seconds: float
    latency_p50_ms: float
    latency_p95_ms: float
    k_values: tuple[int, ...]
    search_limit: int
    options: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready data, per-query rows included."""
        data = asdict(self)
        data["queries"] = [_row(q) for q in self.queries]
        data["metrics"] = {name: round(v, 6) for name, v in self.metrics.items()}
        for key in ("index_seconds", "latency_p50_ms", "latency_p95_ms"):
            data[key] = round(data[key], 3)
        data["query_count"] = len(self.queries)
        return data


def _row(result: QueryResult) -> dict[str, Any]:
    row = asdict(result)
    row["latency_ms"] = round(result.latency_ms, 3)
    row["metrics"] = {name: round(v, 6) for name, v in result.metrics.items()}
    row["top_ids"] = list(result.top_ids)
    return row


def evaluate_dataset(
    folder: str | Path,
    *,
    k_values: Sequence[int] = (10, 100),
    limit_queries: int | None = None,
    kb_home: str | Path | None = None,
    search_options: Mapping[str, Any] | None = None,
) -> EvalReport:
    """Index ``folder``'s corpus into a fresh KB and score every judged query.

    ``kb_home`` keeps the built KB (for inspection); by default it lives in a
    temporary directory removed afterwards. ``limit_queries`` takes the first N
    judged queries in file order, so repeated runs compare like with like.
    """
    ks = _check_k_values(k_values)
    if limit_queries is not None and limit_queries < 1:
        raise ConfigError(f"limit_queries must be >= 1, got {limit_queries}")
    dataset = load_beir(folder)
    queries = dataset.queries[:limit_queries] if limit_queries else dataset.queries
    options = dict(search_options or {})
    with _kb_at(kb_home) as kb:
        started = time.perf_counter()
        indexed = kb.index_texts(_records(dataset))
        index_seconds = time.perf_counter() - started
        chunk_count = _chunk_count(kb)
        results = tuple(_run_query(kb, q, ks, options) for q in queries)
    latencies = [r.latency_ms for r in results]
    return EvalReport(
        dataset=dataset.name,
        metrics=aggregate(r.metrics for r in results),
        queries=results,
        doc_count=len(dataset.docs),
        chunk_count=chunk_count,
        failed_docs=indexed.failed,
        index_seconds=index_seconds,
        latency_p50_ms=percentile(latencies, 50),
        latency_p95_ms=percentile(latencies, 95),
        k_values=ks,
        search_limit=max(ks) * CHUNKS_PER_DOC,
        options=options,
    )


def _check_k_values(k_values: Sequence[int]) -> tuple[int, ...]:
    ks = tuple(sorted(set(k_values)))
    if not ks or ks[0] < 1:
        raise ConfigError(f"k values must be positive integers, got {list(k_values)}")
    return ks


@contextmanager
def _kb_at(kb_home: str | Path | None) -> Iterator[Any]:
    """Open a KB at ``kb_home``, or in a temporary directory that is removed after."""
    from clawkb.kb import KnowledgeBase  # imported late: the facade pulls in every layer

    with tempfile.TemporaryDirectory(prefix="clawkb-eval-") as tmp:
        home = Path(kb_home) if kb_home is not None else Path(tmp) / "kb"
        kb = KnowledgeBase.open(home, create=True)
        try:
            yield kb
        finally:
            kb.close()


def _records(dataset: BeirDataset) -> list[Any]:
    from clawkb.kb import TextRecord

    return [TextRecord(path=doc.id, text=doc.text, title=doc.title) for doc in dataset.docs]


def _chunk_count(kb: KnowledgeBase) -> int:
    """Chunks in the KB after indexing (the whole KB, so a reused kb_home counts too)."""
    return int(kb.status().get("chunks", 0))


def rank_documents(
    kb: KnowledgeBase, query: str, depth: int, options: Mapping[str, Any]
) -> list[str]:
    """Distinct document ids for ``query``, each at the rank of its best chunk.

    The pipeline's rank order is trusted over raw scores, since fusion or
    reranking may order hits by something other than the score shown.
    """
    result = kb.search(query, limit=depth * CHUNKS_PER_DOC, snippets=False, **options)
    hits = sorted(result.hits, key=lambda hit: hit.rank)
    return list(dict.fromkeys(hit.anchor.path for hit in hits))[:depth]


def _run_query(
    kb: KnowledgeBase, query: BeirQuery, ks: tuple[int, ...], options: Mapping[str, Any]
) -> QueryResult:
    started = time.perf_counter()
    ranking = rank_documents(kb, query.text, max(ks), options)
    latency_ms = (time.perf_counter() - started) * 1000
    return QueryResult(
        query_id=query.id,
        query=query.text,
        latency_ms=latency_ms,
        metrics=score_query(ranking, query.qrels, ks),
        first_relevant_rank=first_relevant_rank(ranking, query.qrels),
        relevant=sum(1 for grade in query.qrels.values() if grade > 0),
        top_ids=tuple(ranking[:TOP_IDS_KEPT]),
    )
