"""The pipeline's stage functions: channel filtering, early return, fusion,
rerank, hit building and the result-set confidence; and the built-in rank stages
(exact, headings), registered as ``clawkb.rank_stages`` plugins like a third
party's would be.

Kept apart from :mod:`clawkb.retrieve.pipeline` (which orders the stages and
applies budgets) so each stays small; all take plain values and return new ones.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import numpy as np

from clawkb.index.lexical import LexicalIndex
from clawkb.retrieve import exact, fusion, headings
from clawkb.retrieve.hits import make_hit
from clawkb.retrieve.merge import Candidate
from clawkb.retrieve.settings import RetrievalSettings
from clawkb.store.repo import ChunkRow
from clawkb.text import tokenize
from clawkb.types import Hit

if TYPE_CHECKING:
    from clawkb.retrieve.pipeline import Retriever
    from clawkb.retrieve.query import Query
    from clawkb.retrieve.rewrite import Rewritten
    from clawkb.retrieve.source import Scope, Source, TermStats

#: A stage that overruns keeps its worker until it ends; spare workers keep the
#: next queries from queueing behind it.
_POOL = ThreadPoolExecutor(max_workers=4, thread_name_prefix="clawkb-stage")
T = TypeVar("T")


def stage(stages: list[dict[str, Any]], name: str, started: float, status: str, note: str) -> None:
    stages.append(
        {
            "stage": name,
            "ms": round((time.perf_counter() - started) * 1000, 3),
            "status": status,
            "note": note,
        }
    )


def budget(fn: Callable[[], T], budget_ms: float) -> T | None:
    """Run ``fn`` with a time budget; None when it did not finish in time."""
    return finish(_POOL.submit(fn), budget_ms)


def start(fn: Callable[[], T], budget_ms: float) -> Future[T]:
    """Start ``fn`` on a stage worker; :func:`finish` waits for it under a budget.

    The caller blocks until the worker is running ``fn`` (it has the GIL then), so
    the work the caller does meanwhile cannot delay its start by a switch interval;
    at most ``budget_ms`` (every worker may be held by stages that overran)."""
    running = threading.Event()

    def run() -> T:
        running.set()
        return fn()

    fut = _POOL.submit(run)
    running.wait(budget_ms / 1000.0)
    return fut


def finish(fut: Future[T], budget_ms: float, started: float | None = None) -> T | None:
    """``fut``'s result, waiting at most what is left of ``budget_ms`` since ``started``
    (default: now); None when it did not finish in time. An error ``fn`` raised is
    raised here, as :func:`budget` raises it."""
    left = budget_ms / 1000.0
    if started is not None:
        left -= time.perf_counter() - started
    try:
        return fut.result(timeout=max(0.0, left))
    except FutureTimeout:
        return None


def decisive(lex: fusion.Channel | None, margin: float) -> bool:
    """Lexical is decisive when its top-1 beats the runner-up by ``margin`` (relative)."""
    if margin <= 0 or lex is None or len(lex.scores) == 0:
        return False
    top = float(lex.scores[0])
    second = float(lex.scores[1]) if len(lex.scores) > 1 else 0.0
    return top > 0 and (top - second) / top >= margin


def fuse(
    channels: dict[str, fusion.Channel],
    s: RetrievalSettings,
    recency: Callable[[list[int], float], dict[int, float]],
) -> list[fusion.Fused]:
    """Fuse the channels; ``recency(ids, half_life_days)`` scores ages (linear fusion)."""
    weights = {"lexical": s.w_lexical, "dense": s.w_dense}
    if not channels:
        return []
    if len(channels) == 1 and not (s.fusion == "linear" and s.w_recency):
        ((name, ch),) = channels.items()
        return fusion.single(name, ch)
    if s.fusion == "rrf":
        return fusion.rrf(channels, weights, s.rrf_k)
    scores = None
    if s.w_recency:
        ids = sorted({int(i) for ch in channels.values() for i in ch.ids})
        scores = recency(ids, s.half_life_days)
    return fusion.linear(channels, weights, s.norm, scores, s.w_recency)


def rerank(
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
    scores = budget(lambda: reranker.score(query, [c.row.text for c in head]), s.budget_rerank_ms)
    if scores is None:
        stage(
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
    stage(stages, "rerank", st, "ok", f"{reranker.name}: {len(head)} re-scored, {dropped} dropped")
    return out + [Candidate(c.row, min(-1e9, c.score), c.hit_, c.make) for c in tail]


def hit(
    row: ChunkRow,
    f: fusion.Fused,
    *,
    tokens: list[str],
    mode: str,
    explain: bool,
    lexical: LexicalIndex | None,
    snippets: bool,
    labels: tuple[str, ...],
    rank: int = 0,
    score: float | None = None,
    terms: tuple[str, ...] | None = None,
) -> Hit:
    """The hit for a fused candidate; with ``explain``, its per-channel trace.

    ``labels`` are the boosts applied after fusion (``board``, ``memory``):
    their trace is shown beside the channels, not among them.
    """
    exp = None
    if explain:
        channels = {k: v for k, v in f.trace.items() if k not in labels}
        exp = {"mode": mode, "channels": channels, "final": round(f.score, 6)}
        exp.update({k: f.trace[k] for k in labels if k in f.trace})
        if lexical is not None and "lexical" in channels:
            exp["lexical"] = lexical.explain(tokens, row.id)
    return make_hit(
        row, rank, f.score if score is None else score, tokens, exp, snippet=snippets, terms=terms
    )


# -- confidence ---------------------------------------------------------------
#: Top-1 cosine of e5-small mapped to confidence 0 and 1. Its cosines are
#: compressed: on the shared sets relevant top hits sit at 0.88-0.93 and
#: queries from another collection mostly below 0.85
#: (bench/results/search-abstain.json; calibrated in hybrid mode).
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


# -- stages over the fused list (clawkb.rank_stages plugins) ----------------------
@dataclass(frozen=True)
class RankContext:
    """What a rank stage may read: the query, its rewrite, the settings, the resolved
    mode, the index-wide term statistics and the source with this query's scope."""

    q: Query
    rw: Rewritten
    s: RetrievalSettings
    mode: str
    stats: TermStats
    source: Source
    scope: Scope
    #: per stage name, what its optional ``prepare(ctx, lexical)`` returned: the work
    #: that needs only the query and the lexical channel, done while the dense
    #: channel runs (the stage computes it itself when it is missing)
    prepared: dict[str, Any] = field(default_factory=dict, compare=False)


