"""A Milvus collection as a :class:`clawkb.retrieve.source.Source`.

Milvus answers each channel — BM25 over the surrogate words, cosine over the
dense vectors — and the one pipeline (:mod:`clawkb.retrieve.pipeline`) does
the rest exactly as for local search: rewrite, glossary balance, early
return, adaptive weights, fusion, boosts, rerank, section merge, hits,
confidence. With ``fuse: server`` the source answers the whole search with
Milvus ``hybrid_search`` instead (:meth:`MilvusSource.shortcut`).

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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from clawkb.backends.milvus_filters import compile_filters
from clawkb.backends.milvus_schema import check_properties, open_collection
from clawkb.backends.milvus_search import _channel, entity_row, search
from clawkb.backends.settings import MilvusSettings
from clawkb.backends.surrogate import encode
from clawkb.retrieve import fusion
from clawkb.retrieve.settings import remote_min_confidence
from clawkb.retrieve.source import Scope, Source, TermCounts, TermStats, Weights
from clawkb.store.repo import ChunkRow
from clawkb.text import tokenize

if TYPE_CHECKING:
    from clawkb.kb import KnowledgeBase
    from clawkb.retrieve.query import Query
    from clawkb.retrieve.result import SearchResult
    from clawkb.retrieve.settings import RetrievalSettings

#: Copies of a query word per unit of weight (weights are rounded to 1/WEIGHT_STEPS).
WEIGHT_STEPS = 4

_props: dict[str, dict[str, str]] = {}


def collection_props(s: MilvusSettings) -> dict[str, str]:
    """The collection's properties (opened and loaded once per process)."""
    if s.key not in _props:
        _props[s.key] = open_collection(s)
    return _props[s.key]


def forget(s: MilvusSettings) -> None:
    _props.pop(s.key, None)


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

    def __init__(self, s: MilvusSettings, stats: TermCounts, expr: str) -> None:
        self.s, self.stats, self.expr = s, stats, expr
        self.seen: dict[str, list[dict[str, Any]]] = {}  # query text -> rows, best first
        self.seen_k: dict[str, int] = {}  # the k each was asked with

    def lexical(
        self, tokens: list[str], weights: list[float] | None, k: int
    ) -> list[dict[str, Any]]:
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
        self, terms: Sequence[str], k: int = 10, *, term_weights: Sequence[float] | None = None
    ) -> tuple[np.ndarray, np.ndarray, int]:
        weights = None if term_weights is None else [float(w) for w in term_weights]
        rows = self.lexical(list(terms), weights, k)
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


def doc_row(e: dict[str, Any]) -> ChunkRow:
    """The store-shaped row, with a document id from (source, path) for section merge."""
    doc = zlib.crc32(f"{e.get('source', '')}\0{e['path']}".encode()) & 0x7FFFFFFF
    return dataclasses.replace(entity_row(e), doc_id=doc)


@dataclass
class MilvusScope(Scope):
    """One query on Milvus: its filter expression, the rows seen and term statistics."""

    expr: str = ""
    ids: _Ids = field(default_factory=_Ids)
    stats: MilvusTermStats | None = None


def _ids_expr(ids: np.ndarray) -> str:
    return "chunk_id in [" + ", ".join(str(int(i)) for i in ids) + "]"


def _and(*parts: str) -> str:
    parts = tuple(p for p in parts if p)
    return parts[0] if len(parts) == 1 else " and ".join(f"({p})" for p in parts)


