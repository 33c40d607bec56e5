"""Search with the knowledge stages: domain routing or filter, trust tiers, graph channel.

:func:`knowledge_search` wraps one ranked search (the pipeline): it asks for
a deeper candidate list, routes the query to its domain(s) when domains are
configured and none was named, applies :func:`clawkb.knowledge.stages.refine`
and cuts to ``limit``. It runs when a query names a knowledge option or the
KB configures ``sources:`` or ``domains:``; other KBs search exactly as before.
:func:`run_query` wraps the pipeline (``KnowledgeBase.run_prepared``), so
search, ask, context and memory recall all get the same stages.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from clawkb.errors import ConfigError
from clawkb.knowledge import TIERS
from clawkb.knowledge.stages import KnowledgeWeights, refine
from clawkb.store import links_repo

if TYPE_CHECKING:
    from clawkb.kb import KnowledgeBase
    from clawkb.knowledge.rewrite import LLMRewriter
    from clawkb.retrieve.query import Query
    from clawkb.retrieve.result import SearchResult
    from clawkb.types import Hit

DEPTH = 30


@dataclass(frozen=True)
class KnowledgeOptions:
    min_trust: str | None = None
    domains: tuple[str, ...] = ()
    route: bool | None = None  # None: route when domains are configured and none is named
    strict: bool | None = None  # None: knowledge.strict_priority
    graph: bool | None = None  # None: on when knowledge.graph_weight > 0
    aliases: bool = False  # add pins/aliases from the datasheet tables as a query variant
    rewriter: LLMRewriter | None = None  # None: the KB's (knowledge.rewrite + llm:)
    off: bool = False  # the inner search of knowledge_search itself

    def __post_init__(self) -> None:
        if self.min_trust is not None and self.min_trust not in TIERS:
            raise ConfigError(
                f"unknown trust tier {self.min_trust!r} (expected one of {', '.join(TIERS)})"
            )

    @property
    def asked(self) -> bool:
        return bool(
            self.min_trust
            or self.domains
            or self.route
            or self.strict
            or self.graph
            or self.aliases
            or self.rewriter
        )


OFF = KnowledgeOptions(off=True)


def wanted(kb: KnowledgeBase, opts: KnowledgeOptions | None) -> bool:
    if opts is not None and opts.off:
        return False
    k = kb.config
    return bool((opts and opts.asked) or k.sources or k.domains or k.knowledge.rewrite)


def run_query(
    kb: KnowledgeBase, q: Query, run: Callable[[KnowledgeBase, Query], SearchResult]
) -> SearchResult:
    """``q`` through ``run`` (the pipeline) with the knowledge stages around it. A query
    restricted to chunk ids (datasheets, memories, board-only) keeps that restriction
    for the passages the graph reaches; ``chunk_ids`` stays aligned with the hits."""
    ids: dict[str, int] = {}

    def inner(text: str, depth: int, channel: str | None, fusion: dict[str, float]) -> SearchResult:
        sub = dataclasses.replace(
            q, text=text, limit=depth, mode=channel or q.mode, knowledge=OFF,
            options=MappingProxyType({**fusion, **q.options}),
        )  # fmt: skip
        res = run(kb, sub)
        ids.update((h.anchor.id, c) for h, c in zip(res.hits, res.chunk_ids, strict=False))
        return res

    def chunk_id(h: Hit) -> int | None:
        if h.anchor.id not in ids:  # a passage the graph reached
            got = links_repo.chunk_ids_of_anchors(kb.conn, [h.anchor.id])
            ids[h.anchor.id] = got.get(h.anchor.id, -1)
        return ids[h.anchor.id]

    allowed = None if q.chunk_ids is None else {int(c) for c in q.chunk_ids}

    def keep(h: Hit) -> bool:
        return allowed is None or chunk_id(h) in allowed

    res = knowledge_search(kb, q.text, q.limit, q.knowledge, inner, q.explain, keep)
    res.chunk_ids = [int(chunk_id(h) or -1) for h in res.hits]
    return res


def knowledge_search(
    kb: KnowledgeBase,
    query: str,
    limit: int,
    opts: KnowledgeOptions | None,
    run: Callable[[str, int, str | None, dict[str, float]], SearchResult],
    explain: bool = False,
    keep: Callable[[Hit], bool] | None = None,
) -> SearchResult:
    """``run(query, depth, mode)`` returns a search result; its hits (fused with those of
    the query's rewrites, if any) are refined and cut to ``limit``."""
    opts = opts or KnowledgeOptions()
    weights = KnowledgeWeights.of(kb)
    if opts.strict is not None:
        weights = dataclasses.replace(weights, strict=opts.strict)
    if opts.graph is not None:
        weights = dataclasses.replace(weights, graph=weights.graph if opts.graph else 0.0)
    unknown = [d for d in opts.domains if kb.config.domains and d not in kb.config.domains]
    domains = tuple(opts.domains)
    route = None
    if not domains and (opts.route or (opts.route is None and kb.config.domains)):
        from clawkb.knowledge.router import route_kb

        route = route_kb(kb, query)
        domains = route.domains
    depth = max(DEPTH, limit * 3)
    fusion: dict[str, float] = {}
    tuned = kb.config.knowledge.domain_weights.get(domains[0]) if len(domains) == 1 else None
    if tuned is not None:  # per-domain weights fitted by `clawkb tune`
        fusion = {"w_lexical": tuned.w_lexical, "w_dense": tuned.w_dense}
        if tuned.graph_weight is not None and opts.graph is not False:
            weights = dataclasses.replace(weights, graph=tuned.graph_weight)
    res = run(query, depth, None, fusion)
    if route is not None and route.domains and res.hits:
        from clawkb.knowledge.router import confirm

        route = confirm(route, res.hits[0].domain)
        domains = route.domains
    variants, notes = _variants(kb, query, opts)
    if variants:
        lists = [res.hits] + [run(q, depth, mode, fusion).hits for q, mode in variants]
        from clawkb.retrieve.settings import from_config

        res = dataclasses.replace(res, hits=_rrf(lists, from_config(kb.config).rrf_k))
    hits = refine(
        kb,
        query,
        res.hits,
        weights,
        domains=domains,
        min_trust=opts.min_trust,
        explain=explain,
        unassigned=route is not None,  # routing keeps notes of no domain; --domain does not
    )
    if route is not None and domains and not hits:  # the routed domains had nothing
        hits = refine(kb, query, res.hits, weights, min_trust=opts.min_trust, explain=explain)
        route = dataclasses.replace(route, domains=(), reason=route.reason + "; no hit: all")
    if keep is not None:
        hits = [h for h in hits if keep(h)]
    if explain and route is not None:
        info = route.to_dict()
        hits = [
            dataclasses.replace(h, explanation={**(h.explanation or {}), "route": info})
            for h in hits
        ]
    res = dataclasses.replace(res, hits=hits[:limit])
    if res.matched >= 0:  # passages the graph added matched no term
        res.matched = max(res.matched, len(res.hits))
    if unknown:
        res.warnings.append(f"unknown domain(s) {', '.join(unknown)} (see domains: in config)")
    if route is not None or domains or notes:
        note = f"domains {', '.join(domains) or 'all'}" + (f" ({route.reason})" if route else "")
        note = "; ".join([note, *notes])
        res.stages.append({"stage": "knowledge", "ms": 0.0, "status": "ok", "note": note})
    res.warnings.extend(n for n in notes if "budget" in n or "model failed" in n)
    return res


VARIANT_WEIGHT = 0.5  # a rewrite counts half as much as the query the user typed


def _variants(
    kb: KnowledgeBase, query: str, opts: KnowledgeOptions
) -> tuple[list[tuple[str, str | None]], list[str]]:
    """(query, mode) searches to fuse with the original, and notes for --explain."""
    out: list[tuple[str, str | None]] = []
    notes: list[str] = []
    if opts.aliases:
        from clawkb.knowledge.rewrite import alias_terms

        terms = alias_terms(kb.conn, query)
        if terms:
            out.append((f"{query} {' '.join(terms)}", None))
            notes.append(f"aliases +{', '.join(terms)}")
    rewriter = opts.rewriter
    if rewriter is None:
        from clawkb.knowledge.rewrite import rewriter_for

        rewriter = rewriter_for(kb)
    if rewriter is not None:
        rw = rewriter.rewrite(query)
        out.extend((v, None) for v in rw.variants)
        if rw.hyde:
            from clawkb.embed import vectors

            if vectors.stored_signature(kb.conn) is not None:
                out.append((rw.hyde, "dense"))  # HyDE: the pseudo-passage, dense channel
        notes.append(
            rw.note
            or f"rewrite: {len(rw.variants)} variants{', HyDE' if rw.hyde else ''}"
            + (" (cached)" if rw.cached else f" ({rw.took_ms:.0f} ms)")
        )
    return out, notes


def _rrf(lists: list[list[Any]], k: int) -> list[Any]:
    """Reciprocal-rank fusion of hit lists (the first is the user's query), with the
    pipeline's constant ``k`` (``retrieval.rrf_k``)."""
    score: dict[str, float] = {}
    first: dict[str, Any] = {}
    for n, hits in enumerate(lists):
        w = 1.0 if n == 0 else VARIANT_WEIGHT
        for rank, h in enumerate(hits, start=1):
            key = h.anchor.id
            score[key] = score.get(key, 0.0) + w / (k + rank)
            first.setdefault(key, h)
    order = sorted(score, key=lambda k: -score[k])
    return [dataclasses.replace(first[k], rank=i, score=score[k]) for i, k in enumerate(order, 1)]