class RankStage(Protocol):
    """A ``clawkb.rank_stages`` plugin: reorders the fused candidates after fusion and
    before boosts. ``needs`` names the :attr:`Source.capabilities` it requires; on a
    source without one of them the stage stands aside. ``apply`` returns the new list
    and a trace for ``--explain`` (None: nothing changed)."""

    order: int
    needs: frozenset[str]
    #: optional ``depth``: the channels fetch at least that many candidates
    #: optional ``prepare(ctx, lexical_channel)``: work needing only the query and the
    #: lexical channel, run while the dense channel runs; found in ``ctx.prepared``

    def wanted(self, ctx: RankContext) -> bool: ...

    def apply(
        self, ctx: RankContext, fused: list[fusion.Fused]
    ) -> tuple[list[fusion.Fused], Any]: ...


class ExactStage:
    """Passages with the query's rare identifiers stay on top (:mod:`exact`)."""

    order = 10
    needs = frozenset({"restricted_lexical"})

    @staticmethod
    def wanted(ctx: RankContext) -> bool:
        return ctx.s.exact

    @staticmethod
    def prepare(ctx: RankContext, lexical: fusion.Channel | None) -> exact.Spelled | None:
        if not exact.restricted(ctx.stats):
            return None
        return exact.prepare(ctx.stats, ctx.q.text, ctx.scope.allowed, _rows(ctx))

    @staticmethod
    def apply(ctx: RankContext, fused: list[fusion.Fused]) -> tuple[list[fusion.Fused], Any]:
        return exact.keep_on_top(
            ctx.stats,
            ctx.q.text,
            fused,
            ctx.scope.allowed,
            ctx.scope.hidden,
            rows=_rows(ctx),
            prepared=ctx.prepared.get("exact"),
        )


def _rows(ctx: RankContext) -> Callable[[list[int]], dict[int, ChunkRow]]:
    return lambda ids: ctx.source.rows(ids, ctx.scope)


class HeadingsStage:
    """A query that is a section title lifts that section (:mod:`headings`)."""

    order = 20
    needs = frozenset({"restricted_lexical"})
    #: the lexical channel fetches at least this many candidates
    depth = headings.DEPTH

    @staticmethod
    def wanted(ctx: RankContext) -> bool:
        return ctx.s.headings and ctx.mode != "dense"

    @staticmethod
    def apply(ctx: RankContext, fused: list[fusion.Fused]) -> tuple[list[fusion.Fused], Any]:
        rw = ctx.rw
        glossed = rw.tokens[len(rw.tokens) - rw.n_glossary :] if rw.n_glossary else []
        # the query's own tokens the translations stand for
        covered = {
            t
            for e in rw.expansions
            if e.get("source") == "glossary"
            for t in tokenize(str(e.get("from", "")))
        }
        return headings.lift(
            ctx.stats,
            ctx.q.text,
            glossed,
            fused,
            lambda ids: ctx.source.rows(ids, ctx.scope),
            ctx.s.headings_floor,
            covered,
        )
