"""Where the one pipeline (:mod:`clawkb.retrieve.pipeline`) gets its candidates.

A :class:`Source` answers the channel questions — lexical top-k, dense top-k,
index-wide term statistics, stored rows, restriction of candidates — and the
pipeline does everything else the same way for every source: rewrite,
translate, balance, early return, adaptive weights, fusion, boosts, rerank,
section merge, hits and confidence.

:class:`LocalSource` reads the KB's own store, BM25F segments and vectors.
:class:`clawkb.backends.milvus_source.MilvusSource` asks a Milvus collection;
a remote-only KB (no local store) has only that source.
"""

from __future__ import annotations

import time
import weakref
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from clawkb.retrieve import fusion
from clawkb.retrieve.filters import allowed_ids
from clawkb.retrieve.stages import stage
from clawkb.store.hit_rows import hit_rows

if TYPE_CHECKING:
    from clawkb.config import Config
    from clawkb.index.lexical import LexicalIndex
    from clawkb.kb import KnowledgeBase
    from clawkb.retrieve.pipeline import Retriever
    from clawkb.retrieve.query import ChunkBoost, Query
    from clawkb.retrieve.result import SearchResult
    from clawkb.retrieve.settings import RetrievalSettings
    from clawkb.store.repo import ChunkRow

#: Per-token query weights (None: every token weighs 1).
Weights = list[float] | None

#: Agent memories (:mod:`clawkb.memory`) are stored as documents under this
#: path prefix; search leaves them out unless ``include_memory`` is set.
MEMORY_PREFIX = "memory://"


class TermCounts(Protocol):
    """Index-wide document frequencies (a remote-only KB has uniform ones)."""

    @property
    def n_docs(self) -> int: ...

    def doc_freqs(self, hashes: np.ndarray) -> np.ndarray: ...

    def idf(self, df: np.ndarray) -> np.ndarray: ...


class TermStats(TermCounts, Protocol):
    """What the query stages read from the lexical side (glossary balance, adaptive
    weights, crossling): document frequencies and best-passage scores."""

    def search(
        self, terms: Sequence[str], k: int = 10, *, term_weights: Sequence[float] | None = None
    ) -> tuple[np.ndarray, np.ndarray, int]:
        """Best-passage ids and scores (adaptive weights read the top-1)."""
        ...


class RestrictedStats(TermStats, Protocol):
    """Term statistics that can also search within given chunk ids (the local index:
    the ``restricted_lexical`` capability; :func:`clawkb.retrieve.exact.restricted`)."""

    def search(
        self,
        terms: Sequence[str],
        k: int = 10,
        *,
        term_weights: Sequence[float] | None = None,
        allowed: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray, int]: ...


@dataclass
class Scope:
    """What one query may see: allowed chunk ids (None = all) and the memory chunks
    to drop from channels. A source keeps its own per-query state in a subclass."""

    allowed: np.ndarray | None = None
    hidden: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    #: rows this query has read (the rank stages read the first candidates, the hits
    #: read them again): a chunk is read from the store once per query
    read: dict[int, ChunkRow] = field(default_factory=dict, repr=False, compare=False)


#: What a source can do beyond the channels; a stage that needs one a source lacks
#: stands aside (:class:`clawkb.retrieve.stages.RankStage` ``needs``).
CAPABILITIES = {
    "restricted_lexical": "lexical lookups within given chunk ids, with index-wide"
    " statistics (the exact and headings stages)",
    "vector_coverage": "which chunks have vectors (:meth:`Source.embedded`: chunks not yet"
    " embedded keep their lexical rank in the dense channel)",
    "abstain_model": "local term statistics for the fitted not-found model (else the"
    " cosine rule of remote_min_confidence)",
    "titles": "section titles embedded beside the KB's vectors, matched with the query's"
    " vectors (the title channel, :mod:`clawkb.retrieve.titles`)",
}


