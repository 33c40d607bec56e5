"""Board-aware retrieval: boost the datasheets of the boards in use, or keep only them.

With ``--board B`` a chunk from B's datasheets scores ``board_boost`` times its
score (``board_boost`` in ``config.yaml``, default 1.5); generic datasheets,
notes and other boards keep theirs. This module only says *which* chunks are
boosted or allowed (:func:`board_restriction`); the one retrieval pipeline
(:mod:`clawkb.retrieve.pipeline`) applies it after fusion, in every mode and
with every filter and option. In lexical mode the boosted top-k is exact: the
pipeline merges the global top-k with the boosted chunks' own top-k before
boosting. ``only`` limits the candidates to B's datasheets plus the generic ones.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, TypedDict

import numpy as np

from clawkb.hardware.boards import check_boards
from clawkb.retrieve.query import ChunkBoost, Query
from clawkb.retrieve.result import SearchResult
from clawkb.store.hardware_repo import boards_of_anchors, chunk_ids_of_boards, datasheet_chunk_ids

if TYPE_CHECKING:
    from clawkb.kb import KnowledgeBase


class BoardFields(TypedDict, total=False):
    """The :class:`Query` fields of a board search (:func:`board_restriction`)."""

    chunk_ids: np.ndarray
    boost: ChunkBoost


def board_boost(kb: KnowledgeBase) -> float:
    return float(kb.config.board_boost)  # checked (> 0) by the settings model


def board_restriction(
    kb: KnowledgeBase,
    boards: Sequence[str],
    *,
    only: bool = False,
    boost: float | None = None,
    datasheets_only: bool = False,
) -> BoardFields:
    """The :class:`Query` fields for a board search: ``chunk_ids`` and ``boost``.

    ``datasheets_only`` restricts candidates to datasheets (any board); with
    no datasheet in the KB it has no effect.
    """
    names = check_boards(kb.conn, boards)
    factor = board_boost(kb) if boost is None else boost
    out: BoardFields = {}
    ids = None
    if only and names:
        ids = chunk_ids_of_boards(kb.conn, names, generic=True)
    elif datasheets_only:
        ids = datasheet_chunk_ids(kb.conn)
    if ids is not None:
        out["chunk_ids"] = ids
    if names:
        out["boost"] = ChunkBoost.uniform(
            "board", chunk_ids_of_boards(kb.conn, names, generic=False), factor
        )
    return out


def board_search(
    kb: KnowledgeBase,
    query: str,
    boards: Sequence[str],
    *,
    only: bool = False,
    datasheets_only: bool = False,
    limit: int = 10,
    mode: str | None = None,
    explain: bool = False,
) -> SearchResult:
    """``kb.search`` with the datasheets of ``boards`` boosted (see the module docstring).

    ``datasheets_only`` with no board keeps every datasheet and nothing else.
    """
    if boards or not datasheets_only:
        return kb.search(
            query, boards=boards, board_only=only, limit=limit, mode=mode, explain=explain
        )
    restriction = board_restriction(kb, (), datasheets_only=True)
    q = Query.make(query, limit=limit, mode=mode, explain=explain, **restriction)
    return kb.run_query(q)


def name_boards(kb: KnowledgeBase, res: SearchResult) -> SearchResult:
    """With ``explain``, add each hit's board to its ``board`` trace."""
    if not any(h.explanation and "board" in h.explanation for h in res.hits):
        return res
    board_of = boards_of_anchors(kb.conn, [h.anchor.id for h in res.hits])
    hits = []
    for h in res.hits:
        exp = h.explanation
        if exp and "board" in exp:
            exp = {**exp, "board": {"board": board_of.get(h.anchor.id), **exp["board"]}}
        hits.append(replace(h, explanation=exp))
    return replace(res, hits=hits)
