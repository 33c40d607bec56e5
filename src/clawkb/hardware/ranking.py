"""Board-aware retrieval: boost the datasheets of the boards in use, or keep only them.

With ``--board B`` a chunk from B's datasheets scores ``board_boost`` times its
BM25F score (``board_boost`` in ``config.yaml``, default 1.5); generic
datasheets, notes and other boards keep theirs. The boosted top-k is exact,
not an over-fetch guess: every final hit is either a top-k hit among B's
chunks or a top-k hit among all candidates, so one search of each, merged
after boosting, gives the same list as boosting every chunk. ``only`` limits
the candidates to B's datasheets plus the generic ones.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from clawkb.errors import ConfigError
from clawkb.hardware.boards import check_boards
from clawkb.hardware.store import boards_of_anchors, chunk_ids_of_boards, datasheet_chunk_ids
from clawkb.retrieve.search import SearchResult, lexical_search
from clawkb.types import Hit

if TYPE_CHECKING:
    from clawkb.kb import KnowledgeBase

DEFAULT_BOOST = 1.5


def board_boost(kb: KnowledgeBase) -> float:
    value = kb.config.extra.get("board_boost", DEFAULT_BOOST)
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ConfigError(
            f"{kb.home / 'config.yaml'}: 'board_boost' must be a positive number, got {value!r}"
        )
    return float(value)


def board_search(
    kb: KnowledgeBase,
    query: str,
    boards: Sequence[str],
    *,
    limit: int = 10,
    only: bool = False,
    boost: float | None = None,
    path_globs: tuple[str, ...] = (),
    explain: bool = False,
    include_memory: bool = False,
    datasheets_only: bool = False,
) -> SearchResult:
    """Search with the datasheets of ``boards`` boosted (see the module docstring).

    ``datasheets_only`` restricts candidates to datasheets (any board); with
    no datasheet in the KB it has no effect.
    """
    t0 = time.perf_counter()
    names = check_boards(kb.conn, boards)
    factor = board_boost(kb) if boost is None else boost
    candidates: np.ndarray | None = None
    if only and names:
        candidates = chunk_ids_of_boards(kb.conn, names, generic=True)
    elif datasheets_only:
        candidates = datasheet_chunk_ids(kb.conn)

    def run(ids: np.ndarray | None) -> SearchResult:
        return lexical_search(
            kb.repo,
            kb.lexical,
            query,
            limit=limit,
            path_globs=path_globs,
            explain=explain,
            include_memory=include_memory,
            chunk_ids=ids,
        )

    base = run(candidates)
    hits = list(base.hits)
    if names and factor != 1.0:
        boosted = chunk_ids_of_boards(kb.conn, names, generic=False)
        if candidates is not None:
            boosted = np.intersect1d(boosted, candidates)
        seen = {h.anchor.id for h in hits}
        hits += [h for h in run(boosted).hits if h.anchor.id not in seen]
    hits = _rerank(kb, hits, set(names), factor, explain)[:limit]
    return SearchResult(
        base.query, base.query_tokens, hits, (time.perf_counter() - t0) * 1000, base.matched
    )


def _rerank(
    kb: KnowledgeBase, hits: list[Hit], boards: set[str], factor: float, explain: bool
) -> list[Hit]:
    board_of = boards_of_anchors(kb.conn, [h.anchor.id for h in hits])
    scored = []
    for h in hits:
        board = board_of.get(h.anchor.id)
        mult = factor if board in boards else 1.0
        explanation = h.explanation
        if explain:
            explanation = {
                **(h.explanation or {}),
                "board": {"board": board, "boost": mult, "lexical_score": round(h.score, 6)},
                "final": round(h.score * mult, 6),
            }
        scored.append((h.score * mult, h.rank, h, explanation))
    scored.sort(key=lambda s: (-s[0], s[1]))
    return [
        dataclasses.replace(h, rank=i, score=score, explanation=exp)
        for i, (score, _, h, exp) in enumerate(scored, start=1)
    ]