class Source(ABC):
    """The channel side of a search (see the module docstring). A source answers the
    abstract methods; the lexical channel with its exact board boost is written once,
    here (:meth:`lexical`)."""

    #: ``local`` or the backend's name (shown in ``--explain``)
    name: str
    #: run the lexical and dense channels under the settings' time budgets
    budgeted: bool
    #: a budgeted source whose lexical channel still runs on the caller's thread (the
    #: local index answers in milliseconds at any measured size: a hand-off to the
    #: stage pool cost more than it could save; ``budget_lexical_ms`` then does not apply)
    inline_lexical: bool = False
    #: a remote service answers the channels: the trace names it per stage, fusion is
    #: "client side", and an empty dense answer (no vectors in scope) is left out
    remote: bool
    #: the :data:`CAPABILITIES` this source has
    capabilities: frozenset[str]
    config: Config
    retriever: Retriever

    #: the KB searched, held weakly: the KB keeps its source (``kb.source``), and a
    #: strong reference back made every KB a reference cycle, freed only by a full
    #: garbage collection. A server makes a new KB per reader view and write; each
    #: old one (its retriever, result cache, dense matrix, memos) then waited for
    #: that collection, and the heap grew between collections
    _kb: weakref.ref[KnowledgeBase]

    def _hold(self, kb: KnowledgeBase) -> None:
        self._kb = weakref.ref(kb)

    @property
    def kb(self) -> KnowledgeBase:
        kb = self._kb()
        if kb is None:
            raise RuntimeError("the knowledge base of this source was closed and released")
        return kb

    @abstractmethod
    def has_vectors(self) -> bool: ...

    @abstractmethod
    def no_vectors(self, mode: str) -> str:
        """The warning when ``mode`` needs vectors this source does not have."""
        ...

    @abstractmethod
    def dense_damage(self) -> str | None:
        """Why the dense channel cannot be searched (a damaged vector file), or None."""
        ...

    @abstractmethod
    def term_stats(self, scope: Scope) -> TermStats: ...

    @abstractmethod
    def stamp(self) -> tuple[int, int] | None:
        """Changes when the data changes (result cache key); None: do not cache."""
        ...

    @abstractmethod
    def shortcut(
        self, q: Query, s: RetrievalSettings, mode: str, warnings: list[str]
    ) -> SearchResult | None:
        """A whole result computed by the source itself (server-side fusion), or None."""
        ...

    @abstractmethod
    def restrict(self, q: Query, stages: list[dict[str, Any]]) -> Scope: ...

    def lexical(
        self,
        tokens: list[str],
        weights: list[float] | None,
        k: int,
        scope: Scope,
        boost: ChunkBoost | None,
    ) -> tuple[fusion.Channel, int]:
        """Top-``k`` lexical channel and the number of matching chunks; with a boost,
        the boosted chunks' own top-``k`` joins it (exact boost)."""
        ch, matched = self.lexical_top(tokens, weights, k, scope)
        if boost is not None and len(boost.ids) and float(boost.factors.max()) > 1.0:
            more = self.lexical_among(tokens, weights, k, scope, boost.ids)
            if more is not None:
                ch = join(ch, more)
        return ch, matched

    @abstractmethod
    def lexical_top(
        self, tokens: list[str], weights: Weights, k: int, scope: Scope
    ) -> tuple[fusion.Channel, int]:
        """Top-``k`` lexical channel in ``scope`` and the number of matching chunks."""
        ...

    @abstractmethod
    def lexical_among(
        self, tokens: list[str], weights: Weights, k: int, scope: Scope, ids: np.ndarray
    ) -> fusion.Channel | None:
        """Top-``k`` lexical channel among ``ids`` in ``scope`` (None: nothing to add)."""
        ...

    @abstractmethod
    def warm_dense(self) -> None:
        """Load what the dense channel needs (start-up cost, outside the time budget)."""
        ...

    @abstractmethod
    def dense(self, texts: list[str], k: int, scope: Scope) -> list[fusion.Channel]:
        """One dense channel per text (a query and its translation)."""
        ...

    @abstractmethod
    def recency(self, ids: list[int], half_life_days: float, scope: Scope) -> dict[int, float]:
        """Recency scores of ``ids`` (linear fusion's ``w_recency``)."""
        ...

    @abstractmethod
    def rows(self, ids: list[int], scope: Scope) -> dict[int, ChunkRow]: ...

    @abstractmethod
    def embedded(self) -> Callable[[np.ndarray], np.ndarray]:
        """``has(ids) -> bool mask``: which chunks have vectors (``vector_coverage``)."""
        ...

    @abstractmethod
    def explainer(self) -> LexicalIndex | None:
        """The lexical index that explains a hit's BM25F score, if any."""
        ...

    @abstractmethod
    def explain_notes(self, s: RetrievalSettings) -> dict[str, Any]:
        """Extra fields of every hit's explanation."""
        ...


def drop(ids: np.ndarray, scores: np.ndarray, hidden: np.ndarray, k: int) -> fusion.Channel:
    """The first ``k`` of a channel without the ``hidden`` ids."""
    if len(hidden):
        keep = ~np.isin(ids, hidden)
        ids, scores = ids[keep], scores[keep]
    return fusion.Channel(ids[:k], scores[:k])


