"""The one retrieval pipeline (ARCHITECTURE.md, `retrieve/`): every search is a :class:`Query` run here.

rewrite → cache → candidates (filters, restriction, memories hidden) →
lexical → early return → dense → fusion → boost (boards, memory weights) →
group → rerank → section merge → top-k hits → confidence; the knowledge
stages (domain routing, trust tiers, graph) wrap that run when wanted
(:func:`clawkb.knowledge.search.run_query`), for every caller.

Lexical-only search is this pipeline with the dense stages off: the lexical
channel then fetches only ``limit`` candidates and runs inline (there is no
other channel to degrade to), so it costs what the plain BM25F call costs.
With a dense channel the slow stages (lexical, dense, rerank) run under a
time budget; when one runs out the pipeline continues with what it has and
records the degradation in ``stages`` (shown by ``--explain``). The dense
channel runs on a stage worker while this thread does the later stages' work
that needs only the lexical side (:func:`_prepare`).
"""

from __future__ import annotations

import os
import time
import weakref
from collections.abc import Mapping
from dataclasses import replace
from functools import partial
from pathlib import Path
from stat import S_ISREG
from typing import TYPE_CHECKING, Any

import numpy as np

from clawkb.embed import vectors
from clawkb.embed.base import Embedder
from clawkb.embed.run import kb_embedder, set_kb_embedder
from clawkb.plugins import load_group
from clawkb.retrieve import adaptive, fusion, notfound, titles, unembedded
from clawkb.retrieve.cache import SHARED_RESULTS, TTLCache
from clawkb.retrieve.crossling import balance, dense_translation, llm_translation, pick_dense
from clawkb.retrieve.hits import query_terms
from clawkb.retrieve.merge import Candidate, merge_adjacent
from clawkb.retrieve.query import Query
from clawkb.retrieve.result import SearchResult
from clawkb.retrieve.rewrite import SynonymGroup, load_synonyms, rewrite
from clawkb.retrieve.settings import RetrievalSettings, from_config, remote_min_confidence
from clawkb.retrieve.source import MEMORY_PREFIX, Source
from clawkb.retrieve.stages import (
    RankContext,
    budget,
    confidence,
    decisive,
    finish,
    fuse,
    hit,
    rerank,
    stage,
    start,
)
from clawkb.store.memo import commit_stamp
from clawkb.text.glossary import bundled_glossary

if TYPE_CHECKING:
    from clawkb.config import Config
    from clawkb.index.dense import DenseIndex
    from clawkb.kb import KnowledgeBase

__all__ = ["MEMORY_PREFIX", "Retriever", "retriever_for", "run"]


#: See :attr:`Retriever.qvec_cache`.
QUERY_VECTORS: TTLCache[np.ndarray] = TTLCache(512, 3600.0)


#: The last configuration read into settings, and them: a server's views are new KB
#: objects after every write but share one (frozen) configuration, so each new view's
#: retriever takes the settings as they are instead of validating every key again.
_LAST_SETTINGS: tuple[object, RetrievalSettings] | None = None


def _settings_of(config: Config) -> RetrievalSettings:
    global _LAST_SETTINGS
    last = _LAST_SETTINGS
    if last is not None and last[0] is config:
        return last[1]
    settings = from_config(config)
    _LAST_SETTINGS = (config, settings)
    return settings


