"""Search on Milvus through the local pipeline's own stages.

Milvus answers each channel — BM25 over the surrogate words, cosine over the
dense vectors — and everything after that is the code local search runs:

rewrite (synonyms, glossary) → glossary balance → lexical channel → early
return → dense channel → adaptive channel weights → fusion (RRF or linear) →
board boost → rerank → section merge → hits → confidence.

Rewritten queries carry per-token weights (synonyms, glossary translations);
Milvus's BM25 counts a query word as often as it is repeated, so a weight
``w`` becomes ``round(w × WEIGHT_STEPS)`` copies of the word (the local index
sums the weights of repeated tokens the same way). Index-wide term statistics
(glossary balance, adaptive coverage) come from the KB's term statistics:
the local index on an ingesting machine, uniform weights on a remote-only one
(Milvus does not expose document frequencies).

Fused candidates keep the collection's ``chunk_id`` as their id, so ties
break the same way as locally; section merge groups by document path.
"""

from __future__ import annotations

import dataclasses
import time
import zlib
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from clawkb.backends.milvus_search import _channel, _stage, entity_row
from clawkb.backends.settings import MilvusSettings
from clawkb.backends.surrogate import encode
from clawkb.retrieve import adaptive, fusion
from clawkb.retrieve.crossling import balance, llm_translation, translated_dense
from clawkb.retrieve.merge import Candidate, merge_adjacent
from clawkb.retrieve.result import SearchResult
from clawkb.retrieve.rewrite import Rewritten, rewrite
from clawkb.retrieve.settings import RetrievalSettings
from clawkb.retrieve.stages import confidence, decisive, fuse, hit, rerank
from clawkb.text.glossary import bundled_glossary

#: Copies of a query word per unit of weight (weights are rounded to 1/WEIGHT_STEPS).
WEIGHT_STEPS = 4


def _plain(weights: list[float] | None) -> bool:
    return weights is None or all(w == 1.0 for w in weights)


def weighted_words(tokens: list[str], weights: list[float] | None) -> str:
    """The BM25 query text: surrogate words, each repeated in proportion to its weight
    (scores of a weighted text are :data:`WEIGHT_STEPS` times too large)."""
    if not tokens:
        return ""
    words = encode(tokens)
    if _plain(weights):
        return " ".join(words)
    assert weights is not None
    per: dict[str, float] = {}
    for word, w in zip(words, weights, strict=True):
        per[word] = per.get(word, 0.0) + float(w)
    copies = {word: round(w * WEIGHT_STEPS) for word, w in per.items()}
    return " ".join(" ".join([word] * n) for word, n in copies.items() if n > 0)


class MilvusTermStats:
    """What the query stages read from "the lexical index", answered for Milvus:
    document frequencies from the KB's own term statistics, best-passage scores
    from Milvus BM25 (scaled back by :data:`WEIGHT_STEPS`)."""

    def __init__(self, s: MilvusSettings, stats: Any, expr: str) -> None:
        self.s, self.stats, self.expr = s, stats, expr
        self.seen: dict[str, list[dict[str, Any]]] = {}  # query text -> rows, best first
        self.seen_k: dict[str, int] = {}  # the k each was asked with

    def lexical(self, tokens: list[str], weights: list[float] | None, k: int) -> list[dict]:
        """BM25 top-``k`` rows for weighted tokens, scores scaled back to weight 1 (a
        query already sent, e.g. the lexical channel, is not sent again)."""
        text = weighted_words(tokens, weights)
        rows = self.seen.get(text)
        if rows is not None and (len(rows) >= k or len(rows) < self.seen_k.get(text, 0)):
            return rows[:k]
        rows = _channel(self.s, "sparse", text, "BM25", self.expr, k) if text else []
        if not _plain(weights):
            for row in rows:
                row["_score"] /= WEIGHT_STEPS
        self.seen[text], self.seen_k[text] = rows, k
        return rows

    @property
    def n_docs(self) -> int:
        return int(getattr(self.stats, "n_docs", 0))

    def doc_freqs(self, hashes: np.ndarray) -> np.ndarray:
        return self.stats.doc_freqs(hashes)

    def idf(self, df: np.ndarray) -> np.ndarray:
        return self.stats.idf(df)

    def search(
        self, tokens: list[str], k: int = 10, term_weights: list[float] | None = None, **_: Any
    ) -> tuple[np.ndarray, np.ndarray, int]:
        rows = self.lexical(tokens, term_weights, k)
        ids = np.asarray([int(r.get("chunk_id", 0)) for r in rows], np.int64)
        return ids, np.asarray([r["_score"] for r in rows]), len(rows)


