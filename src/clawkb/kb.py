"""The :class:`KnowledgeBase` facade: the one object the CLI, API and servers use.

One writer, many readers: writes (index, reindex) take an exclusive file lock
in the KB folder; searches never block on it. A KB folder holds::

    clawkb.sqlite        the store (source of truth, WAL)
    index/lexical/       the BM25F segments (derived; `clawkb reindex` rebuilds)
    config.yaml          optional settings
    write.lock           the writer lock
"""

from __future__ import annotations

import contextlib
import functools
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future
from contextlib import contextmanager
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast

import numpy as np

from clawkb import __version__
from clawkb.config import Config
from clawkb.errors import ConfigError, IndexCorruptError, IndexError_, LockedError, NotFoundError
from clawkb.index.lexical import ENGINE, LEXICAL_FIELDS_VERSION, BM25FParams, LexicalIndex
from clawkb.index.scorer import NATIVE_AVAILABLE
from clawkb.retrieve.result import SearchResult
from clawkb.store import db, runs_repo
from clawkb.store.locking import FileLock
from clawkb.store.memo import StoreMemo
from clawkb.store.repo import ChunkRow, Repository
from clawkb.text import TOKENIZER_VERSION, tokenize

if TYPE_CHECKING:
    from clawkb.hardware.ranking import BoardFields
    from clawkb.ingest.pipeline import IndexReport, Ingestor, Progress, TextRecord
    from clawkb.knowledge.search import KnowledgeOptions
    from clawkb.memory import Memory
    from clawkb.parsers.registry import ParserRegistry
    from clawkb.retrieve.filters import Filters
    from clawkb.retrieve.query import Query
    from clawkb.retrieve.source import Source

__all__ = ["IndexReport", "KnowledgeBase", "SearchResult", "TextRecord"]

LOCK_NAME = "write.lock"
#: How long a reader keeps a superseded generation leased (threads mid-search).
READER_GRACE_S = 10.0
#: How long a read waits for a writer to repair an index it cannot serve.
REPAIR_WAIT_S = 300.0
#: After a failed background repair (a full disk), how long reads do not start another.
REPAIR_RETRY_S = 30.0
#: The ``clawkb.backends`` plugin for a ``backend:`` mapping without ``kind`` and for a
#: remote-only folder (``remote.yaml``); the facade imports no backend, they plug in.
DEFAULT_BACKEND = "milvus"
L = TypeVar("L", bound=LexicalIndex)


class Backend(Protocol):
    """What a ``clawkb.backends`` entry point gives the facade (docs/plugins.md)."""

    def source(self, kb: KnowledgeBase) -> Source: ...
    def after_write(self, kb: KnowledgeBase, report: IndexReport) -> IndexReport: ...
    def status(self, kb: KnowledgeBase) -> dict[str, object]: ...
    def open_remote(self, home: Path) -> KnowledgeBase: ...


