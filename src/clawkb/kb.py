"""The :class:`KnowledgeBase` facade: the one object the CLI, API and servers use.

One writer, many readers: writes (index, reindex) take an exclusive file lock
in the KB folder; searches never block on it. A KB folder holds::

    clawkb.sqlite        the store (source of truth, WAL)
    index/lexical/       the BM25F segments (derived; `clawkb reindex` rebuilds)
    config.yaml          optional settings
    write.lock           the writer lock
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from clawkb import __version__
from clawkb.config import Config
from clawkb.errors import LockedError, NotFoundError
from clawkb.index.lexical import ENGINE, BM25FParams, LexicalIndex
from clawkb.index.scorer import NATIVE_AVAILABLE
from clawkb.retrieve.search import SearchResult, lexical_search
from clawkb.store import db
from clawkb.store.repo import ChunkRow, Repository
from clawkb.text import TOKENIZER_VERSION, tokenize

if TYPE_CHECKING:
    from clawkb.ingest.pipeline import IndexReport, Ingestor, Progress, TextRecord
    from clawkb.memory import Memory
    from clawkb.parsers.registry import ParserRegistry

__all__ = ["IndexReport", "KnowledgeBase", "SearchResult", "TextRecord"]


class KnowledgeBase:
    """A knowledge base in one folder. Use :meth:`open`; close it (or use ``with``)."""

    def __init__(self, home: Path, conn: sqlite3.Connection, config: Config) -> None:
        self.home = home
        self.conn = conn
        self.config = config
        self.repo = Repository(conn)
        self.lexical = LexicalIndex(
            home / "index" / "lexical",
            BM25FParams(config.k1, config.field_weights, config.field_b),
        )
        self._registry: ParserRegistry | None = None

    @classmethod
    def open(cls, home: str | os.PathLike[str], *, create: bool = False) -> KnowledgeBase:
        home = Path(home).expanduser().resolve()
        conn = db.connect(home, create=create)
        if db.get_meta(conn, "created_at") is None:
            conn.execute("BEGIN IMMEDIATE")
            db.set_meta(conn, "created_at", str(time.time()))
            db.set_meta(conn, "clawkb_version", __version__)
            db.set_meta(conn, "tokenizer_version", TOKENIZER_VERSION)
            db.set_meta(conn, "lexical_engine", ENGINE)
            conn.execute("COMMIT")
        return cls(home, conn, Config.load(home))

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> KnowledgeBase:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def memory(self) -> Memory:
        """Agent long-term memory kept in this KB (see :mod:`clawkb.memory`)."""
        from clawkb.memory import Memory

        return Memory(self)

    @property
    def registry(self) -> ParserRegistry:
        if self._registry is None:
            from clawkb.parsers.registry import default_registry

            self._registry = default_registry()
        return self._registry

    # -- locking ----------------------------------------------------------
    @contextmanager
    def writer(
        self, wait: float = 30.0, on_wait: Callable[[str], None] | None = None
    ) -> Iterator[None]:
        """Hold the exclusive write lock; wait up to ``wait`` seconds for it."""
        fh = open(self.home / "write.lock", "a+")  # noqa: SIM115 - held across the yield
        deadline = time.monotonic() + wait
        told = False
        while True:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    fh.close()
                    raise LockedError(
                        f"{self.home}: another clawkb process is writing to this knowledge base;"
                        " try again when it finishes"
                    ) from None
                if on_wait and not told:
                    on_wait(f"waiting for another clawkb process writing to {self.home} ...")
                    told = True
                time.sleep(0.1)
        try:
            fh.seek(0)
            fh.truncate()
            fh.write(str(os.getpid()))
            fh.flush()
            self.lexical = LexicalIndex(self.lexical.folder, self.lexical.params, writable=True)
            self._ensure_tokenizer()
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
            fh.close()

    def _ensure_tokenizer(self) -> None:
        """A KB indexed with another tokenizer version is re-tokenized from the store."""
        if db.get_meta(self.conn, "tokenizer_version") != TOKENIZER_VERSION:
            from clawkb.ingest.sync import rebuild_lexical

            rebuild_lexical(self.repo, self.lexical, self.config.index_batch_chunks)
            self.conn.execute("BEGIN")
            db.set_meta(self.conn, "tokenizer_version", TOKENIZER_VERSION)
            self.conn.execute("COMMIT")

    def _catch_up(self) -> list[str]:
        """Readers: if the index lags the store (a killed writer), repair it when we can."""
        warnings = []
        if db.get_meta(self.conn, "tokenizer_version") != TOKENIZER_VERSION:
            warnings.append(
                "the index was built with another tokenizer version: run `clawkb reindex`"
            )
        if self.lexical.applied_seq < self.repo.max_seq() or self.lexical.applied_seq < 0:
            try:
                with self.writer(wait=0):
                    from clawkb.ingest.sync import sync_lexical

                    sync_lexical(self.repo, self.lexical, self.config.index_batch_chunks)
            except LockedError:
                warnings.append("an indexing run is in progress; results may be incomplete")
        return warnings

    # -- writes -----------------------------------------------------------
    def index(
        self,
        paths: Sequence[str | os.PathLike[str]],
        *,
        progress: Progress | None = None,
        wait: float = 30.0,
        on_wait: Callable[[str], None] | None = None,
        include: Sequence[str] = (),
    ) -> IndexReport:
        """Index files and folders incrementally (see :mod:`clawkb.ingest.pipeline`).

        ``include`` globs index files that a default ignore would skip.
        """
        with self.writer(wait, on_wait):
            return self._ingestor().index_paths(paths, progress, include)

    def index_texts(
        self, records: Iterable[TextRecord], *, progress: Progress | None = None
    ) -> IndexReport:
        """Index in-memory documents keyed by ``record.path``."""
        with self.writer():
            return self._ingestor().index_records(records, progress)

    def reindex(self) -> int:
        """Rebuild the lexical index from the store; returns the chunk count."""
        with self.writer():
            from clawkb.ingest.sync import rebuild_lexical

            return rebuild_lexical(self.repo, self.lexical, self.config.index_batch_chunks)

    def _ingestor(self) -> Ingestor:
        from clawkb.hardware.hook import DatasheetHook
        from clawkb.ingest.pipeline import Ingestor
        from clawkb.knowledge.hook import KnowledgeHook

        hooks = (
            DatasheetHook.for_kb(self),  # boards + pin aliases of datasheet files
            KnowledgeHook.for_kb(self),  # trust tier, domain, links (after boards)
        )
        keep = [(self.home / "learned").as_posix()]  # agent notes live in the KB folder
        return Ingestor(
            self.repo, self.lexical, self.config, self.registry, hooks=hooks, keep_under=keep
        )

    # -- reads ------------------------------------------------------------
    def search(
        self,
        query: str,
        *,
        limit: int = 10,
        path_glob: str | Sequence[str] | None = None,
        explain: bool = False,
        include_memory: bool = False,
        boards: Sequence[str] = (),
        board_only: bool = False,
        mode: str | None = None,
        filters: Any = None,
        **retrieval: Any,
    ) -> SearchResult:
        """``boards`` boosts those boards' datasheets; ``board_only`` keeps them + generic only.

        ``mode`` (lexical | dense | hybrid | auto), ``filters``
        (:class:`clawkb.retrieve.filters.Filters`) and ``retrieval`` overrides
        (fusion weights, rerank, ...) run the staged pipeline of
        :mod:`clawkb.retrieve.pipeline`; without them, and before any vectors
        exist, search stays on the plain lexical path.
        """
        warnings = self._catch_up()
        globs = (path_glob,) if isinstance(path_glob, str) else tuple(path_glob or ())
        if boards:
            from clawkb.hardware.ranking import board_search

            res = board_search(
                self,
                query,
                boards,
                limit=limit,
                only=board_only,
                path_globs=globs,
                explain=explain,
                include_memory=include_memory,
            )
            res.warnings += warnings
            return res
        from clawkb.retrieve.modes import needs_pipeline

        if needs_pipeline(self, mode, filters, retrieval):
            from clawkb.retrieve.pipeline import search_kb

            res = search_kb(
                self,
                query,
                limit=limit,
                path_globs=globs,
                mode=mode,
                filters=filters,
                explain=explain,
                include_memory=include_memory,
                options=retrieval,
            )
            res.warnings += warnings
            return res
        res = lexical_search(
            self.repo,
            self.lexical,
            query,
            limit=limit,
            path_globs=globs,
            explain=explain,
            include_memory=include_memory,
        )
        res.warnings += warnings
        return res

    def search_ids(self, query: str, limit: int = 10) -> tuple[np.ndarray, np.ndarray]:
        """Raw lexical top-k chunk ids and scores, without touching the store."""
        ids, scores, _ = self.lexical.search(tokenize(query), k=limit)
        return ids, scores

    def chunk_paths(self, ids: Iterable[int]) -> list[str]:
        ids = [int(i) for i in ids]
        rows = self.repo.chunks_by_ids(ids)
        return [rows[i].path if i in rows else "" for i in ids]

    def chunk(self, anchor: str) -> ChunkRow:
        """The chunk with this anchor or unique prefix (``#`` allowed); one-line errors."""
        from clawkb.anchors import SHOW_CANDIDATES, ambiguous_message, parse_anchor

        key = parse_anchor(anchor)
        row = self.repo.chunk_by_anchor(key)
        if row is None:
            candidates = self.repo.anchors_with_prefix(key, SHOW_CANDIDATES + 1)
            if len(candidates) > 1:
                raise NotFoundError(ambiguous_message(key, candidates))
            raise NotFoundError(
                f"no chunk with anchor {key!r} (anchors change only when text changes)"
            )
        return row

    def neighbours(
        self, row: ChunkRow, before: int = 1, after: int = 1
    ) -> tuple[list[ChunkRow], list[ChunkRow]]:
        rows = self.repo.chunks_of_doc(row.doc_id)
        i = next(k for k, r in enumerate(rows) if r.id == row.id)
        return rows[max(0, i - before) : i], rows[i + 1 : i + 1 + after]

    def status(self) -> dict[str, Any]:
        self._catch_up()
        db_path = self.home / db.DB_NAME
        size = sum(p.stat().st_size for p in self.home.glob(db.DB_NAME + "*") if p.is_file())
        last = self.conn.execute(
            "SELECT started_at, finished_at, status, counts FROM runs ORDER BY id DESC LIMIT 1"
        ).fetchone()
        return {
            "home": str(self.home),
            "store": str(db_path),
            "store_bytes": size,
            "schema_version": int(db.get_meta(self.conn, "schema_version") or 0),
            "tokenizer_version": db.get_meta(self.conn, "tokenizer_version"),
            "clawkb_version": __version__,
            **self.repo.counts(),
            "lexical": {**self.lexical.status(), "native_kernel": NATIVE_AVAILABLE},
            "dense": _dense_status(self),
            "last_run": (
                {"started_at": last[0], "finished_at": last[1], "status": last[2]} if last else None
            ),
        }


def _dense_status(kb: KnowledgeBase) -> dict[str, Any] | None:
    from clawkb.embed.run import dense_status

    return dense_status(kb)


def __getattr__(name: str) -> Any:
    """``TextRecord`` and ``IndexReport`` load the ingest side on first use only,
    so opening a KB to search stays fast."""
    if name in ("TextRecord", "IndexReport"):
        from clawkb.ingest import pipeline

        return getattr(pipeline, name)
    raise AttributeError(name)
