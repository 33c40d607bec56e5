"""Search a clawkb collection in Milvus: lexical (BM25 over surrogate words),
dense (cosine), hybrid (server-side ``hybrid_search`` with RRF or weighted
ranker). Hits are built from the collection's fields alone, in the same
:class:`clawkb.types.Hit` shape as local search.

``--explain`` runs each channel's search too and reports the rank and score
Milvus returned in it (Milvus Lite's BM25 scores are its own numbers: they can
be negative for terms in more than half of the rows), next to the fused
score from ``hybrid_search``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import numpy as np

from clawkb.backends.milvus_schema import HIT_FIELDS, client
from clawkb.backends.settings import MilvusSettings
from clawkb.backends.surrogate import encode
from clawkb.errors import BackendError
from clawkb.retrieve.hits import make_hit
from clawkb.retrieve.result import SearchResult
from clawkb.retrieve.stages import E5_COS_HIGH, E5_COS_LOW
from clawkb.store.repo import ChunkRow
from clawkb.types import Hit

MODES = ("lexical", "dense", "hybrid")


def entity_row(e: dict[str, Any]) -> ChunkRow:
    """A store-shaped row from a Milvus entity (so hits are made the local way)."""
    page = int(e.get("page", -1))
    return ChunkRow(
        id=int(e.get("chunk_id", 0)),
        doc_id=0,
        path=e["path"],
        title=e.get("title", ""),
        anchor=e["anchor"],
        ordinal=int(e.get("ordinal", 0)),
        text=e.get("text", ""),
        heading_path=tuple(json.loads(e.get("heading") or "[]")),
        line_start=int(e.get("line_start", 0)),
        line_end=int(e.get("line_end", 0)),
        page=None if page < 0 else page,
        kind=e.get("kind", "text"),
        language=e.get("language") or None,
        metadata={},
        trust=e.get("trust") or None,
        domain=e.get("domain") or None,
    )


@contextmanager
def _search_errors() -> Iterator[None]:
    """A failed Milvus call as one :class:`BackendError` line."""
    try:
        yield
    except Exception as exc:
        text = str(exc).strip().splitlines()
        raise BackendError(f"Milvus search failed: {text[-1] if text else exc!r}") from exc


def _channel(
    s: MilvusSettings,
    field: str,
    data: str | list[float],
    metric: str,
    expr: str,
    limit: int,
    fields: list[str] | None = None,
) -> list[dict[str, Any]]:
    params: dict[str, Any] = {"metric_type": metric}
    if metric == "COSINE":
        params["params"] = {"ef": max(s.hnsw_ef, limit), "nprobe": 32}
    c = client(s)
    with _search_errors():
        res = c.search(
            s.collection,
            data=[data],
            anns_field=field,
            limit=limit,
            filter=expr,
            output_fields=HIT_FIELDS if fields is None else fields,
            search_params=params,
        )
    rows = [_flat(h) for h in res[0]]
    if metric == "BM25" and any(r["_score"] < 0 for r in rows):
        for r in rows:  # Milvus Lite reports BM25 as a negative distance (best first)
            r["_raw"], r["_score"] = r["_score"], -r["_score"]
    return rows


def _flat(h: Mapping[str, Any]) -> dict[str, Any]:
    e = dict(h.get("entity") or {})
    e.setdefault("anchor", h.get("anchor") or h.get("id"))
    e["_score"] = float(h.get("distance", 0.0))
    return e


def _hybrid(
    s: MilvusSettings,
    qtext: str,
    vector: np.ndarray,
    expr: str,
    limit: int,
    candidates: int,
    fusion: str,
    rrf_k: int,
    weights: tuple[float, float],
) -> list[dict[str, Any]]:
    from pymilvus import AnnSearchRequest, RRFRanker, WeightedRanker

    reqs = [
        AnnSearchRequest([qtext], "sparse", {"metric_type": "BM25"}, candidates, expr=expr),
        AnnSearchRequest(
            [vector.tolist()],
            "dense",
            {"metric_type": "COSINE", "params": {"ef": max(s.hnsw_ef, candidates)}},
            candidates,
            expr=expr,
        ),
    ]
    ranker = RRFRanker(rrf_k) if fusion == "rrf" else WeightedRanker(*weights)
    c = client(s)
    with _search_errors():
        res = c.hybrid_search(
            s.collection, list(reqs), ranker, limit=limit, output_fields=HIT_FIELDS
        )
    return [_flat(h) for h in res[0]]


def _decisive(rows: list[dict[str, Any]], margin: float) -> bool:
    """The local pipeline's early return: lexical top-1 beats the runner-up by ``margin``."""
    if margin <= 0 or not rows:
        return False
    top = float(rows[0]["_score"])
    second = float(rows[1]["_score"]) if len(rows) > 1 else 0.0
    return top > 0 and (top - second) / top >= margin


