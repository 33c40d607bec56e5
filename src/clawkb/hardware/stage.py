"""Board search as a ``clawkb.query_stages`` plugin: a query with ``boards`` (the
``features`` :meth:`clawkb.kb.KnowledgeBase.search` fills from ``boards=`` and
``board_only=``) gets the boards' datasheets boosted, or only those kept
(``kb.board_fields``: from the store, or from Milvus on a remote-only KB), and its hits named with their
boards."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from clawkb.kb import KnowledgeBase
    from clawkb.retrieve.query import Query
    from clawkb.retrieve.result import SearchResult


class BoardsStage:
    """Around the knowledge stage: the board restriction holds for every passage."""

    order = 10

    @staticmethod
    def around(kb: KnowledgeBase, q: Query, run: Callable[[Query], SearchResult]) -> SearchResult:
        boards = tuple(q.features.get("boards") or ())
        if not boards:
            return run(q)
        from clawkb.hardware.ranking import name_boards

        fields = kb.board_fields(boards, bool(q.features.get("board_only")))
        return name_boards(kb, run(dataclasses.replace(q, **fields)))
