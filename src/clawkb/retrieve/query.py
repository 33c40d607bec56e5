"""What a search asks for: one typed :class:`Query` every caller builds.

``kb.search``, board search, memory recall, ``ask``, ``context``, MCP and the
HTTP server all describe their search as a :class:`Query` and hand it to
:func:`clawkb.retrieve.pipeline.run`. Options are checked here, once: an
unknown keyword is an error naming the closest valid one, never ignored.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, TypedDict, Unpack

import numpy as np

from clawkb.errors import ConfigError
from clawkb.retrieve.filters import Filters
from clawkb.retrieve.settings import MODES, RetrievalSettings

if TYPE_CHECKING:  # the knowledge stages wrap the pipeline; types only
    from clawkb.knowledge.search import KnowledgeOptions

#: Retrieval options a query may override (the ``retrieval:`` settings), plus
#: the options rerankers read from ``extra``.
OPTION_NAMES = frozenset(f.name for f in fields(RetrievalSettings) if f.name != "extra") | {
    "rerank_options"
}


@dataclass(frozen=True)
class ChunkBoost:
    """Per-chunk score multipliers applied after fusion (boards, memory weights).

    ``ids`` is sorted; ``factors[i]`` multiplies the fused score of ``ids[i]``.
    ``label`` names the boost in explanations (``{"board": {...}}``).
    """

    label: str
    ids: np.ndarray
    factors: np.ndarray

    @classmethod
    def uniform(cls, label: str, ids: np.ndarray, factor: float) -> ChunkBoost:
        ids = np.unique(np.asarray(ids, np.int64))
        return cls(label, ids, np.full(len(ids), float(factor)))

    @classmethod
    def from_map(cls, label: str, factors: Mapping[int, float]) -> ChunkBoost:
        ids = np.fromiter(sorted(factors), np.int64, len(factors))
        return cls(label, ids, np.fromiter((factors[i] for i in ids.tolist()), float, len(ids)))

    def factor_of(self, chunk_ids: np.ndarray) -> np.ndarray:
        """The multiplier for each of ``chunk_ids`` (1.0 where none is set)."""
        out = np.ones(len(chunk_ids))
        if len(self.ids) == 0 or len(chunk_ids) == 0:
            return out
        pos = np.searchsorted(self.ids, chunk_ids)
        pos_c = np.minimum(pos, len(self.ids) - 1)
        found = self.ids[pos_c] == chunk_ids
        out[found] = self.factors[pos_c[found]]
        return out


class QueryFields(TypedDict, total=False):
    """The :class:`Query` fields :meth:`Query.make` passes through as given."""

    chunk_ids: np.ndarray | None
    boost: ChunkBoost | None
    include_memory: bool
    group_of: Mapping[int, str] | None
    explain: bool
    snippets: bool
    knowledge: KnowledgeOptions | None
    features: Mapping[str, Any]


@dataclass(frozen=True)
class Query:
    """One search request. Build it with :meth:`make` to validate options."""

    text: str
    limit: int = 10
    mode: str | None = None
    filters: Filters = field(default_factory=Filters)
    #: restrict candidates to these chunk ids (board-only, datasheets, memories)
    chunk_ids: np.ndarray | None = None
    boost: ChunkBoost | None = None
    include_memory: bool = False
    #: keep only the best chunk per group (memory recall: one hit per memory)
    group_of: Mapping[int, str] | None = None
    explain: bool = False
    #: build snippets, highlights and every hit's matched terms (evaluation needs
    #: only ids and paths: without, matched terms are kept for the top hit only)
    snippets: bool = True
    options: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    #: knowledge stages (a clawkb.knowledge.search.KnowledgeOptions; None: the KB's rules)
    knowledge: KnowledgeOptions | None = None
    #: what the query stages around the pipeline read (``clawkb.query_stages``), e.g.
    #: ``boards`` and ``board_only`` for board search; the pipeline never reads them
    features: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    @classmethod
    def make(
        cls,
        text: str,
        *,
        limit: int = 10,
        mode: str | None = None,
        filters: Filters | None = None,
        path_globs: tuple[str, ...] = (),
        options: Mapping[str, Any] | None = None,
        **rest: Unpack[QueryFields],
    ) -> Query:
        if not text.strip():
            raise ConfigError("the query is empty")
        if limit < 1:
            raise ConfigError(f"limit must be at least 1, got {limit}")
        if mode is not None and mode not in MODES:
            raise ConfigError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
        f = filters if filters is not None else Filters()
        if not isinstance(f, Filters):
            raise ConfigError(f"filters must be a clawkb.retrieve.filters.Filters, got {f!r}")
        if path_globs:
            f = Filters(
                path_globs=tuple(dict.fromkeys((*f.path_globs, *path_globs))),
                doc_types=f.doc_types,
                metadata=f.metadata,
                since=f.since,
                until=f.until,
            )
        opts = check_options(options or {})
        return cls(text, limit, mode, f, options=MappingProxyType(opts), **rest)


def check_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """Drop ``None`` values; an unknown name is a :class:`ConfigError` naming the closest."""
    for key in options:
        if key not in OPTION_NAMES:
            close = difflib.get_close_matches(key, sorted(OPTION_NAMES), n=1, cutoff=0.5)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ConfigError(f"unknown search option {key!r}{hint}")
    return {k: v for k, v in options.items() if v is not None}
