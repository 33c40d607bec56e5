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
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from clawkb.embed import vectors
from clawkb.embed.base import Embedder, get_embedder
from clawkb.retrieve import fusion
from clawkb.retrieve.cache import TTLCache
from clawkb.retrieve.filters import Filters, allowed_ids
from clawkb.retrieve.merge import Candidate, merge_adjacent
from clawkb.retrieve.rewrite import SynonymGroup, load_synonyms, rewrite
from clawkb.retrieve.search import SearchResult
from clawkb.retrieve.settings import RetrievalSettings, embedding_config, from_config
from clawkb.retrieve.snippet import make_snippet
from clawkb.store.repo import ChunkRow
from clawkb.text import normalize
from clawkb.types import Hit

T = TypeVar("T")
_POOL = ThreadPoolExecutor(max_workers=2, thread_name_prefix="clawkb-stage")
_MEMORY_PREFIX = "memory://"


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
    rw = rewrite(query, r.synonyms(s))
    _stage(stages, "rewrite", st, "ok", f"{len(rw.expansions)} expansions")
    allowed = None
    if filters.active:
        st = time.perf_counter()
        allowed = allowed_ids(kb.repo, filters)
        _stage(stages, "filters", st, "ok", f"{len(allowed)} chunks allowed")

    channels: dict[str, fusion.Channel] = {}
    matched = 0
    if resolved in ("lexical", "hybrid"):
        st = time.perf_counter()
        got = _budget(
            lambda: kb.lexical.search(
                rw.tokens, k=s.candidates, allowed=allowed, term_weights=rw.weights
            ),
            s.budget_lexical_ms,
        )
        if got is None:
            _stage(stages, "lexical", st, "timeout", "lexical channel skipped")
        else:
            ids, scores, matched = got
            channels["lexical"] = _drop_memory(kb, fusion.Channel(ids, scores), include_memory)
            _stage(stages, "lexical", st, "ok", f"{len(ids)} candidates")
    if resolved == "hybrid" and _decisive(channels.get("lexical"), s.early_return):
        stages.append(
            {
                "stage": "early_return",
                "ms": 0.0,
                "status": "ok",
                "note": f"lexical top-1 margin >= {s.early_return}",
            }
        )
        resolved = "lexical"
    if resolved in ("dense", "hybrid"):
        st = time.perf_counter()
        dense = _dense_channel(r, query, s, allowed)
        if dense is None:
            _stage(stages, "dense", st, "timeout", f"over {s.budget_dense_ms:.0f} ms; skipped")
        else:
            channels["dense"] = _drop_memory(kb, dense, include_memory)
            matched = max(matched, len(dense.ids))
            _stage(stages, "dense", st, "ok", f"{len(dense.ids)} candidates")

    st = time.perf_counter()
    fused = _fuse(kb, channels, s)
    _stage(stages, "fusion", st, "ok", s.fusion if len(channels) > 1 else "single channel")
    rows = kb.repo.chunks_by_ids([f.chunk_id for f in fused[: max(limit * 3, s.rerank_depth)]])
    cands = [
        Candidate(
            rows[f.chunk_id],
            f.score,
            _hit(rows[f.chunk_id], f, rw.tokens, resolved, channels, explain),
        )
        for f in fused
        if f.chunk_id in rows
    ]
    if s.rerank and cands:
        cands = _rerank(r, query, cands, s, stages)
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
        abstained=bool(hits) and conf < s.min_confidence,
        stages=stages,
        rewrites=rw.expansions,
        warnings=warnings,
    )
    r.cache.put(key, replace(res, warnings=list(res.warnings)))
    return res


def _stage(stages: list[dict[str, Any]], name: str, started: float, status: str, note: str) -> None:
    stages.append(
        {
            "stage": name,
            "ms": round((time.perf_counter() - started) * 1000, 3),
            "status": status,
            "note": note,
        }
    )


def _budget(fn: Callable[[], T], budget_ms: float) -> T | None:
    """Run ``fn`` with a time budget; None when it did not finish in time."""
    fut = _POOL.submit(fn)
    try:
        return fut.result(timeout=budget_ms / 1000.0)
    except FutureTimeout:
        return None


def _copy(res: PipelineResult, stages: list[dict[str, Any]], t0: float) -> PipelineResult:
    return replace(
        res, stages=stages, took_ms=(time.perf_counter() - t0) * 1000, warnings=list(res.warnings)
    )


def _drop_memory(kb: Any, ch: fusion.Channel, include_memory: bool) -> fusion.Channel:
    repo = kb.repo
    if (
        include_memory
        or not hasattr(repo, "has_path_prefix")
        or not repo.has_path_prefix(_MEMORY_PREFIX)
    ):
        return ch
    hidden = repo.chunk_ids_with_path_prefix(ch.ids.tolist(), _MEMORY_PREFIX)
    keep = ~np.isin(ch.ids, np.fromiter(hidden, np.int64, len(hidden)))
    return fusion.Channel(ch.ids[keep], ch.scores[keep])


def _decisive(lex: fusion.Channel | None, margin: float) -> bool:
    """Lexical is decisive when its top-1 beats the runner-up by ``margin`` (relative)."""
    if margin <= 0 or lex is None or len(lex.scores) == 0:
        return False
    top = float(lex.scores[0])
    second = float(lex.scores[1]) if len(lex.scores) > 1 else 0.0
    return top > 0 and (top - second) / top >= margin