class LocalSource(Source):
    """The KB's own store, lexical segments and dense vectors."""

    name = "local"
    budgeted = True
    inline_lexical = True
    remote = False
    capabilities = frozenset(CAPABILITIES)

    def __init__(self, kb: KnowledgeBase) -> None:
        from clawkb.retrieve.pipeline import retriever_for

        self._hold(kb)
        self.config = kb.config
        self.retriever = retriever_for(kb)

    def has_vectors(self) -> bool:
        return self.retriever.has_vectors()

    def no_vectors(self, mode: str) -> str:
        return f"mode {mode}: no vectors yet; run `clawkb embed` (lexical results only)"

    def dense_damage(self) -> str | None:
        return self.retriever.dense_damage()

    def term_stats(self, scope: Scope) -> LexicalIndex:
        return self.kb.lexical

    def stamp(self) -> tuple[int, int] | None:
        return self.retriever.stamp()

    def shortcut(
        self, q: Query, s: RetrievalSettings, mode: str, warnings: list[str]
    ) -> SearchResult | None:
        return None

    def restrict(self, q: Query, stages: list[dict[str, Any]]) -> Scope:
        """Allowed ids from the filters and ``chunk_ids``; memories hidden.

        With an allowed set the memories are removed from it; otherwise the
        channels fetch that many more candidates and drop them, so a KB without
        memories pays one indexed lookup.
        """
        kb = self.kb
        allowed = None
        if q.filters.active:
            st = time.perf_counter()
            allowed = allowed_ids(kb.repo, q.filters)
            stage(stages, "filters", st, "ok", f"{len(allowed)} chunks allowed")
        if q.chunk_ids is not None:
            ids = np.unique(np.asarray(q.chunk_ids, np.int64))
            allowed = ids if allowed is None else np.intersect1d(allowed, ids)
        hidden = np.empty(0, np.int64)
        if not q.include_memory:
            hidden = kb.memo.get("memory_chunk_ids", self._memory_ids)
        if allowed is not None and len(hidden):
            allowed, hidden = np.setdiff1d(allowed, hidden), np.empty(0, np.int64)
        return Scope(allowed, hidden)

    def _memory_ids(self) -> np.ndarray:
        ids = np.asarray(self.kb.repo.chunk_ids_under_path(MEMORY_PREFIX), np.int64)
        ids.flags.writeable = False  # shared by every search until the store changes
        return ids

    def lexical_top(
        self, tokens: list[str], weights: Weights, k: int, scope: Scope
    ) -> tuple[fusion.Channel, int]:
        hidden = scope.hidden
        ids, scores, matched = self.kb.lexical.search(
            tokens, k=k + len(hidden), allowed=scope.allowed, term_weights=weights
        )
        if matched >= 0 and len(hidden):
            matched -= int(np.isin(ids, hidden).sum())
        return drop(ids, scores, hidden, k), matched

    def lexical_among(
        self, tokens: list[str], weights: Weights, k: int, scope: Scope, ids: np.ndarray
    ) -> fusion.Channel | None:
        allowed, hidden = scope.allowed, scope.hidden
        within = ids if allowed is None else np.intersect1d(ids, allowed)
        if allowed is not None and len(within) >= len(allowed):
            return None  # every allowed chunk is boosted: the top-k has them already
        if len(hidden):
            within = np.setdiff1d(within, hidden)
        more_ids, more_scores, _ = self.kb.lexical.search(
            tokens, k=k, allowed=within, term_weights=weights
        )
        return fusion.Channel(more_ids, more_scores)

    def warm_dense(self) -> None:
        self.retriever.dense_index().warm()  # vectors, graph and model: not query time
        self.retriever.embedder.warm()

    def dense(self, texts: list[str], k: int, scope: Scope) -> list[fusion.Channel]:
        r = self.retriever
        index = r.dense_index()
        key = (index.mkey, *texts)
        qv = r.qvec_cache.get(key)
        if qv is None:
            qv = r.embedder.embed_queries(texts)
            r.qvec_cache.put(key, qv)
        found = index.search_many(qv, k + len(scope.hidden), scope.allowed)
        return [
            drop(np.asarray(ids, np.int64), np.asarray(scores), scope.hidden, k)
            for ids, scores in found
        ]

    def recency(self, ids: list[int], half_life_days: float, scope: Scope) -> dict[int, float]:
        now = time.time()
        return {
            cid: fusion.recency_score(mtime_s, now, half_life_days)
            for cid, mtime_s in self.kb.repo.chunk_mtimes(ids).items()
        }

    def rows(self, ids: list[int], scope: Scope) -> dict[int, ChunkRow]:
        read = scope.read
        need = [i for i in ids if i not in read]
        if need:
            read.update(hit_rows(self.kb.repo, self.kb.memo, need))
        return {i: read[i] for i in ids if i in read}

    def embedded(self) -> Callable[[np.ndarray], np.ndarray]:
        return self.retriever.dense_index().has

    def explainer(self) -> LexicalIndex | None:
        return self.kb.lexical

    def explain_notes(self, s: RetrievalSettings) -> dict[str, Any]:
        return {}


def join(ch: fusion.Channel, more: fusion.Channel) -> fusion.Channel:
    """``ch`` plus the ids of ``more`` it lacks, best first (ties keep their order)."""
    new = ~np.isin(more.ids, ch.ids)
    all_ids = np.concatenate([ch.ids, more.ids[new]])
    all_scores = np.concatenate([ch.scores, more.scores[new]])
    order = np.argsort(-all_scores, kind="stable")
    return fusion.Channel(all_ids[order], all_scores[order])
