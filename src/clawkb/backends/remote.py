"""A remote-only knowledge base: a folder with just ``remote.yaml``, no local store.

``remote.yaml`` holds the same settings as ``config.yaml`` (at least
``backend: {kind: milvus, uri: ...}``, and ``embedding:`` when the collection
has vectors). Every read goes to Milvus: search, ``show`` (chunk by anchor and
its neighbours, by path and ordinal), ``ask`` and ``context``. Hits are kept
in a small in-memory scratch store for the life of the object so the answer
layer can merge neighbouring passages exactly as it does locally. Writes
(index, memory) belong on an ingesting machine and are refused clearly.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import numpy as np

from clawkb.backends.milvus_filters import quote
from clawkb.backends.milvus_kb import kb_search
from clawkb.backends.milvus_schema import HIT_FIELDS, client
from clawkb.backends.milvus_search import entity_row
from clawkb.backends.milvus_source import MilvusSource, collection_props
from clawkb.backends.settings import REMOTE_FILE, backend_settings
from clawkb.config import Config
from clawkb.errors import BackendError, ConfigError, NotFoundError
from clawkb.hardware.context import passage_dicts
from clawkb.kb import KnowledgeBase
from clawkb.retrieve.result import SearchResult
from clawkb.store import db, replica_repo
from clawkb.store.memo import StoreMemo
from clawkb.store.repo import ChunkRow, Repository
from clawkb.types import Hit

if TYPE_CHECKING:
    from clawkb.hardware.ranking import BoardFields
    from clawkb.retrieve.query import Query
    from clawkb.retrieve.source import Source


class UniformTermStats:
    """Stands in for the lexical index where only term statistics are read (``ask``'s
    question-term weights): Milvus does not expose document frequencies, so every
    term weighs the same."""

    n_docs = 0

    def doc_freqs(self, hashes: np.ndarray) -> np.ndarray:
        return np.ones(len(hashes), np.int64)

    def idf(self, df: np.ndarray) -> np.ndarray:
        return np.where(np.asarray(df) > 0, 1.0, 2.0)

    def close(self) -> None:
        """Nothing to release: no index files are open."""


class RemoteKnowledgeBase(KnowledgeBase):
    remote = True

    def __init__(self, home: Path, config: Config) -> None:  # no super(): no local store
        settings = backend_settings(config.backend, home)
        if settings is None:
            raise ConfigError(f"{home / REMOTE_FILE}: needs backend: {{kind: milvus, uri: ...}}")
        conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        db.migrate(conn, home / REMOTE_FILE)
        self.home = home
        self.conn = conn
        self.config = config
        self.repo = Repository(conn)
        self.memo = StoreMemo(conn)
        self.lexical = UniformTermStats()  # type: ignore[assignment]
        self._registry = None
        self.store_id = ""
        self._writing = 0
        self._superseded = []
        self.settings = settings
        self._source = MilvusSource(self, settings)  # no store: Milvus is the only source

    @classmethod
    def open_remote(cls, home: Path) -> RemoteKnowledgeBase:
        import yaml

        path = home / REMOTE_FILE
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except yaml.YAMLError as exc:
            raise ConfigError(f"{path}: invalid YAML ({exc})") from exc
        if not isinstance(data, dict):
            raise ConfigError(f"{path}: expected a mapping of settings")
        kb = cls(home, Config.from_dict(data, str(path)))
        collection_props(kb.settings)  # fail fast on a wrong address or collection
        return kb

    # -- writes are for ingesting machines ---------------------------------
    @contextmanager
    def writer(
        self,
        wait: float = 30.0,
        on_wait: Callable[[str], None] | None = None,
        *,
        full_check: bool = False,
    ) -> Iterator[None]:
        raise ConfigError(
            f"{self.home}: a remote-only knowledge base (remote.yaml) is read-only;"
            " index on an ingesting machine and `clawkb sync` into Milvus"
        )
        yield  # pragma: no cover

    def ensure_fresh(self) -> list[str]:
        """Nothing local to bring up to date: every read goes to the Milvus collection."""
        return []

    # -- reads ---------------------------------------------------------------
    def run_query(self, q: Query, *, source: Source | None = None) -> SearchResult:
        res = super().run_query(q, source=source)
        self._remember(res.hits)
        return res

    def board_fields(self, boards: Sequence[str], only: bool) -> BoardFields:
        """Board search without a store: the boards' chunk ids come from Milvus."""
        from clawkb.hardware.boards import normalize_board
        from clawkb.hardware.ranking import board_boost
        from clawkb.retrieve.query import ChunkBoost

        names = tuple(normalize_board(b) for b in boards if b.strip())
        if not names:
            return {}
        src = MilvusSource(self, self.settings)
        out: BoardFields = {
            "boost": ChunkBoost.uniform("board", src.board_ids(names), board_boost(self))
        }
        if only:
            out["chunk_ids"] = src.board_ids(names, generic=True)
        return out

    def _query(self, expr: str, limit: int = 100) -> list[dict[str, Any]]:
        try:
            rows = client(self.settings).query(
                self.settings.collection, filter=expr, output_fields=HIT_FIELDS, limit=limit
            )
        except Exception as exc:
            raise BackendError(f"Milvus query failed: {str(exc).strip()[-200:]}") from exc
        return [dict(r) for r in rows]

    def _remember(self, hits: list[Hit]) -> None:
        """Keep hit rows in the scratch store (for context merging in ``ask``)."""
        if not hits:
            return
        rows = self._query(
            "anchor in [" + ", ".join(quote(h.anchor.id) for h in hits) + "]", len(hits)
        )
        for e in rows:
            self._scratch(e)

    def _scratch(self, e: dict[str, Any]) -> None:
        doc_id = replica_repo.scratch_document(
            self.conn, e["path"], e.get("title", ""), time.time()
        )
        page = int(e.get("page", -1))
        replica_repo.scratch_chunk(
            self.conn,
            doc_id,
            e["anchor"],
            e["ordinal"],
            e["text"],
            e.get("heading") or "[]",
            (e["line_start"], e["line_end"]),
            None if page < 0 else page,
            e.get("kind", "text"),
            e.get("language") or None,
        )

    def chunk(self, anchor: str) -> ChunkRow:
        a = anchor.strip()
        rows = self._query(f"anchor == {quote(a)}", 1) or self._query(
            "anchor like " + quote(a.replace("%", "").replace("_", "\\_") + "%"), 2
        )
        if len(rows) != 1:
            raise NotFoundError(
                f"no chunk with anchor {anchor!r} in Milvus collection {self.settings.collection!r}"
            )
        return entity_row(rows[0])

    def neighbours(
        self, row: ChunkRow, before: int = 1, after: int = 1
    ) -> tuple[list[ChunkRow], list[ChunkRow]]:
        lo, hi = row.ordinal - before, row.ordinal + after
        rows = self._query(
            f"path == {quote(row.path)} and ordinal >= {lo} and ordinal <= {hi}",
            before + after + 1,
        )
        got = sorted((entity_row(e) for e in rows), key=lambda r: r.ordinal)
        return [r for r in got if r.ordinal < row.ordinal], [
            r for r in got if r.ordinal > row.ordinal
        ]

    def status(self) -> dict[str, Any]:
        props = collection_props(self.settings)
        try:
            stats = client(self.settings).get_collection_stats(self.settings.collection)
        except Exception as exc:
            raise BackendError(f"Milvus stats failed: {exc}") from exc
        return {
            "home": str(self.home),
            "remote": True,
            "backend": {**self.settings.describe(), "rows": int(stats.get("row_count", 0))},
            "collection": props,
        }

    def hardware_context(self, query: str, boards: Sequence[str], limit: int) -> dict[str, Any]:
        """``clawkb context`` here (:func:`clawkb.hardware.hardware_context` asks the KB)."""
        return remote_context(self, query, boards, limit)

    @property
    def memory(self) -> NoReturn:
        raise ConfigError(
            f"{self.home}: agent memory needs a local store; this knowledge base is remote-only"
        )


def remote_context(
    kb: RemoteKnowledgeBase, query: str, boards: Sequence[str], limit: int
) -> dict[str, Any]:
    """``clawkb context`` on a remote KB: datasheet passages from Milvus (no pin aliases,
    which live in the ingesting machine's store)."""
    t0 = time.perf_counter()
    names = [b.strip() for b in boards if b.strip()]
    res = kb_search(
        kb, kb.settings, query, limit=limit, boards=names, board_only=bool(names),
        datasheets_only=True,
    )  # fmt: skip
    board_of = {}
    if res.hits:
        ents = kb._query("anchor in [" + ", ".join(quote(h.anchor.id) for h in res.hits) + "]")
        board_of = {e["anchor"]: e.get("board") or None for e in ents}
    passages = passage_dicts(res.hits, board_of)
    return {
        "query": query,
        "boards": names,
        "aliases": [],
        "conflicts": [],
        "passages": passages,
        "warnings": [
            *res.warnings,
            "remote knowledge base: pin aliases are kept on the ingesting machine only",
        ],
        "took_ms": round((time.perf_counter() - t0) * 1000, 3),
    }
