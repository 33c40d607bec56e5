"""The staged retrieval pipeline (DESIGN D5) behind ``KnowledgeBase.search(mode=...)``.

rewrite → cache → filters → lexical → early return → dense → fusion →
rerank → section merge → top-k → confidence. Each stage is timed; the slow
ones (lexical, dense, rerank) run under a time budget and, when it runs out,
the pipeline continues with what it has and records the degradation in
``stages`` (shown by ``--explain``). The plain lexical path of
:func:`clawkb.retrieve.search.lexical_search` is untouched: the pipeline runs
only when a mode, an option or stored vectors ask for it.
"""

from __future__ import annotations

import time
import weakref
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from clawkb.embed import vectors
from clawkb.embed.base import Embedder, get_embedder
from clawkb.retrieve import adaptive, fusion
from clawkb.retrieve.cache import TTLCache
from clawkb.retrieve.crossling import balance, llm_translation
from clawkb.retrieve.filters import Filters, allowed_ids
from clawkb.retrieve.merge import Candidate, merge_adjacent
from clawkb.retrieve.rewrite import SynonymGroup, load_synonyms, rewrite
from clawkb.retrieve.search import SearchResult
from clawkb.retrieve.settings import RetrievalSettings, embedding_config, from_config
from clawkb.retrieve.stages import (
    budget,
    confidence,
    decisive,
    drop_memory,
    fuse,
    hit,
    rerank,
    stage,
)
from clawkb.text.glossary import bundled_glossary


@dataclass
class PipelineResult(SearchResult):
    """A :class:`SearchResult` plus the mode, confidence and stage trace."""

    mode: str = "lexical"
    confidence: float = 1.0
    abstained: bool = False
    stages: list[dict[str, Any]] = field(default_factory=list)
    rewrites: list[dict[str, Any]] = field(default_factory=list)

    @property
    def message(self) -> str:
        if self.abstained and self.hits:
            return (
                f"no confident match (confidence {self.confidence:.2f});"
                " the nearest passages follow"
            )
        return super().message

    def to_dict(self) -> dict[str, Any]:
        data = super().to_dict()
        data.update(
            mode=self.mode,
            confidence=round(self.confidence, 4),
            abstained=self.abstained,
            stages=self.stages,
            rewrites=self.rewrites,
        )
        return data


class Retriever:
    """Per-KB state: settings, synonyms, embedder, dense index and caches."""

    def __init__(self, kb: Any) -> None:
        self.kb = kb
        self.settings = from_config(kb.config.extra)
        self.cache = TTLCache(self.settings.cache_size, self.settings.cache_ttl_s)
        self.qvec_cache = TTLCache(512, 3600.0)
        self._embedder: Embedder | None = None
        self._dense: Any = None
        self._synonyms: tuple[float, list[SynonymGroup]] | None = None

    # -- lazily built parts ------------------------------------------------
    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            name, options = embedding_config(self.kb.config.extra)
            self._embedder = get_embedder(name, options)
        return self._embedder

    def set_embedder(self, embedder: Embedder) -> None:
        self._embedder, self._dense = embedder, None

    def dense_index(self) -> Any:
        from clawkb.index.dense import DenseIndex

        sig = self.embedder.signature()
        vectors.check_signature(self.kb.conn, sig)
        if self._dense is None or self._dense.signature != sig:
            self._dense = DenseIndex(
                self.kb.home / "index" / "dense",
                self.kb.conn,
                sig,
                ann_threshold=self.settings.ann_threshold,
            )
        return self._dense

    def synonyms(self, settings: RetrievalSettings) -> list[SynonymGroup]:
        path = Path(settings.synonyms).expanduser() if settings.synonyms else None
        if path is not None and not path.is_absolute():
            path = self.kb.home / path
        if path is None:
            path = self.kb.home / "synonyms.txt"
            if not path.is_file():
                return []
        mtime = path.stat().st_mtime if path.exists() else -1.0
        if self._synonyms is None or self._synonyms[0] != mtime:
            self._synonyms = (mtime, load_synonyms(path))
        return self._synonyms[1]

    def has_vectors(self) -> bool:
        return vectors.stored_signature(self.kb.conn) is not None

    def stamp(self) -> tuple[int, int]:
        return (self.kb.lexical.applied_seq, vectors.data_version(self.kb.conn))


_RETRIEVERS: weakref.WeakKeyDictionary[Any, Retriever] = weakref.WeakKeyDictionary()


def retriever_for(kb: Any) -> Retriever:
    r = _RETRIEVERS.get(kb)
    if r is None:
        r = _RETRIEVERS[kb] = Retriever(kb)
    return r


def search_kb(
    kb: Any,
    query: str,
    *,
    limit: int = 10,
    path_globs: tuple[str, ...] = (),
    mode: str | None = None,
    filters: Filters | None = None,
    explain: bool = False,
    include_memory: bool = False,
    options: dict[str, Any] | None = None,
) -> PipelineResult:
    """``KnowledgeBase.search``'s entry: path globs join the other filters."""
    from dataclasses import replace as _replace

    f = filters or Filters()
    if path_globs:
        f = _replace(f, path_globs=tuple(dict.fromkeys((*f.path_globs, *path_globs))))
    return run(
        kb,
        query,
        limit=limit,
        mode=mode,
        filters=f,
        explain=explain,
        include_memory=include_memory,
        options=options,
    )