class Retriever:
    """Per-KB state: settings, synonyms, embedder, dense index and caches."""

    def __init__(self, kb: KnowledgeBase) -> None:
        # weak: the registry below is keyed weakly by the KB, and a strong reference
        # from the value would keep every KB (and its mapped index files) alive
        self._kb = weakref.ref(kb)
        self.settings = _settings_of(kb.config)
        self.cache: TTLCache[SearchResult] = TTLCache(
            self.settings.cache_size, self.settings.cache_ttl_s
        )
        #: query vectors by (model key, texts): one cache per process, shared by every
        #: view (a server renews its views after each write; a query's vector does not
        #: change with the data, so a per-view cache would embed it again each time)
        self.qvec_cache: TTLCache[np.ndarray] = QUERY_VECTORS
        self._dense: DenseIndex | None = None
        self._synonyms: tuple[float, list[SynonymGroup]] | None = None
        self._synonyms_path: tuple[str | None, Path, bool] | None = None
        self._stored: tuple[tuple[int, int], dict[str, Any] | None] | None = None
        self._version: tuple[tuple[int, int], int] | None = None

    @property
    def kb(self) -> KnowledgeBase:
        kb = self._kb()
        if kb is None:
            raise RuntimeError("the knowledge base of this retriever was closed and released")
        return kb

    # -- lazily built parts ------------------------------------------------
    @property
    def embedder(self) -> Embedder:
        return kb_embedder(self.kb)  # owned by the embed layer, one per KB

    def set_embedder(self, embedder: Embedder) -> None:
        set_kb_embedder(self.kb, embedder)
        self._dense = None

    def dense_index(self) -> DenseIndex:
        from clawkb.index.dense import DenseIndex

        sig = self.embedder.signature()
        vectors.check_stored(self.stored_signature(), sig)
        if self._dense is None or self._dense.signature != sig:
            self._dense = DenseIndex(
                self.kb.home / "index" / "dense",
                self.kb.conn,
                sig,
                ann_threshold=self.settings.ann_threshold,
            )
        return self._dense

    def synonyms(self, settings: RetrievalSettings) -> list[SynonymGroup]:
        """The synonym file's groups, read again when its mtime changes (one stat a query)."""
        where = self._synonyms_path
        if where is None or where[0] != settings.synonyms:
            path = Path(settings.synonyms).expanduser() if settings.synonyms else None
            if path is not None and not path.is_absolute():
                path = self.kb.home / path
            default = path is None  # the KB's own synonyms.txt, optional
            where = self._synonyms_path = (
                settings.synonyms,
                path or self.kb.home / "synonyms.txt",
                default,
            )
        _, path, default = where
        try:
            st: os.stat_result | None = os.stat(path)
        except OSError:
            st = None
        if default and (st is None or not S_ISREG(st.st_mode)):
            return []
        mtime = st.st_mtime if st is not None else -1.0
        if self._synonyms is None or self._synonyms[0] != mtime:
            self._synonyms = (mtime, load_synonyms(path))
        return self._synonyms[1]

    def stored_signature(self) -> dict[str, Any] | None:
        """The stored vectors' signature, read again only after a commit (a search asks
        several times: the damage check, each dense index use)."""
        conn = self.kb.conn
        quick = commit_stamp(conn)
        if self._stored is None or self._stored[0] != quick:
            self._stored = (quick, vectors.stored_signature(conn))
        return self._stored[1]

    def dense_damage(self) -> str | None:
        """Why the dense vectors cannot be searched (a damaged file), or None.

        Vectors from another model than the configured one are not damage: the
        dense stage meets that error itself and reports it as it always has.
        """
        from clawkb.errors import DenseDamaged

        sig = self.embedder.signature()
        stored = self.stored_signature()
        if stored is not None and vectors.model_key(stored) != vectors.model_key(sig):
            return None
        try:
            self.dense_index().refresh()
        except DenseDamaged as exc:
            return str(exc)
        return None

    def has_vectors(self) -> bool:
        kb = self.kb
        return kb.memo.get("has_vectors", lambda: vectors.stored_signature(kb.conn) is not None)

    def stamp(self) -> tuple[int, int]:
        conn = self.kb.conn
        quick = commit_stamp(conn)
        if self._version is None or self._version[0] != quick:
            self._version = (quick, vectors.data_version(conn))
        return (self.kb.lexical.applied_seq, self._version[1])


_RETRIEVERS: weakref.WeakKeyDictionary[Any, Retriever] = weakref.WeakKeyDictionary()


def _results(r: Retriever, source: Source) -> TTLCache[SearchResult]:
    """The result cache of this search: the one shared by the views that read the same
    data state (a server's views, :class:`~clawkb.retrieve.cache.SharedResults`),
    else the retriever's own."""
    token = getattr(getattr(source, "kb", None), "view_token", None)
    if token is None:
        return r.cache
    return SHARED_RESULTS.cache(token, r.cache.size, r.cache.ttl_s)


def retriever_for(kb: KnowledgeBase) -> Retriever:
    r = _RETRIEVERS.get(kb)
    if r is None:
        r = _RETRIEVERS[kb] = Retriever(kb)
    return r


