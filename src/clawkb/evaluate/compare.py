"""Score lexical, dense and hybrid retrieval side by side on one BEIR dataset.

The corpus is indexed and embedded once; every mode then answers the same
queries through ``kb.search(mode=...)`` (see :func:`runner.rank_documents`),
so the table compares retrieval, not indexing. ``kb_home`` keeps the KB and
its vectors between runs (the expensive part is embedding the corpus).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clawkb.embed.base import Embedder
from clawkb.errors import ConfigError
from clawkb.evaluate.beir import load_beir
from clawkb.evaluate.metrics import aggregate, percentile
from clawkb.evaluate.runner import (
    CHUNKS_PER_DOC,
    EvalReport,
    _check_k_values,
    _kb_at,
    _records,
    _run_query,
)

MODES = ("lexical", "dense", "hybrid")


@dataclass(frozen=True)
class Comparison:
    dataset: str
    reports: dict[str, EvalReport]
    embed_seconds: float
    embedded: int
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "dataset": self.dataset,
            "embed_seconds": round(self.embed_seconds, 3),
            "embedded": self.embedded,
            "modes": {m: r.to_dict() for m, r in self.reports.items()},
        }


def compare_modes(
    folder: str | Path,
    *,
    modes: Sequence[str] = MODES,
    embedder: Embedder | None = None,
    k_values: Sequence[int] = (10, 100),
    limit_queries: int | None = None,
    kb_home: str | Path | None = None,
    options: Mapping[str, Mapping[str, Any]] | None = None,
) -> Comparison:
    """One report per mode; ``options[mode]`` adds ``kb.search`` keywords for that mode."""
    bad = [m for m in modes if m not in MODES]
    if bad or not modes:
        raise ConfigError(f"modes must be among {', '.join(MODES)}, got {list(modes)}")
    ks = _check_k_values(k_values)
    dataset = load_beir(folder)
    queries = dataset.queries[:limit_queries] if limit_queries else dataset.queries
    reports: dict[str, EvalReport] = {}
    with _kb_at(kb_home) as kb:
        started = time.perf_counter()
        indexed = kb.index_texts(_records(dataset))
        index_seconds = time.perf_counter() - started
        embed_seconds, embedded = 0.0, 0
        if any(m != "lexical" for m in modes):
            from clawkb.embed.run import embed_kb

            rep = embed_kb(kb, embedder=embedder)
            embed_seconds, embedded = rep.seconds, rep.embedded
        chunks = int(kb.status().get("chunks", 0))
        for mode in modes:
            opts = {"mode": mode, **dict((options or {}).get(mode, {}))}
            results = tuple(_run_query(kb, q, ks, opts) for q in queries)
            lat = [r.latency_ms for r in results]
            reports[mode] = EvalReport(
                dataset=dataset.name,
                metrics=aggregate(r.metrics for r in results),
                queries=results,
                doc_count=len(dataset.docs),
                chunk_count=chunks,
                failed_docs=indexed.failed,
                index_seconds=index_seconds,
                latency_p50_ms=percentile(lat, 50),
                latency_p95_ms=percentile(lat, 95),
                k_values=ks,
                search_limit=max(ks) * CHUNKS_PER_DOC,
                options=opts,
            )
    return Comparison(dataset.name, reports, embed_seconds, embedded)


def format_comparison(c: Comparison, metrics: Sequence[str] = ("ndcg@10", "recall@100")) -> str:
    """A plain table: one row per mode, one column per metric, then latency."""
    head = f"{'mode':<8} " + " ".join(f"{m:>10}" for m in metrics) + f" {'p50 ms':>8} {'p95 ms':>8}"
    lines = [f"dataset {c.dataset}  (embedded {c.embedded} texts in {c.embed_seconds:.1f} s)", head]
    for mode, r in c.reports.items():
        vals = " ".join(f"{r.metrics.get(m, float('nan')):>10.4f}" for m in metrics)
        lines.append(f"{mode:<8} {vals} {r.latency_p50_ms:>8.1f} {r.latency_p95_ms:>8.1f}")
    return "\n".join(lines)