# -- the pipeline -----------------------------------------------------------
def run(
    kb: Any,
    query: str,
    *,
    limit: int = 10,
    mode: str | None = None,
    filters: Filters | None = None,
    explain: bool = False,
    include_memory: bool = False,
    options: dict[str, Any] | None = None,
) -> PipelineResult:
    t0 = time.perf_counter()
    r = retriever_for(kb)
    s = r.settings.with_overrides({**(options or {}), "mode": mode})
    filters = filters or Filters()
    stages: list[dict[str, Any]] = []
    key = (query, limit, s.cache_key(), filters, explain, include_memory, r.stamp())
    cached = r.cache.get(key)
    if cached is not None:
        stages.append({"stage": "cache", "ms": 0.0, "status": "hit"})
        return _copy(cached, stages, t0)
    resolved = s.mode if s.mode != "auto" else ("hybrid" if r.has_vectors() else "lexical")
    warnings = []
    if resolved in ("dense", "hybrid") and not r.has_vectors():
        warnings.append(
            f"mode {resolved}: no vectors yet; run `clawkb embed` (lexical results only)"
        )
        resolved = "lexical"

    st = time.perf_counter()
    rw = rewrite(query, r.synonyms(s), bundled_glossary() if s.glossary else None)
    stage(stages, "rewrite", st, "ok", f"{len(rw.expansions)} expansions")
    allowed = None
    if filters.active:
        st = time.perf_counter()
        allowed = allowed_ids(kb.repo, filters)
        stage(stages, "filters", st, "ok", f"{len(allowed)} chunks allowed")
    if s.translate:  # crossling: optional LLM query translation (off by default)
        st = time.perf_counter()
        rw, note = llm_translation(kb, rw, s.budget_translate_ms)
        stage(stages, "translate", st, "ok", note)
    if resolved != "dense":  # crossling: scale glossary translations to this index
        rw = balance(kb.lexical, rw, s.glossary_share, allowed)

    channels: dict[str, fusion.Channel] = {}
    matched = 0
    if resolved in ("lexical", "hybrid"):
        st = time.perf_counter()
        got = budget(
            lambda: kb.lexical.search(
                rw.tokens, k=s.candidates, allowed=allowed, term_weights=rw.weights
            ),
            s.budget_lexical_ms,
        )
        if got is None:
            stage(stages, "lexical", st, "timeout", "lexical channel skipped")
        else:
            ids, scores, matched = got
            channels["lexical"] = drop_memory(kb, fusion.Channel(ids, scores), include_memory)
            stage(stages, "lexical", st, "ok", f"{len(ids)} candidates")
    early = resolved == "hybrid" and decisive(channels.get("lexical"), s.early_return)
    if early:
        stages.append(
            {
                "stage": "early_return",
                "ms": 0.0,
                "status": "ok",
                "note": f"lexical top-1 margin >= {s.early_return}: dense skipped",
            }
        )
    if resolved == "dense" or (resolved == "hybrid" and not early):
        st = time.perf_counter()
        dense = _dense_channel(r, query, s, allowed)
        if dense is None:
            stage(stages, "dense", st, "timeout", f"over {s.budget_dense_ms:.0f} ms; skipped")
        else:
            channels["dense"] = drop_memory(kb, dense, include_memory)
            matched = max(matched, len(dense.ids))
            stage(stages, "dense", st, "ok", f"{len(dense.ids)} candidates")

    st = time.perf_counter()
    fs, note = s, s.fusion if len(channels) > 1 else "single channel"
    if s.adaptive and len(channels) > 1:  # crossling hook: per-query weights (adaptive.py)
        fs, trace = adaptive.tune(kb.lexical, rw, channels, s)
        note += " adaptive " + " ".join(f"{k}={v}" for k, v in trace.items())
    fused = fuse(kb, channels, fs)
    stage(stages, "fusion", st, "ok", note)
    rows = kb.repo.chunks_by_ids([f.chunk_id for f in fused[: max(limit * 3, s.rerank_depth)]])
    cands = [
        Candidate(
            rows[f.chunk_id],
            f.score,
            make=partial(hit, rows[f.chunk_id], f, rw.tokens, resolved, channels, explain),
        )
        for f in fused
        if f.chunk_id in rows
    ]
    if s.rerank and cands:
        cands = rerank(r, query, cands, s, stages)
    if s.merge:
        cands = merge_adjacent(cands, s.merge_ratio)
    hits = [replace(c.hit, rank=i, score=c.score) for i, c in enumerate(cands[:limit], 1)]
    conf = confidence(hits, rw.tokens, channels)
    res = PipelineResult(
        query,
        rw.tokens,
        hits,
        (time.perf_counter() - t0) * 1000,
        matched,
        mode=resolved,
        confidence=conf,
        abstained=bool(hits) and "dense" in channels and conf < s.min_confidence,
        stages=stages,
        rewrites=rw.expansions,
        warnings=warnings,
    )
    r.cache.put(key, replace(res, warnings=list(res.warnings)))
    return res


def _copy(res: PipelineResult, stages: list[dict[str, Any]], t0: float) -> PipelineResult:
    return replace(
        res, stages=stages, took_ms=(time.perf_counter() - t0) * 1000, warnings=list(res.warnings)
    )


def _dense_channel(
    r: Retriever, query: str, s: RetrievalSettings, allowed: np.ndarray | None
) -> fusion.Channel | None:
    index = r.dense_index()
    index.warm()  # loading vectors, graph and model is start-up cost, not query time
    r.embedder.warm()
    mkey = index.mkey

    def work() -> fusion.Channel:
        q = r.qvec_cache.get((mkey, query))
        if q is None:
            q = r.embedder.embed_query(query)
            r.qvec_cache.put((mkey, query), q)
        ids, scores = index.search(q, s.candidates, allowed)
        return fusion.Channel(ids, scores)

    return budget(work, s.budget_dense_ms)