class KnowledgeBase:
    """A knowledge base in one folder. Use :meth:`open`; close it (or use ``with``)."""

    def __init__(
        self,
        home: Path,
        conn: sqlite3.Connection,
        config: Config,
        *,
        lexical: Callable[[KnowledgeBase], LexicalIndex] | None = None,
    ) -> None:
        """``lexical``: where a reader's index comes from (the server's views share one
        per generation, :mod:`clawkb.server.views`); by default it is opened here."""
        self.home = home
        self.conn = conn
        self.config = config
        self.repo = Repository(conn)
        self.memo = StoreMemo(conn)  # what each search re-reads, until the store changes
        self.store_id = db.store_id(conn)
        self._lock = FileLock(home / LOCK_NAME)
        self._writing = 0
        # superseded reader generations, released after READER_GRACE_S
        self._superseded: list[tuple[float, LexicalIndex]] = []
        self.lexical = lexical(self) if lexical else self._open_lexical(writable=False)
        #: Names the data state this view reads when a host knows other views read the
        #: same one (a server's pinned views): they then share one result cache
        #: (:func:`clawkb.retrieve.pipeline.run`). None: this KB's own cache. Cleared
        #: whenever this KB moves to other data by itself.
        self.view_token: tuple[Any, ...] | None = None
        self._registry: ParserRegistry | None = None
        self._source: Source | None = None

    def _open_lexical(self, *, writable: bool, full_check: bool | None = None) -> LexicalIndex:
        return self.open_lexical(LexicalIndex, writable=writable, full_check=full_check)

    def lexical_params(self) -> BM25FParams:
        """The ranking parameters of this KB's settings."""
        return BM25FParams(self.config.k1, self.config.field_weights, self.config.field_b)

    def open_lexical(
        self, cls: type[L], *, writable: bool = False, full_check: bool | None = None
    ) -> L:
        """This KB's lexical index, opened now as a ``cls`` (a :class:`LexicalIndex`)."""
        return cls(
            self.home / "index" / "lexical",
            self.lexical_params(),
            writable=writable,
            store_id=self.store_id,
            full_check=full_check if full_check is not None else self._unclean_writer(),
        )

    def _unclean_writer(self) -> bool | None:
        """A writer died holding the lock (its pid is still in the file): check everything."""
        path = self.home / LOCK_NAME
        try:
            if path.stat().st_size == 0:
                return None
        except FileNotFoundError:
            return None
        from clawkb.store.locking import is_locked

        return True if not is_locked(path) else None

    @classmethod
    def open(
        cls,
        home: str | os.PathLike[str],
        *,
        create: bool = False,
        lexical: Callable[[KnowledgeBase], LexicalIndex] | None = None,
    ) -> KnowledgeBase:
        home = Path(home).expanduser().resolve()
        if not (home / db.DB_NAME).exists() and (home / "remote.yaml").is_file():
            from clawkb.plugins import load_plugin  # no local store: Milvus only

            backend = cast("Backend", load_plugin("clawkb.backends", DEFAULT_BACKEND, "backend"))
            return backend.open_remote(home)
        conn = db.connect(home, create=create)
        if db.get_meta(conn, "created_at") is None:
            with db.transaction(conn):
                db.set_meta(conn, "created_at", str(time.time()))
                db.set_meta(conn, "clawkb_version", __version__)
                db.set_meta(conn, "tokenizer_version", TOKENIZER_VERSION)
                db.set_meta(conn, "lexical_fields", LEXICAL_FIELDS_VERSION)
                db.set_meta(conn, "lexical_engine", ENGINE)
        try:
            return cls(home, conn, Config.load(home), lexical=lexical)
        except BaseException:
            conn.close()
            raise

    def close(self) -> None:
        for fut in getattr(self, "_handed_off", ()):  # a repair this object asked for
            with contextlib.suppress(Exception):
                fut.result(timeout=REPAIR_WAIT_S)
        self.lexical.close()
        for _, old in self._superseded:
            old.close()
        self._superseded.clear()
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
    def write_lock(
        self, wait: float = 30.0, on_wait: Callable[[str], None] | None = None
    ) -> Iterator[None]:
        """Hold the exclusive KB write lock only (short store commits, e.g. embed batches)."""
        if self._writing:
            self._writing += 1
            try:
                yield
            finally:
                self._writing -= 1
            return
        tell = (
            (lambda: on_wait(f"waiting for another clawkb process writing to {self.home} ..."))
            if on_wait
            else None
        )
        if not self._lock.acquire(wait, tell):
            raise LockedError(
                f"{self.home}: another clawkb process is writing to this knowledge base;"
                " try again when it finishes"
            )
        self._writing = 1
        try:
            self._lock.write_owner()
            yield
        finally:
            self._writing = 0
            self._lock.clear_owner()
            self._lock.release()

    @contextmanager
    def job_lock(self, name: str, wait: float = 30.0) -> Iterator[None]:
        """One long job of a kind at a time (``embed``), without blocking other writers."""
        lock = FileLock(self.home / f"{name}.lock")
        if not lock.acquire(wait):
            raise LockedError(
                f"{self.home}: another `{name}` run is in progress on this knowledge base"
            )
        try:
            yield
        finally:
            lock.release()

    @contextmanager
    def writer(
        self,
        wait: float = 30.0,
        on_wait: Callable[[str], None] | None = None,
        *,
        full_check: bool = False,
    ) -> Iterator[None]:
        """Hold the exclusive write lock with a writable index; wait up to ``wait`` seconds.

        On entry a damaged index, one from another store or one ahead of the
        store (a restored older store) is rebuilt; on exit the KB reads the
        generation it published. ``full_check``: checksum every index file on
        entry, whatever its size (a search found a damaged segment).
        """
        if self._writing:
            with self.write_lock(wait, on_wait):
                yield
            return
        unclean = True if full_check else self._unclean_writer()
        with self.write_lock(wait, on_wait):
            old = self.lexical
            if unclean or not old.resume_writing():  # resumed: this KB published it last
                self.lexical = self._open_lexical(writable=True, full_check=unclean)
                old.close()
            try:
                self._ensure_tokenizer()
                self._ensure_index()
                yield
            finally:
                if not self.lexical.damaged:
                    self.lexical.hold_current()
                else:  # a failed repair: readers see it as damaged again
                    self.lexical = self._open_lexical(writable=False)

    def _ensure_index(self) -> None:
        """Writers start from a sound index: rebuild one that cannot be replayed."""
        from clawkb.ingest.sync import index_problem, rebuild_lexical

        problem = index_problem(self.repo, self.lexical)
        if problem is not None:
            rebuild_lexical(self.repo, self.lexical, self.config.index_batch_chunks)
            self.repairs.append(f"rebuilt the lexical index from the store ({problem})")
        elif self.lexical.oldest_seq_in_use > 0:
            with self.repo.transaction():  # rows only a finished reader still needed
                self.repo.purge_retired(self.lexical.oldest_seq_in_use)

    @property
    def repairs(self) -> list[str]:
        """One line per automatic repair done by this KB object."""
        if not hasattr(self, "_repairs"):
            self._repairs: list[str] = []
        return self._repairs

    def _ensure_tokenizer(self) -> None:
        """A KB indexed with another tokenizer version or another rule for the BM25F
        fields (:func:`~clawkb.ingest.sync.doc_fields`) is re-tokenized from the store."""
        if (
            db.get_meta(self.conn, "tokenizer_version") != TOKENIZER_VERSION
            or db.get_meta(self.conn, "lexical_fields") != LEXICAL_FIELDS_VERSION
        ):
            from clawkb.ingest.sync import rebuild_lexical

            rebuild_lexical(self.repo, self.lexical, self.config.index_batch_chunks)
            with self.repo.transaction():
                db.set_meta(self.conn, "tokenizer_version", TOKENIZER_VERSION)
                db.set_meta(self.conn, "lexical_fields", LEXICAL_FIELDS_VERSION)

    def _refresh_reader(self) -> None:
        """Readers: move to the newest published generation (cheap when nothing changed)."""
        now = time.monotonic()
        if self._superseded:
            keep = []
            for at, old in self._superseded:
                if now - at >= READER_GRACE_S:
                    old.close()
                else:
                    keep.append((at, old))
            self._superseded = keep
        if self.lexical.writable or not self.lexical.is_stale():
            return
        new = self._open_lexical(writable=False)
        self.view_token = None
        # Another thread may still be inside a search on the old generation:
        # keep its lease a little while instead of releasing it at once.
        self._superseded.append((now, self.lexical))
        self.lexical = new

    def ensure_fresh(self) -> list[str]:
        """Before a read: see the newest published index generation; returns warnings.

        Every read path (search, recall, context, embed) calls this one method.
        Readers never write (issue 20): an index behind the store is served as
        it is, with a warning, while a writer brings it up to date; an index
        with nothing sound to serve (damaged, built from another store, ahead
        of the store) is repaired by a writer while this read waits. The writer
        is the host's (:attr:`repair_handler`: the server's writer thread) or a
        background thread of this process under the write lock
        (:func:`repair_in_background`); never the reading thread.
        """
        from clawkb.ingest.sync import index_problem, sync_lexical

        warnings = []
        memo = self.memo
        memo.check()
        tokenizer = memo.get(
            "tokenizer_version", lambda: db.get_meta(self.conn, "tokenizer_version")
        )
        if tokenizer != TOKENIZER_VERSION:
            warnings.append(
                "the index was built with another tokenizer version: run `clawkb reindex`"
            )
        # A pinned read (an open read transaction: a server view) keeps the
        # generation it was opened with: a newer one may be ahead of its snapshot.
        pinned = self.conn.in_transaction
        if not pinned:
            self._refresh_reader()
        top = memo.get("max_seq", self.repo.max_seq)
        problem = index_problem(self.repo, self.lexical, store_id=self.store_id, top=top)
        if problem is not None and not self.lexical.damaged and self.lexical.applied_seq > top:
            # the remembered seq may predate the generation just loaded: ask the store
            top = self.repo.max_seq()
            problem = index_problem(self.repo, self.lexical, store_id=self.store_id, top=top)
        behind = self.lexical.applied_seq < top or self.lexical.applied_seq < 0
        if problem is None and not behind:
            return warnings
        if self._writing:  # this object holds the write lock: it is the writer
            sync_lexical(self.repo, self.lexical, self.config.index_batch_chunks)
            if problem is not None:
                warnings.append(f"repaired: {problem}")
            return warnings
        if self._writer_active():  # a writer is at work: it catches the index up
            if problem is not None:
                raise IndexError_(
                    f"{problem}; another process is writing — try again when it finishes,"
                    " or run `clawkb doctor --repair`"
                )
            warnings.append("an indexing run is in progress; results may be incomplete")
            return warnings
        if problem is None and not pinned:  # a writer may have published and left just now
            self._refresh_reader()
            if 0 <= top <= self.lexical.applied_seq:
                return warnings
        if problem is None and (self.lexical.applied_seq < 0 or not self.lexical.segments):
            problem = f"{self.lexical.folder}: no usable index generation (it must be rebuilt)"
        repair = self._hand_off_repair()
        if problem is None:
            warnings.append(
                f"the index is {max(top - self.lexical.applied_seq, 1)} change(s) behind the"
                " store (a write stopped early); a writer is catching it up — results may be"
                " incomplete"
            )
            return warnings
        self._wait_for_repair(repair, problem, pinned)
        warnings.append(f"repaired: {problem}")
        return warnings

    #: Set by a host that has its own writer (the server): ``fn(suspect) -> Future`` that
    #: runs :meth:`repair_index` there. ``None``: :func:`repair_in_background`.
    #: ``suspect``: a damaged segment a search found (the repair checksums every file).
    repair_handler: Callable[[str | None], Future[list[str]]] | None = None

    def _writer_active(self) -> bool:
        from clawkb.store.locking import is_locked

        try:
            return is_locked(self.home / LOCK_NAME)
        except OSError:  # a read-only KB folder: no writer here
            return False

    def _hand_off_repair(self, suspect: str | None = None) -> Future[list[str]]:
        handler = self.repair_handler
        fut = handler(suspect) if handler is not None else repair_in_background(self.home, suspect)
        if not hasattr(self, "_handed_off"):
            self._handed_off: list[Future[list[str]]] = []
        self._handed_off = [f for f in self._handed_off if not f.done()]
        if fut not in self._handed_off:
            self._handed_off.append(fut)
        return fut

    def _wait_for_repair(self, repair: Future[list[str]], problem: str, pinned: bool) -> None:
        """Wait for a writer's repair of an index with nothing sound to serve, then
        read the repaired generation (one-line ``IndexError_`` when it cannot be had)."""
        try:
            repair.result(timeout=REPAIR_WAIT_S)
        except LockedError:
            raise IndexError_(
                f"{problem}; another process is writing — try again when it finishes,"
                " or run `clawkb doctor --repair`"
            ) from None
        except TimeoutError:
            raise IndexError_(
                f"{problem}; a writer is repairing it — try again in a moment"
            ) from None
        except Exception as exc:
            first = (str(exc) or type(exc).__name__).splitlines()[0]
            raise IndexError_(
                f"{problem}; repairing it failed ({first}); run `clawkb doctor --repair`"
            ) from None
        if pinned:
            db.end_read(self.conn)  # the old snapshot predates the repaired generation
        self.view_token = None
        self.memo.clear()
        old = self.lexical
        self.lexical = self._open_lexical(writable=False)
        old.close()
        if self.lexical.damaged:
            raise IndexError_(f"{self.lexical.damaged}; run `clawkb doctor --repair`")

    def repair_index(self, wait: float = 30.0, suspect: str | None = None) -> list[str]:
        """Writers: bring the lexical index up to date with the store (a damaged one
        is rebuilt from it); the repairs done, one line each. ``suspect``: the
        damage a search found inside a segment (every file is checksummed, so the
        changed one is found and the index rebuilt)."""
        from clawkb.ingest.sync import sync_lexical

        with self.writer(wait=wait, full_check=suspect is not None):
            sync_lexical(self.repo, self.lexical, self.config.index_batch_chunks)
        return list(self.repairs)

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
            return self._after_write(self._ingestor().index_paths(paths, progress, include))

    def index_texts(
        self, records: Iterable[TextRecord], *, progress: Progress | None = None
    ) -> IndexReport:
        """Index in-memory documents keyed by ``record.path``."""
        with self.writer():
            return self._after_write(self._ingestor().index_records(records, progress))

    def _after_write(self, report: IndexReport) -> IndexReport:
        """With a Milvus backend, replay the new changes there (clawkb.backends)."""
        backend = self._backend()
        return report if backend is None else backend.after_write(self, report)

    def reindex(self) -> int:
        """Rebuild the lexical index from the store; returns the chunk count.

        The new index is built beside the current one without the write lock
        (readers keep the old one, other writers keep writing), then switched
        to under the lock in one short step (:mod:`clawkb.ingest.reindex`). If
        the store cannot be read, the old index stays as it was.
        """
        from clawkb.ingest.reindex import adopt_build, build_detached, remove_stale_builds

        root = self.home / "index"
        with self.job_lock("reindex"):
            remove_stale_builds(root)
            build = build_detached(
                self.repo, root, self.lexical.params, self.config.index_batch_chunks
            )
            try:
                with self.writer():
                    return adopt_build(self.repo, self.lexical, build)
            finally:
                build.close()

    def _ingestor(self) -> Ingestor:
        from clawkb.ingest.pipeline import Ingestor
        from clawkb.plugins import load_group

        # clawkb.ingest_hooks by order: boards + pin aliases of datasheet files, then
        # trust tier, domain and links (clawkb.plugins)
        hooks = tuple(hook.for_kb(self) for _, hook in load_group("clawkb.ingest_hooks"))
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
        filters: Filters | None = None,
        snippets: bool = True,
        knowledge: KnowledgeOptions | None = None,
        features: Mapping[str, Any] | None = None,
        **retrieval: object,
    ) -> SearchResult:
        """Search: build a :class:`~clawkb.retrieve.query.Query` and run the one pipeline.

        ``boards`` boosts those boards' datasheets; ``board_only`` keeps them +
        generic only. ``mode`` (lexical | dense | hybrid | auto), ``filters``
        (:class:`clawkb.retrieve.filters.Filters`) and ``retrieval`` overrides
        (fusion weights, rerank, ... — the ``retrieval:`` settings) apply with or
        without boards; an unknown keyword raises ``ConfigError``. ``snippets=False``
        leaves snippets and highlights out, and matched terms below the top hit
        (evaluation needs only the ranking). ``features`` are read by the query stages
        (``clawkb.query_stages`` plugins; a plugin's search options arrive here).
        """
        from clawkb.retrieve.query import Query

        globs = (path_glob,) if isinstance(path_glob, str) else tuple(path_glob or ())
        features = dict(features or {})
        if boards:  # the boards stage (clawkb.hardware.stage) reads these
            features.update(boards=tuple(boards), board_only=board_only)
        q = Query.make(
            query,
            limit=limit,
            mode=mode,
            filters=filters,
            path_globs=globs,
            options=retrieval,
            explain=explain,
            include_memory=include_memory,
            snippets=snippets,
            knowledge=knowledge,  # trust tiers, domains, graph (clawkb.knowledge.stage)
            features=MappingProxyType(features),
        )
        return self.run_query(q)

    def board_fields(self, boards: Sequence[str], only: bool) -> BoardFields:
        """The :class:`Query` fields of a board search (board names live in the store;
        the boards stage, :mod:`clawkb.hardware.stage`, asks for them)."""
        from clawkb.hardware.ranking import board_restriction

        return board_restriction(self, boards, only=only)

    @property
    def source(self) -> Source:
        """Where searches get their candidates, picked once from the config: the local
        store and index, or the Milvus collection of ``backend:``."""
        if self._source is None:
            backend = self._backend()
            if backend is None:
                from clawkb.retrieve.source import LocalSource

                self._source = LocalSource(self)
            else:
                self._source = backend.source(self)
        return self._source

    def _backend(self) -> Backend | None:
        """The ``clawkb.backends`` plugin of the ``backend:`` setting's ``kind`` (it reads
        and checks the rest of the setting), or None for ``local``."""
        raw = self.config.backend
        kind = raw.get("kind", DEFAULT_BACKEND) if isinstance(raw, Mapping) else raw
        if kind == "local":
            return None
        from clawkb.plugins import load_plugin

        try:  # a string other than `local` goes to the default backend, which refuses it
            name = str(kind) if isinstance(raw, Mapping) else DEFAULT_BACKEND
            # the group's contract (docs/plugins.md): the entry point is a Backend
            return cast("Backend", load_plugin("clawkb.backends", name, "backend kind"))
        except ConfigError as exc:
            raise ConfigError(f"{self.home / 'config.yaml'}: {exc}") from exc

    def run_query(self, q: Query, *, source: Source | None = None) -> SearchResult:
        """Run a prepared query through the retrieval pipeline (index made current first).

        A segment found damaged while searching (a change the quick check on open
        cannot see) is handed to a writer, which checksums every file and rebuilds
        the index from the store; this read waits for it and runs once more on the
        repaired generation (readers never write), or fails with one line.
        """
        warnings = self.ensure_fresh()
        try:
            res = self.run_prepared(q, source=source)
        except IndexCorruptError as exc:
            self._repair_found_damage(str(exc))
            res = self.run_prepared(q, source=source)
            warnings.append(f"repaired: {exc}")
        res.warnings += warnings
        return res

    def _repair_found_damage(self, problem: str) -> None:
        """A search met ``problem`` (a damaged segment): a writer repairs, this read waits."""
        with _repairs_lock:
            repair = _damage_reported.get(problem)
        if self._writing or (repair is not None and repair.done()):  # once, never a loop
            raise IndexCorruptError(f"{problem}; run `clawkb doctor --repair`")
        pinned = self.conn.in_transaction
        if repair is None:  # the first read to meet it asks; the others wait for the same
            repair = self._hand_off_repair(suspect=problem)
            with _repairs_lock:
                _damage_reported.setdefault(problem, repair)
        self._wait_for_repair(repair, problem, pinned)

    def run_prepared(self, q: Query, *, source: Source | None = None) -> SearchResult:
        """Run ``q`` on ``source`` (default :attr:`source`) through the query stages
        (``clawkb.query_stages`` plugins, smallest ``order`` outermost: boards, then
        the knowledge stages) around the one pipeline; no freshness check."""
        from clawkb.plugins import load_group
        from clawkb.retrieve.pipeline import run

        src = source if source is not None else self.source
        settings = src.retriever.settings

        def call(sub: Query) -> SearchResult:
            return run(src, settings, sub)

        for _, stage in reversed(load_group("clawkb.query_stages")):
            call = functools.partial(_around, stage, self, run=call)
        return call(q)

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
        from clawkb.ingest.sync import index_problem

        try:
            warnings = self.ensure_fresh()
        except IndexError_ as exc:  # damaged while a writer runs: report, do not fail
            warnings = [str(exc)]
        db_path = self.home / db.DB_NAME
        size = sum(p.stat().st_size for p in self.home.glob(db.DB_NAME + "*") if p.is_file())
        last = runs_repo.last(self.conn)
        return {
            "home": str(self.home),
            "store": str(db_path),
            "store_bytes": size,
            "schema_version": int(db.get_meta(self.conn, "schema_version") or 0),
            "tokenizer_version": db.get_meta(self.conn, "tokenizer_version"),
            "clawkb_version": __version__,
            **self.repo.counts(),
            "store_id": self.store_id,
            "store_seq": self.repo.max_seq(),
            "lexical": {**self.lexical.status(), "native_kernel": NATIVE_AVAILABLE},
            "index_check": index_problem(self.repo, self.lexical) or "ok",
            "warnings": warnings + self.repairs,
            "dense": _dense_status(self),
            "backend": _backend_status(self),
            "last_run": (
                {"started_at": last[0], "finished_at": last[1], "status": self._run_state(last[2])}
                if last
                else None
            ),
        }

    def _run_state(self, status: str) -> str:
        """A run marked ``running`` whose writer lock nobody holds was killed: ``interrupted``
        (the next run records that in the store)."""
        from clawkb.store.locking import is_locked

        if status == "running" and not is_locked(self.home / LOCK_NAME):
            return "interrupted"
        return status

    def runs(self, limit: int = 20) -> list[dict[str, Any]]:
        """The last indexing runs, newest first (roots, status, counts, failed files)."""
        import json

        def errors(run_id: int) -> list[dict[str, str]]:
            return [
                {"path": p, "reason": r or ""} for p, r in runs_repo.failures(self.conn, run_id)
            ]

        rows = runs_repo.newest(self.conn, limit)
        return [
            {
                "id": r[0],
                "started_at": r[1],
                "finished_at": r[2],
                "status": self._run_state(r[3]),
                "roots": json.loads(r[4] or "[]"),
                "counts": json.loads(r[5] or "{}"),
                "errors": errors(r[0]),
            }
            for r in rows
        ]