def run(
    source: Source, settings: RetrievalSettings, q: Query, second_look: bool = False
) -> SearchResult:
    """Run ``q`` on ``source`` with ``settings`` (the caller made the source current).

    ``second_look``: this is the rerun of a search whose lexical channel was decisive
    (dense skipped) but whose top passages the lexical decision found wanting: the
    dense channel runs too, and the hybrid decision says whether anything answers."""
    t0 = time.perf_counter()
    r = source.retriever
    s = settings.with_overrides({**q.options, "mode": q.mode}) if q.options or q.mode else settings
    if second_look:
        s = s.with_overrides({"early_return": 0.0})
    stages: list[dict[str, Any]] = []
    resolved = s.mode if s.mode != "auto" else ("hybrid" if source.has_vectors() else "lexical")
    warnings = []
    if resolved in ("dense", "hybrid") and not source.has_vectors():
        warnings.append(source.no_vectors(resolved))
        resolved = "lexical"
    elif resolved in ("dense", "hybrid") and r.embedder.loading():
        warnings.append("the embedding model is still loading; lexical results only")
        resolved = "lexical"
    elif resolved in ("dense", "hybrid") and (damage := source.dense_damage()) is not None:
        warnings.append(f"{damage}; lexical results only: run `clawkb doctor --repair`")
        resolved = "lexical"
    short = source.shortcut(q, s, resolved, warnings)
    if short is not None:  # e.g. Milvus hybrid_search (server-side fusion)
        return short
    key = None
    stamp = source.stamp()
    cache = _results(r, source)
    if (
        stamp is not None
        and cache.size > 0
        and resolved != "lexical"
        and q.chunk_ids is None
        and q.boost is None
        and q.group_of is None
    ):
        key = (q.text, q.limit, s.cache_key(), q.filters, q.explain, q.include_memory,
               q.snippets, stamp, source.capabilities)  # fmt: skip
        cached: SearchResult | None = cache.get(key)
        if cached is not None:
            stages.append({"stage": "cache", "ms": 0.0, "status": "hit"})
            return replace(
                cached, stages=stages, took_ms=(time.perf_counter() - t0) * 1000,
                warnings=list(cached.warnings),
            )  # fmt: skip

    st = time.perf_counter()
    rw = rewrite(q.text, r.synonyms(s), bundled_glossary() if s.glossary else None)
    stage(stages, "rewrite", st, "ok", f"{len(rw.expansions)} expansions")
    scope = source.restrict(q, stages)
    if s.translate:  # crossling: optional LLM query translation (off by default)
        st = time.perf_counter()
        rw, note = llm_translation(source.config, rw, s.budget_translate_ms)
        stage(stages, "translate", st, "ok", note)
    stats = source.term_stats(scope)
    if resolved != "dense":  # crossling: scale glossary translations to this index
        rw = balance(stats, rw, s.glossary_share, scope.allowed)
    weights = rw.weights if rw.expansions or any(w != 1.0 for w in rw.weights) else None
    merge_on = s.merge if s.merge is not None else resolved != "lexical"
    deep = bool(s.rerank) or merge_on or q.group_of is not None or resolved != "lexical"
    k = max(s.candidates, q.limit) if deep else q.limit
    ctx = RankContext(q, rw, s, resolved, stats, source, scope)
    rank_stages = [  # exact, headings, plugins: those this source can serve
        (name, rs)
        for name, rs in load_group("clawkb.rank_stages")
        if rs.needs <= source.capabilities and rs.wanted(ctx)
    ]
    for _, rs in rank_stages:  # a stage may look past the first hits (headings)
        k = max(k, getattr(rs, "depth", 0))

    channels: dict[str, fusion.Channel] = {}
    matched, dense_tr = 0, None
    prepared: dict[str, Any] = {}
    if resolved in ("lexical", "hybrid"):
        st = time.perf_counter()

        def lexical() -> tuple[fusion.Channel, int]:
            return source.lexical(rw.tokens, weights, k, scope, q.boost)

        inline = resolved == "lexical" or not source.budgeted or source.inline_lexical
        got = lexical() if inline else budget(lexical, s.budget_lexical_ms)
        if got is None:
            stage(stages, "lexical", st, "timeout", "lexical channel skipped")
        else:
            channels["lexical"], matched = got
            stage(stages, "lexical", st, "ok", f"{len(channels['lexical'].ids)} candidates")
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
        tr = None  # crossling: a cross-lingual query's dense channel also searches its translation
        if resolved == "hybrid" and s.adaptive and s.glossary:
            tr = dense_translation(stats, rw, bundled_glossary())
        texts = [q.text] if tr is None else [q.text, tr]

        source.warm_dense()

        def dense_work() -> list[fusion.Channel]:
            return source.dense(texts, k, scope)

        # the query is embedded on a stage worker (the model releases the GIL) while
        # this thread does what needs only the lexical side (prepare: adaptive weights'
        # signals, the not-found decision's question features)
        began = time.perf_counter()  # the budget counts from here, as before
        pending = start(dense_work, s.budget_dense_ms) if source.budgeted else None
        prepared = _prepare(ctx, rank_stages, channels.get("lexical"))
        found = (finish(pending, s.budget_dense_ms, began) if pending is not None
                 else dense_work())  # fmt: skip
        dense, dense_tr = pick_dense(found[0], found[-1], tr) if found else (None, None)
        if dense is None:
            stage(stages, "dense", st, "timeout", f"over {s.budget_dense_ms:.0f} ms; skipped")
        elif len(dense.ids) or not source.remote:  # remote: 0 = no vectors in scope
            channels["dense"] = dense
            matched = max(matched, len(dense.ids))
            on = f" (on the translation {dense_tr!r})" if dense_tr else ""
            stage(stages, "dense", st, "ok", f"{len(dense.ids)} candidates{on}")
        else:
            stage(stages, "dense", st, "ok", "0 candidates")

    if len(channels) > 1 and "vector_coverage" in source.capabilities:
        # not yet embedded: lexical rank (unembedded.py)
        channels["dense"] = unembedded.place(channels["lexical"], channels["dense"],
                                             source.embedded())  # fmt: skip
    st = time.perf_counter()
    on_titles, first, lead_cos = (titles.add_channel(source, texts, channels, scope, titles.query_chinese(rw) if s.title_lead else None)
                        if s.titles and resolved == "hybrid" and "dense" in channels else (None, [], None))  # fmt: skip
    fs, note = s, s.fusion if len(channels) > 1 else "single channel"
    if s.adaptive and len(channels) > 1:  # crossling hook: per-query weights (adaptive.py)
        fs, trace = adaptive.tune(stats, rw, channels, s, dense_translated=bool(dense_tr),
                                  pre=prepared.get("adaptive"))  # fmt: skip
        note += " adaptive " + " ".join(f"{k}={v}" for k, v in trace.items())
    fused = fuse(channels, fs, partial(source.recency, scope=scope))
    if first:  # a cross-language title query: its sections first (titles.lead)
        fused = titles.put_first(fused, first, lead_cos)
    note = note if on_titles is None else f"{note} titles {on_titles}"
    for name, rs in rank_stages:
        fused, trace = rs.apply(ctx, fused)
        note = note if trace is None else f"{note} {name} {trace}"
    stage(stages, "fusion", st, "ok", f"{note} (client side)" if source.remote else note)
    if q.boost is not None:
        fused = _boost(fused, q)
    if q.group_of is not None:
        fused = _best_per_group(fused, q.group_of)
    depth = max(q.limit * 3, s.rerank_depth) if deep else q.limit
    rows = source.rows([f.chunk_id for f in fused[:depth]], scope)
    lex = source.explainer() if q.explain and "lexical" in channels else None
    make = partial(hit, tokens=rw.tokens, mode=resolved, explain=q.explain, lexical=lex,
                   snippets=q.snippets, labels=_labels(q), terms=query_terms(rw.tokens))  # fmt: skip
    # a row deleted between index read and store read is skipped
    ranked = [(rows[f.chunk_id], f) for f in fused[:depth] if f.chunk_id in rows]
    if s.rerank or merge_on:  # the order may still change: hits are built when needed
        cands = [Candidate(row, f.score, make=partial(make, row, f)) for row, f in ranked]
        if s.rerank and cands:
            cands = rerank(r, q.text, cands, s, stages)
        if merge_on:
            cands = merge_adjacent(cands, s.merge_ratio)
        top = cands[: max(q.limit, notfound.DEPTH if resolved != "lexical" else 0)]
        hits = [c.final(i) for i, c in enumerate(top, 1)]
        chunk_ids = [c.row.id for c in top]
    else:  # the fused order is final: each hit is built once, at its rank
        hits = [
            make(row, f, rank=i, score=f.score) for i, (row, f) in enumerate(ranked[: q.limit], 1)
        ]
        chunk_ids = [row.id for row, _ in ranked[: q.limit]]
    if q.explain:
        notes = source.explain_notes(fs)
        for h in hits:
            if h.explanation is not None and notes:
                h.explanation.update(notes)
    if source.remote:  # the trace says which backend answered each stage
        for entry in stages:
            entry.setdefault("backend", source.name)
    conf, verdict, nearest = confidence(hits, rw.tokens, channels), None, []
    # the fitted model reads the local term statistics; Milvus keeps the cosine rule
    judged = "abstain_model" in source.capabilities
    if resolved != "lexical" and judged:  # "is anything relevant?" (notfound.py)
        by_id = {f.chunk_id: f for f in fused[:depth]}  # traces built for the judged only
        judged_ids = chunk_ids[: notfound.DEPTH]
        dense_scores = channels["dense"].scores if "dense" in channels else None
        verdict = notfound.judge(source.kb, q.text, hits,
                                  [by_id[i].trace if i in by_id else None for i in judged_ids],
                                  s.min_confidence, dense_scores, prepared.get("notfound"))  # fmt: skip
        conf = verdict.value if verdict is not None else conf
        if early and verdict is not None and verdict.abstain and s.min_confidence is None:
            # a decisive lexical top-1 whose passages fail the lexical decision: look with
            # both channels before saying "no match" (the hybrid decision, as for any query)
            again = run(source, settings, q, second_look=True)
            again.stages[:0] = [*stages, {"stage": "second_look", "ms": 0.0, "status": "ok",
                                          "note": "lexical decisive but no match: dense run"}]  # fmt: skip
            if key is not None:
                cache.put(key, replace(again, warnings=list(again.warnings)))
            return again
        if verdict is not None and verdict.abstain:
            nearest, hits, chunk_ids = hits[: q.limit], [], []
    hits, chunk_ids = hits[: q.limit], chunk_ids[: q.limit]
    # Milvus: no term statistics for the model; the cosine rule flags, hits stay
    flagged = not judged and bool(hits) and "dense" in channels and conf < remote_min_confidence(s)
    res = SearchResult(
        q.text,
        rw.tokens,
        hits,
        (time.perf_counter() - t0) * 1000,
        matched,
        warnings=warnings,
        mode=resolved,
        confidence=conf,
        abstained=bool(nearest) or flagged,
        stages=stages,
        rewrites=rw.expansions,
        chunk_ids=chunk_ids,
        nearest=nearest,
        decision=verdict,
    )
    if key is not None:
        cache.put(key, replace(res, warnings=list(res.warnings)))
    return res