def _dense_channel(
    r: Retriever, query: str, s: RetrievalSettings, allowed: np.ndarray | None
) -> fusion.Channel | None:
    index = r.dense_index()
    mkey = index.mkey

    def work() -> fusion.Channel:
        q = r.qvec_cache.get((mkey, query))
        if q is None:
            q = r.embedder.embed_query(query)
            r.qvec_cache.put((mkey, query), q)
        ids, scores = index.search(q, s.candidates, allowed)
        return fusion.Channel(ids, scores)

    return _budget(work, s.budget_dense_ms)


def _fuse(kb: Any, channels: dict[str, fusion.Channel], s: RetrievalSettings) -> list[fusion.Fused]:
    weights = {"lexical": s.w_lexical, "dense": s.w_dense}
    if not channels:
        return []
    if len(channels) == 1 and not (s.fusion == "linear" and s.w_recency):
        ((name, ch),) = channels.items()
        return [
            fusion.Fused(int(c), float(v), {name: {"rank": i, "raw": round(float(v), 6)}})
            for i, (c, v) in enumerate(zip(ch.ids, ch.scores, strict=True), 1)
        ]
    if s.fusion == "rrf":
        return fusion.rrf(channels, weights, s.rrf_k)
    recency = None
    if s.w_recency:
        ids = sorted({int(i) for ch in channels.values() for i in ch.ids})
        recency = _recency(kb, ids, s.half_life_days)
    return fusion.linear(channels, weights, s.norm, recency, s.w_recency)


def _recency(kb: Any, ids: list[int], half_life_days: float) -> dict[int, float]:
    now = time.time()
    out: dict[int, float] = {}
    for i in range(0, len(ids), 900):
        part = ids[i : i + 900]
        q = (
            "SELECT c.id, d.mtime_ns FROM chunks c JOIN documents d ON d.id = c.doc_id"
            f" WHERE c.id IN ({','.join('?' * len(part))})"
        )
        for cid, mtime_ns in kb.conn.execute(q, part):
            out[cid] = fusion.recency_score((mtime_ns or 0) / 1e9, now, half_life_days)
    return out


def _rerank(
    r: Retriever,
    query: str,
    cands: list[Candidate],
    s: RetrievalSettings,
    stages: list[dict[str, Any]],
) -> list[Candidate]:
    from clawkb.retrieve.rerank import make_reranker

    st = time.perf_counter()
    head, tail = cands[: s.rerank_depth], cands[s.rerank_depth :]
    reranker = make_reranker(
        s.rerank, s.extra.get("rerank_options") or {}, r.embedder if s.rerank == "dense" else None
    )
    scores = _budget(lambda: reranker.score(query, [c.row.text for c in head]), s.budget_rerank_ms)
    if scores is None:
        _stage(
            stages, "rerank", st, "timeout", f"over {s.budget_rerank_ms:.0f} ms; fused order kept"
        )
        return cands
    order = np.argsort(-np.asarray(scores), kind="stable")
    out = []
    for i in order.tolist():
        sc = float(scores[i])
        if s.rerank_min_score is not None and sc < s.rerank_min_score:
            continue
        c = head[i]
        if c.hit.explanation is not None:
            c.hit.explanation["rerank"] = {
                "model": reranker.name,
                "score": round(sc, 6),
                "fused_rank": i + 1,
            }
        out.append(Candidate(c.row, sc, c.hit))
    dropped = len(head) - len(out)
    _stage(stages, "rerank", st, "ok", f"{reranker.name}: {len(head)} re-scored, {dropped} dropped")
    return out + [Candidate(c.row, min(-1e9, c.score), c.hit) for c in tail]


def _hit(
    row: ChunkRow,
    f: fusion.Fused,
    tokens: list[str],
    mode: str,
    channels: dict[str, fusion.Channel],
    explain: bool,
) -> Hit:
    haystack = normalize(" ".join((row.title, *row.heading_path, row.text)))
    uniq = tuple(dict.fromkeys(tokens))
    matched = tuple(t for t in uniq if t in haystack)
    snippet, spans = make_snippet(row.text, uniq)
    exp = None
    if explain:
        exp = {"mode": mode, "channels": f.trace, "final": round(f.score, 6)}
    return Hit(
        rank=0,
        score=f.score,
        anchor=row.to_anchor(),
        text=row.text,
        title=row.title,
        kind=row.kind,
        matched_terms=matched,
        snippet=snippet,
        highlights=spans,
        explanation=exp,
    )


# -- confidence ---------------------------------------------------------------
#: Top-1 cosine of e5-small where a relevant passage becomes likely / near-certain
#: (from bench/fusion_sweep.py on the shared sets; other models use the lexical part).
E5_COS_LOW, E5_COS_HIGH = 0.80, 0.90


def confidence(hits: list[Hit], tokens: list[str], channels: dict[str, fusion.Channel]) -> float:
    """How sure the top hit answers the query, in [0, 1].

    The larger of two signals: the share of distinct query terms the top hit
    contains (lexical evidence) and the dense channel's top-1 cosine mapped
    onto [0, 1] between :data:`E5_COS_LOW` and :data:`E5_COS_HIGH`.
    """
    if not hits:
        return 0.0
    uniq = set(tokens)
    lex = len(set(hits[0].matched_terms) & uniq) / len(uniq) if uniq else 0.0
    dense = 0.0
    ch = channels.get("dense")
    if ch is not None and len(ch.scores):
        dense = float(
            np.clip((float(ch.scores[0]) - E5_COS_LOW) / (E5_COS_HIGH - E5_COS_LOW), 0, 1)
        )
    return max(lex, dense)