_repairs: dict[Path, Future[list[str]]] = {}
_repairs_lock = threading.Lock()
#: Damage a search of this process found, and the writer's repair of it (each once).
_damage_reported: dict[str, Future[list[str]]] = {}


def repair_in_background(home: Path, suspect: str | None = None) -> Future[list[str]]:
    """Run :meth:`KnowledgeBase.repair_index` for ``home`` on a thread of its own
    (its own connection, under the write lock); one at a time per KB folder."""
    with _repairs_lock:
        fut = _repairs.get(home)
        if fut is not None and not fut.done():
            return fut
        if fut is not None and fut.exception() is not None:
            failed_at = getattr(fut, "failed_at", 0.0)
            if time.monotonic() - failed_at < REPAIR_RETRY_S:  # e.g. a full disk: not every read
                return fut
        fut = _repairs[home] = Future()

    def run() -> None:
        if not fut.set_running_or_notify_cancel():
            return
        try:
            with KnowledgeBase.open(home) as kb:
                fut.set_result(kb.repair_index(suspect=suspect))
        except BaseException as exc:
            fut.failed_at = time.monotonic()  # type: ignore[attr-defined]
            fut.set_exception(exc)

    threading.Thread(target=run, name="clawkb-repair", daemon=True).start()
    return fut


class QueryStage(Protocol):
    """A ``clawkb.query_stages`` plugin: it wraps the pipeline (boards, knowledge)."""

    def around(
        self, kb: KnowledgeBase, q: Query, run: Callable[[Query], SearchResult]
    ) -> SearchResult: ...


def _around(
    stage: QueryStage, kb: KnowledgeBase, q: Query, *, run: Callable[[Query], SearchResult]
) -> SearchResult:
    return stage.around(kb, q, run)


def _dense_status(kb: KnowledgeBase) -> dict[str, Any] | None:
    from clawkb.embed.run import dense_status

    return dense_status(kb)


def _backend_status(kb: KnowledgeBase) -> dict[str, object]:
    backend = kb._backend()
    return {"kind": "local"} if backend is None else backend.status(kb)


def __getattr__(name: str) -> object:
    """``TextRecord`` and ``IndexReport`` load the ingest side on first use only,
    so opening a KB to search stays fast."""
    if name in ("TextRecord", "IndexReport"):
        from clawkb.ingest import pipeline

        return getattr(pipeline, name)
    raise AttributeError(name)