class MilvusSource(Source):
    """Channels from a Milvus collection (see the module docstring).

    ``namespace``, ``boards`` (board-only: those boards + generic datasheets) and
    ``datasheets_only`` narrow the collection like the local filters do.
    """

    name = "milvus"
    budgeted = False  # remote calls carry their own timeouts
    remote = True
    #: Milvus BM25 cannot search within given ids with index-wide statistics (exact and
    #: headings stand aside), does not say which chunks lack vectors, and keeps no term
    #: statistics for the fitted not-found model
    capabilities: frozenset[str] = frozenset()

    def __init__(
        self,
        kb: KnowledgeBase,
        settings: MilvusSettings,
        *,
        namespace: str | None = None,
        boards: tuple[str, ...] = (),
        datasheets_only: bool = False,
    ) -> None:
        from clawkb.retrieve.pipeline import retriever_for

        self._hold(kb)  # weakly (Source._kb)
        self.settings = settings
        self.config = kb.config
        self.retriever = retriever_for(kb)
        self.namespace, self.boards, self.datasheets_only = namespace, boards, datasheets_only
        self._model_checked = False

    def narrowed(
        self,
        *,
        namespace: str | None = None,
        boards: tuple[str, ...] = (),
        datasheets_only: bool = False,
    ) -> MilvusSource:
        """This collection with Milvus-side narrowing (namespace, board-only, datasheets)."""
        return MilvusSource(
            self.kb, self.settings, namespace=namespace, boards=boards,
            datasheets_only=datasheets_only,
        )  # fmt: skip

    # -- what the pipeline asks ----------------------------------------------
    def has_vectors(self) -> bool:
        return collection_props(self.settings).get("clawkb.dim", "0") != "0"

    def no_vectors(self, mode: str) -> str:
        return f"mode {mode}: the collection has no vectors (lexical results only)"

    def dense_damage(self) -> str | None:
        return None  # the vectors live in the collection

    def term_stats(self, scope: Scope) -> TermStats:
        assert isinstance(scope, MilvusScope) and scope.stats is not None
        return scope.stats

    def stamp(self) -> tuple[int, int] | None:
        return None  # the collection changes without the local store knowing

    def expr(self, q: Query) -> str:
        base = compile_filters(
            q.filters,
            include_memory=q.include_memory,
            namespace=self.namespace,
            boards=self.boards,
            datasheets_only=self.datasheets_only,
        )
        if q.chunk_ids is None:
            return base
        return _and(base, _ids_expr(np.unique(np.asarray(q.chunk_ids, np.int64))))

    def restrict(self, q: Query, stages: list[dict[str, Any]]) -> Scope:
        collection_props(self.settings)  # opened and loaded once per process
        expr = self.expr(q)
        return MilvusScope(expr=expr, stats=MilvusTermStats(self.settings, self.kb.lexical, expr))

    def shortcut(
        self, q: Query, s: RetrievalSettings, mode: str, warnings: list[str]
    ) -> SearchResult | None:
        """``fuse: server``: the whole search is one Milvus call (``hybrid_search``)."""
        if self.settings.fuse != "server" or q.boost is not None:
            return None  # a boost needs the fused list: client-side fusion
        collection_props(self.settings)
        vector = self._embed([q.text])[0] if mode != "lexical" else None
        res = search(
            self.settings,
            q.text,
            tokenize(q.text),
            vector,
            mode=mode,
            expr=self.expr(q),
            limit=q.limit,
            explain=q.explain,
            fusion=s.fusion,
            rrf_k=s.rrf_k,
            weights=(s.w_lexical, s.w_dense),
            candidates=s.candidates,
            early_return=s.early_return,
            min_confidence=remote_min_confidence(s),
        )
        res.warnings += warnings
        return res

    def lexical_top(
        self, tokens: list[str], weights: Weights, k: int, scope: Scope
    ) -> tuple[fusion.Channel, int]:
        assert isinstance(scope, MilvusScope) and scope.stats is not None
        rows = scope.stats.lexical(tokens, weights, k)
        return scope.ids.channel(rows), len(rows)

    def lexical_among(
        self, tokens: list[str], weights: Weights, k: int, scope: Scope, ids: np.ndarray
    ) -> fusion.Channel | None:
        assert isinstance(scope, MilvusScope) and scope.stats is not None
        within = MilvusTermStats(self.settings, scope.stats.stats, _and(scope.expr, _ids_expr(ids)))
        return scope.ids.channel(within.lexical(tokens, weights, k))

    def _embed(self, texts: list[str]) -> list[np.ndarray]:
        from clawkb.embed.run import kb_embedder
        from clawkb.embed.vectors import model_key

        emb = kb_embedder(self.kb)
        if not self._model_checked:
            check_properties(
                self.settings, collection_props(self.settings), model_key(emb.signature())
            )
            self._model_checked = True
        return [emb.embed_query(t) for t in texts]

    def warm_dense(self) -> None:
        """Nothing to load ahead: the query is embedded when the channel runs."""

    def dense(self, texts: list[str], k: int, scope: Scope) -> list[fusion.Channel]:
        assert isinstance(scope, MilvusScope)
        out = []
        for v in self._embed(texts):
            rows = _channel(self.settings, "dense", v.tolist(), "COSINE", scope.expr, k)
            out.append(scope.ids.channel(rows))
        return out

    def recency(self, ids: list[int], half_life_days: float, scope: Scope) -> dict[int, float]:
        """From each row's ``mtime`` field."""
        assert isinstance(scope, MilvusScope)
        now = time.time()
        return {
            cid: fusion.recency_score(float(e.get("mtime", 0.0)), now, half_life_days)
            for cid, e in scope.ids.rows.items()
        }

    def rows(self, ids: list[int], scope: Scope) -> dict[int, ChunkRow]:
        assert isinstance(scope, MilvusScope)
        return {i: doc_row(scope.ids.rows[i]) for i in ids if i in scope.ids.rows}

    def embedded(self) -> Callable[[np.ndarray], np.ndarray]:
        raise NotImplementedError("a Milvus source has no vector_coverage capability")

    def explainer(self) -> None:
        return None

    def explain_notes(self, s: RetrievalSettings) -> dict[str, Any]:
        return {
            "backend": "milvus",
            "fusion": {"ranker": s.fusion, "k": s.rrf_k, "side": "client"},
        }

    def board_ids(self, boards: tuple[str, ...], generic: bool = False) -> np.ndarray:
        """Chunk ids of these boards' datasheets, with ``generic`` also those of no board
        (a remote-only KB has no store to ask)."""
        from clawkb.backends.milvus_filters import quote
        from clawkb.backends.milvus_schema import client
        from clawkb.errors import BackendError

        names = ", ".join(quote(b) for b in boards)
        try:
            rows = client(self.settings).query(
                self.settings.collection,
                filter=f"datasheet == true and (board in [{names}]"
                + (' or board == "")' if generic else ")"),
                output_fields=["chunk_id"],
                limit=16384,
            )
        except Exception as exc:
            raise BackendError(f"Milvus query failed: {str(exc).strip()[-200:]}") from exc
        return np.unique(np.asarray([int(r["chunk_id"]) for r in rows], np.int64))