# -- stages ------------------------------------------------------------------
def _prepare(
    ctx: RankContext, rank_stages: list[tuple[str, Any]], lex: fusion.Channel | None
) -> dict[str, Any]:
    """The later stages' work that needs only the query and the lexical channel, done
    while the dense channel runs: each result is handed to its stage, which computes
    the very same values itself when it is missing (a dense-only search, no overlap)."""
    out: dict[str, Any] = {}
    if ctx.mode != "hybrid":
        return out
    for name, rs in rank_stages:  # exact: the query's anchors and their passages
        if hasattr(rs, "prepare"):
            ctx.prepared[name] = rs.prepare(ctx, lex)
    if ctx.s.adaptive and lex is not None:
        out["adaptive"] = adaptive.prepare(ctx.stats, ctx.rw, lex, ctx.s)
    if "abstain_model" in ctx.source.capabilities:
        out["notfound"] = notfound.prepare(ctx.source.kb, ctx.q.text)
    return out


def _boost(fused: list[fusion.Fused], q: Query) -> list[fusion.Fused]:
    """Per-chunk multipliers after fusion (boards, memory weights), for every source."""
    assert q.boost is not None
    ids = np.fromiter((f.chunk_id for f in fused), np.int64, len(fused))
    for f, m in zip(fused, q.boost.factor_of(ids).tolist(), strict=True):
        f.trace[q.boost.label] = {"boost": m, "before": round(f.score, 6)}
        f.score *= m
    return sorted(fused, key=lambda f: -f.score)  # stable: equal scores keep their order


def _best_per_group(fused: list[fusion.Fused], group_of: Mapping[int, str]) -> list[fusion.Fused]:
    seen: set[str] = set()
    out = []
    for f in fused:
        g = group_of.get(f.chunk_id)
        if g is None or g not in seen:
            out.append(f)
            if g is not None:
                seen.add(g)
    return out


def _labels(q: Query) -> tuple[str, ...]:
    return (q.boost.label,) if q.boost is not None else ()