class _Ids:
    """Entity ↔ fusion id: the row's chunk id, unless two sources share it."""

    def __init__(self) -> None:
        self.by_anchor: dict[str, int] = {}
        self.rows: dict[int, dict[str, Any]] = {}

    def channel(self, rows: list[dict[str, Any]]) -> fusion.Channel:
        ids = [self.add(r) for r in rows]
        return fusion.Channel(np.asarray(ids, np.int64), np.asarray([r["_score"] for r in rows]))

    def add(self, e: dict[str, Any]) -> int:
        a = e["anchor"]
        if a not in self.by_anchor:
            cid = int(e.get("chunk_id", 0))
            if cid in self.rows:  # another KB's chunk with the same id: a fresh one
                cid = -(len(self.by_anchor) + 1)
            self.by_anchor[a] = cid
            self.rows[cid] = e
        return self.by_anchor[a]


def doc_row(e: dict[str, Any]) -> Any:
    """The store-shaped row, with a document id from (source, path) for section merge."""
    doc = zlib.crc32(f"{e.get('source', '')}\0{e['path']}".encode()) & 0x7FFFFFFF
    return dataclasses.replace(entity_row(e), doc_id=doc)


def run(
    kb: Any,
    s: MilvusSettings,
    rs: RetrievalSettings,
    query: str,
    mode: str,
    vector: np.ndarray | None,
    *,
    expr: str = "",
    limit: int = 10,
    explain: bool = False,
    embed: Callable[[str], np.ndarray] | None = None,
) -> SearchResult:
    """One search with client-side fusion (``mode`` resolved: lexical | dense | hybrid).
    ``embed`` embeds another query text (the glossary translation of a cross-lingual
    query, as the local dense channel does)."""
    from clawkb.retrieve.pipeline import retriever_for

    t0 = time.perf_counter()
    r = retriever_for(kb)
    stages: list[dict[str, Any]] = []
    st = time.perf_counter()
    rw = rewrite(query, r.synonyms(rs), bundled_glossary() if rs.glossary else None)
    _note(stages, "rewrite", st, f"{len(rw.expansions)} expansions")
    if rs.translate:
        st = time.perf_counter()
        rw, note = llm_translation(kb, rw, rs.budget_translate_ms)
        _note(stages, "translate", st, note)
    stats = MilvusTermStats(s, kb.lexical, expr)
    if mode != "dense":
        rw = balance(stats, rw, rs.glossary_share)
    weights = rw.weights if rw.expansions else None
    merge_on = rs.merge if rs.merge is not None else mode != "lexical"
    deep = bool(rs.rerank) or merge_on or mode != "lexical"
    k = max(rs.candidates, limit) if deep else limit

    ids = _Ids()
    channels: dict[str, fusion.Channel] = {}
    dense_tr: str | None = None
    if mode in ("lexical", "hybrid"):
        st = time.perf_counter()
        rows = stats.lexical(rw.tokens, weights, k)
        channels["lexical"] = ids.channel(rows)
        stages.append(_stage("lexical", st, f"{len(rows)} candidates"))
    early = mode == "hybrid" and decisive(channels.get("lexical"), rs.early_return)
    if early:
        stages.append({"stage": "early_return", "ms": 0.0, "status": "ok",
                       "note": f"lexical top-1 margin >= {rs.early_return}: dense skipped"})  # fmt: skip
    if vector is not None and (mode == "dense" or (mode == "hybrid" and not early)):
        st = time.perf_counter()
        rows = _channel(s, "dense", vector.tolist(), "COSINE", expr, k)
        dense, dense_tr = ids.channel(rows), None
        if embed is not None and mode == "hybrid" and rs.adaptive and rs.glossary:
            # as locally: a cross-lingual query's dense channel searches its translation
            dense, dense_tr = translated_dense(
                stats, rw, bundled_glossary(), dense,
                lambda text: ids.channel(_channel(s, "dense", embed(text).tolist(), "COSINE",
                                                  expr, k)),
            )  # fmt: skip
        channels["dense"] = dense
        on = f" (on the translation {dense_tr!r})" if dense_tr else ""
        stages.append(_stage("dense", st, f"{len(dense.ids)} candidates{on}"))
    channels = {n: c for n, c in channels.items() if len(c.ids) or n == "lexical"}

    st = time.perf_counter()
    fs, note = rs, rs.fusion if len(channels) > 1 else "single channel"
    if rs.adaptive and len(channels) > 1:
        fs, trace = adaptive.tune(stats, rw, channels, rs, dense_translated=bool(dense_tr))
        note += " adaptive " + " ".join(f"{n}={v}" for n, v in trace.items())
    fused = _fuse(kb, channels, fs, ids)
    _note(stages, "fusion", st, f"{note} (client side)")

    depth = max(limit * 3, rs.rerank_depth) if deep else limit
    make = partial(hit, tokens=rw.tokens, mode=mode, explain=explain, lexical=None,
                   snippets=True, labels=())  # fmt: skip
    cands = []
    for f in fused[:depth]:
        row = doc_row(ids.rows[f.chunk_id])
        cands.append(Candidate(row, f.score, make=partial(make, row, f)))
    if rs.rerank and cands:
        cands = rerank(r, query, cands, rs, stages)
    if merge_on:
        cands = merge_adjacent(cands, rs.merge_ratio)
    hits = [c.final(i) for i, c in enumerate(cands[:limit], 1)]
    if explain:
        for h in hits:
            if h.explanation is not None:
                h.explanation["backend"] = "milvus"
                h.explanation["fusion"] = {"ranker": fs.fusion, "k": fs.rrf_k, "side": "client"}
    conf = confidence(hits, rw.tokens, channels)
    return SearchResult(
        query,
        rw.tokens,
        hits,
        (time.perf_counter() - t0) * 1000,
        max((len(c.ids) for c in channels.values()), default=0),
        mode=mode if not early else "hybrid",
        confidence=conf,
        abstained=bool(hits) and "dense" in channels and conf < rs.min_confidence,
        stages=stages,
        rewrites=rw.expansions,
    )


def _fuse(
    kb: Any, channels: dict[str, fusion.Channel], fs: RetrievalSettings, ids: _Ids
) -> list[fusion.Fused]:
    """The local fusion; recency (linear fusion) from the rows' ``mtime`` field."""
    if fs.fusion == "linear" and fs.w_recency and channels:
        now = time.time()
        recency = {
            cid: fusion.recency_score(float(e.get("mtime", 0.0)), now, fs.half_life_days)
            for cid, e in ids.rows.items()
        }
        weights = {"lexical": fs.w_lexical, "dense": fs.w_dense}
        return fusion.linear(channels, weights, fs.norm, recency, fs.w_recency)
    return fuse(kb, channels, fs)


def _note(stages: list[dict[str, Any]], name: str, started: float, note: str) -> None:
    stages.append(_stage(name, started, note))


__all__ = ["MilvusTermStats", "Rewritten", "run", "weighted_words"]
