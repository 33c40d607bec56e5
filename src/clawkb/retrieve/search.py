"""Lexical search: query → tokens → BM25F top-k → hits with anchors and snippets."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from clawkb.index.lexical import LexicalIndex
from clawkb.retrieve.snippet import make_snippet
from clawkb.store.repo import ChunkRow, Repository
from clawkb.text import normalize, tokenize
from clawkb.types import Hit


@dataclass
class SearchResult:
    query: str
    query_tokens: list[str]
    hits: list[Hit]
    took_ms: float
    #: chunks that matched any term; -1 when pruning stopped before counting all
    matched: int = 0
    warnings: list[str] = field(default_factory=list)

    @property
    def message(self) -> str:
        if not self.query_tokens:
            return "the query has no searchable terms"
        if not self.hits:
            return f"no match for {self.query!r} in the knowledge base"
        return ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "query_tokens": self.query_tokens,
            "took_ms": round(self.took_ms, 3),
            "matched": self.matched,
            "count": len(self.hits),
            "message": self.message,
            "warnings": self.warnings,
            "hits": [h.to_dict() for h in self.hits],
        }


def lexical_search(
    repo: Repository,
    lexical: LexicalIndex,
    query: str,
    *,
    limit: int = 10,
    path_globs: tuple[str, ...] = (),
    explain: bool = False,
    include_memory: bool = False,
    chunk_ids: np.ndarray | None = None,
) -> SearchResult:
    """``chunk_ids``, if given, restricts the search to those chunks (and path globs)."""
    t0 = time.perf_counter()
    tokens = tokenize(query)
    allowed = None
    if path_globs:
        allowed = np.asarray(repo.chunk_ids_matching(path_globs), np.int64)
    if chunk_ids is not None:
        ids_in = np.asarray(chunk_ids, np.int64)
        allowed = ids_in if allowed is None else np.intersect1d(allowed, ids_in)
    ids, scores, matched = _top_ids(repo, lexical, tokens, limit, allowed, include_memory)
    rows = repo.chunks_by_ids(int(i) for i in ids)
    hits = []
    for rank, (cid, score) in enumerate(zip(ids.tolist(), scores.tolist(), strict=True), start=1):
        row = rows.get(cid)
        if row is None:  # deleted between index read and store read
            continue
        hits.append(_hit(row, rank, score, tokens, lexical if explain else None))
    return SearchResult(query, tokens, hits, (time.perf_counter() - t0) * 1000, matched)


#: Agent memories (:mod:`clawkb.memory`) are stored as documents under this
#: path prefix; plain search leaves them out unless ``include_memory`` is set.
MEMORY_PREFIX = "memory://"


def _top_ids(
    repo: Repository,
    lexical: LexicalIndex,
    tokens: list[str],
    limit: int,
    allowed: np.ndarray | None,
    include_memory: bool,
) -> tuple[np.ndarray, np.ndarray, int]:
    """Lexical top-k, without memory chunks unless asked.

    A KB without memories pays one indexed lookup. With memories, one pass
    fetches ``limit`` + (number of memory chunks) and drops the memories, so
    the documents returned are exactly the top ones.
    """
    hidden = [] if include_memory else repo.chunk_ids_under_path(MEMORY_PREFIX)
    if not hidden:
        return lexical.search(tokens, k=limit, allowed=allowed)
    ids, scores, matched = lexical.search(tokens, k=limit + len(hidden), allowed=allowed)
    keep = ~np.isin(ids, np.asarray(hidden, np.int64))
    hidden_n = int((~keep).sum())
    return ids[keep][:limit], scores[keep][:limit], matched if matched < 0 else matched - hidden_n


def _hit(
    row: ChunkRow, rank: int, score: float, tokens: list[str], lexical: LexicalIndex | None
) -> Hit:
    explanation = None
    if lexical is not None:
        explanation = {"lexical": lexical.explain(tokens, row.id), "final": round(score, 6)}
    return make_hit(row, rank, score, tokens, explanation)


def make_hit(
    row: ChunkRow,
    rank: int,
    score: float,
    tokens: list[str],
    explanation: dict[str, Any] | None = None,
) -> Hit:
    """A Hit for a stored chunk: anchor, snippet, highlights and matched terms.

    Matched terms use a substring test on the normalised text: cheap, and exact
    for every token the tokenizer cuts out of the text verbatim (joined forms
    like 0x40013000 are the rare exception; --explain gives the exact view).
    """
    uniq = tuple(dict.fromkeys(tokens))
    haystack = normalize(" ".join((row.title, *row.heading_path, row.text)))
    snippet, spans = make_snippet(row.text, uniq)
    return Hit(
        rank=rank,
        score=float(score),
        anchor=row.to_anchor(),
        text=row.text,
        title=row.title,
        kind=row.kind,
        matched_terms=tuple(t for t in uniq if t in haystack),
        snippet=snippet,
        highlights=spans,
        explanation=explanation,
        trust=row.trust,
        domain=row.domain,
    )