def search(
    s: MilvusSettings,
    query: str,
    tokens: list[str],
    vector: np.ndarray | None,
    *,
    mode: str = "lexical",
    expr: str = "",
    limit: int = 10,
    explain: bool = False,
    fusion: str = "rrf",
    rrf_k: int = 20,
    weights: tuple[float, float] = (1.0, 1.0),
    candidates: int = 100,
    early_return: float = 0.0,
    min_confidence: float = 0.0,
) -> SearchResult:
    """One search on the collection; ``vector`` is the query embedding (dense/hybrid)."""
    t0 = time.perf_counter()
    if mode not in MODES:
        raise BackendError(f"search mode must be one of {MODES}, got {mode!r}")
    if mode != "lexical" and vector is None:
        raise BackendError(f"mode {mode} needs a query vector (no embedder configured)")
    qtext = " ".join(encode(tokens))
    stages: list[dict[str, Any]] = []
    lex: list[dict[str, Any]] = []
    dense: list[dict[str, Any]] = []
    used = mode
    if mode == "lexical" or (mode == "hybrid" and qtext and explain):
        st = time.perf_counter()
        depth = limit if mode == "lexical" and not explain else max(limit, candidates)
        lex = _channel(s, "sparse", qtext, "BM25", expr, depth) if qtext else []
        stages.append(_stage("lexical", st, f"{len(lex)} candidates"))
    elif mode == "hybrid" and qtext and early_return > 0:
        st = time.perf_counter()  # the early-return probe needs only the top two scores
        lex = _channel(s, "sparse", qtext, "BM25", expr, 2, fields=["anchor"])
        stages.append(_stage("lexical_probe", st, "top 2 for early return"))
        if _decisive(lex, early_return):  # decisive: the lexical list is the answer
            lex = _channel(s, "sparse", qtext, "BM25", expr, limit)
    if mode == "hybrid" and (not qtext or _decisive(lex, early_return)):
        used = "lexical" if qtext else "dense"
        note = "lexical decisive: dense skipped" if qtext else "no lexical terms"
        stages.append({"stage": "early_return", "ms": 0.0, "status": "ok", "note": note})
    if vector is not None and (used == "dense" or (mode == "hybrid" and explain)):
        st = time.perf_counter()
        dense = _channel(s, "dense", vector.tolist(), "COSINE", expr, max(limit, candidates))
        stages.append(_stage("dense", st, f"{len(dense)} candidates"))
    if used == "hybrid":
        assert vector is not None
        if not dense:  # the dense top-1 cosine feeds confidence, as locally
            dense = _channel(s, "dense", vector.tolist(), "COSINE", expr, 1, fields=["anchor"])
        st = time.perf_counter()
        final = _hybrid(s, qtext, vector, expr, limit, candidates, fusion, rrf_k, weights)
        stages.append(_stage("hybrid_search", st, fusion))
    else:
        final = (lex if used == "lexical" else dense)[:limit]
    channels = {"lexical": lex, "dense": dense}
    hits = [
        _hit(e, rank, tokens, used, channels, explain, fusion, rrf_k)
        for rank, e in enumerate(final, 1)
    ]
    conf = _confidence(hits, tokens, dense)
    return SearchResult(
        query,
        tokens,
        hits,
        (time.perf_counter() - t0) * 1000,
        len(lex) or len(dense),
        mode=used,
        confidence=conf,
        abstained=bool(hits) and used != "lexical" and conf < min_confidence,
        stages=stages,
    )


def _confidence(hits: list[Hit], tokens: list[str], dense: list[dict[str, Any]]) -> float:
    """The local pipeline's confidence: share of query terms in the top hit, or the
    dense top-1 cosine mapped onto [0, 1] (whichever is larger)."""
    if not hits:
        return 0.0
    uniq = set(tokens)
    lex = len(set(hits[0].matched_terms) & uniq) / len(uniq) if uniq else 0.0
    cos = 0.0
    if dense:
        span = E5_COS_HIGH - E5_COS_LOW
        cos = float(np.clip((dense[0]["_score"] - E5_COS_LOW) / span, 0.0, 1.0))
    return max(lex, cos)


def _stage(name: str, started: float, note: str) -> dict[str, Any]:
    ms = (time.perf_counter() - started) * 1000
    return {"stage": name, "ms": round(ms, 3), "status": "ok", "note": note, "backend": "milvus"}


def _hit(
    e: dict[str, Any],
    rank: int,
    tokens: list[str],
    mode: str,
    channels: dict[str, list[dict[str, Any]]],
    explain: bool,
    fusion: str,
    rrf_k: int,
) -> Hit:
    exp = None
    if explain:
        trace = {}
        for name, rows in channels.items():
            for i, r in enumerate(rows, 1):
                if r["anchor"] == e["anchor"]:
                    trace[name] = {"rank": i, "raw": round(r.get("_raw", r["_score"]), 6)}
                    break
        exp = {
            "mode": mode,
            "backend": "milvus",
            "channels": trace,
            "fusion": {"ranker": fusion, "k": rrf_k} if mode == "hybrid" else None,
            "final": round(e["_score"], 6),
        }
    return make_hit(entity_row(e), rank, e["_score"], tokens, exp)
