"""One process, many readers, one writer.

* Readers: every worker thread keeps its own view (:class:`_Slot`): its own
  SQLite connection, the index loaded at one moment and a read transaction
  taken at that same moment, so a search sees the store and the index of one
  instant. A view is renewed after each write of this process (and when
  another process changed the index); searches never wait for a write.
* Writer: one thread owns the writing :class:`KnowledgeBase` and runs jobs
  from a queue in order (index, upload, memory, pins, watch runs, embedding).
  Each job still takes the KB's file lock, so a CLI ``index`` and the server
  never write at once.
* Gate: a write excludes view renewals (a readers-writer gate), so a view is
  never taken between a store commit and the index update that follows it.
  Long jobs (watch runs) take it per batch.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import itertools
import os
import queue
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from clawkb.config import Config

if TYPE_CHECKING:
    import anyio

    from clawkb.embed.base import Embedder
from clawkb.kb import KnowledgeBase
from clawkb.server import collector, heap, switching
from clawkb.server.views import LexicalShare
from clawkb.server.writer_process import Remote, WriterProcess, warm_dense
from clawkb.store import db

T = TypeVar("T")
#: Threads that run reads at once. Each keeps its own view, renewed after every write,
#: and searches are mostly Python under one GIL: more threads than this add renewals
#: and lock hand-offs, not throughput (requests beyond it wait their turn in order).
READER_THREADS = max(4, 2 * (os.cpu_count() or 1))
#: The search a server runs on itself at start (:meth:`Runtime.warm`): a word and a
#: Chinese one, so both tokenizers load.
WARM_QUERY = "warm up 预热"
Job = tuple[Callable[[KnowledgeBase], Any], "concurrent.futures.Future[Any]"]


def _warm_search(kb: KnowledgeBase) -> None:
    """:meth:`Runtime.warm`'s search, on the local store and index only (a remote
    backend that does not answer must not hold up the server's start)."""
    from clawkb.retrieve.source import LocalSource

    if isinstance(kb.source, LocalSource):
        kb.search(WARM_QUERY, limit=1)


class Gate:
    """A phase-fair readers-writer lock: a waiting writer holds off new readers, and
    readers that waited during a write get their turn before the next write."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._readers = 0
        self._writing = False
        self._waiting_writers = 0
        self._waiting_readers = 0
        self._readers_turn = False

    @contextmanager
    def read(self) -> Iterator[None]:
        with self._cond:
            self._waiting_readers += 1
            while self._writing or (self._waiting_writers and not self._readers_turn):
                self._cond.wait()
            self._waiting_readers -= 1
            self._readers += 1
            if not self._waiting_readers:
                self._readers_turn = False
                self._cond.notify_all()
        try:
            yield
        finally:
            with self._cond:
                self._readers -= 1
                if not self._readers:
                    self._cond.notify_all()

    def writing(self) -> bool:
        """A writer holds the gate or waits for it (a read would wait)."""
        return self._writing or self._waiting_writers > 0

    @contextmanager
    def write(self) -> Iterator[None]:
        with self._cond:
            self._waiting_writers += 1
            while self._writing or self._readers or self._readers_turn:
                self._cond.wait()
            self._waiting_writers -= 1
            self._writing = True
        try:
            yield
        finally:
            with self._cond:
                self._writing = False
                self._readers_turn = self._waiting_readers > 0
                self._cond.notify_all()


def _mtime(path: str) -> int:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return 0


def _stamp_paths(home: Path) -> tuple[str, str]:
    """The two files whose times :func:`_manifest_stamp` reads (fixed for a KB folder:
    the lexical index's manifest and the store's WAL)."""
    return str(home / "index" / "lexical" / "manifest.json"), str(home / (db.DB_NAME + "-wal"))


def _manifest_stamp(paths: tuple[str, str]) -> tuple[int, int]:
    """When the index was last published and the store last written (its WAL): a view
    renews when either moves, so another process's commits that leave the index as it
    is (``embed``, memory notes) are seen too. Checked before every read: plain
    ``os.stat`` on paths made once."""
    stamps = []
    for path in paths:
        try:
            stamps.append(os.stat(path).st_mtime_ns)
        except OSError:
            stamps.append(0)
    return stamps[0], stamps[1]


def _file_ids(paths: tuple[str, str]) -> tuple[Any, ...]:
    """(inode, size, mtime) of the two stamp files: a commit or a publish moves one."""
    out: list[Any] = []
    for path in paths:
        try:
            st = os.stat(path)
            out.append((st.st_ino, st.st_size, st.st_mtime_ns))
        except OSError:
            out.append(None)
    return tuple(out)


class _Slot:
    """One reader thread's view: its own connection, an index loaded at one moment,
    and an open read transaction on the store taken at that same moment.

    The index comes from the runtime's :class:`~clawkb.server.views.LexicalShare`:
    views renewing after the same write share one opened generation (and its
    memos); each keeps the one it took until its own next renewal.

    The view is renewed (index reloaded, new snapshot) when this process wrote
    (``generation``) or another process changed the index (manifest stamp).
    Renewal happens inside the gate, while no write is in progress; searches
    then run outside it, so they never see the store ahead of the index. While
    a write is in progress, a stale view is renewed without the gate on a
    second connection (:meth:`try_renew`) when the index and the store it then
    sees agree, and otherwise kept as it is when it already holds every write
    this process finished: a search waits for a write only when neither can
    serve it (a write finished since its view was taken, and the one running
    has store changes its index does not have yet). While another process is mid-run (store ahead of
    the index), the view stays unpinned and serves the index as it is, with a
    warning. A view that finds the index damaged asks the writer thread for the
    repair (:meth:`Runtime.request_repair`) and waits for it: readers never write.
    """

    def __init__(self, share: LexicalShare | None = None) -> None:
        self.lock = threading.Lock()
        #: where the views' lexical index comes from (one per generation and process)
        self.share = share
        self.owner = threading.current_thread()
        self.kb: KnowledgeBase | None = None
        #: the view before the last ungated renewal: its connection is the next one's
        self.spare: KnowledgeBase | None = None
        self.generation = -1
        self.config_version = 0
        self.stamp = (0, 0)
        self.paths = ("", "")  # set at the first renewal (the KB folder does not change)
        self.pinned = False

    def stale(self, generation: int, config_version: int = 0) -> bool:
        if self.kb is None or not self.pinned or self.generation != generation:
            return True
        if self.config_version != config_version:
            return True
        return _manifest_stamp(self.paths) != self.stamp

    def unpin(self) -> None:
        if self.kb is not None:
            db.end_read(self.kb.conn)
        self.pinned = False

    def renew(self, home: Path, generation: int, config_version: int = 0) -> None:
        self.unpin()
        if self.kb is None:
            self.kb = KnowledgeBase.open(home, lexical=self.share)
        else:  # same connection, the index loaded again (and the settings, when they changed)
            old = self.kb
            config = old.config if self.config_version == config_version else Config.load(home)
            self.kb = KnowledgeBase(self.kb.home, self.kb.conn, config, lexical=self.share)
            old.lexical.close()  # its lease and mapped files go now (the slot lock is held)
        self.config_version = config_version
        self.generation = generation
        self.paths = _stamp_paths(self.kb.home)
        self.stamp = _manifest_stamp(self.paths)
        before = _file_ids(self.paths)
        db.begin_read(self.kb.conn)
        top = self.kb.repo.max_seq()  # this read starts the snapshot
        if self.kb.lexical.applied_seq >= top:
            self.pinned = True
            self.kb.view_token = self._token(before, top)
        else:
            db.end_read(self.kb.conn)

    def _token(self, before: tuple[Any, ...], top: int) -> tuple[Any, ...] | None:
        """What names the data state of this pinned view (``KnowledgeBase.view_token``):
        the KB, its settings' version, this process's write generation, the index
        manifest's and the store's WAL file (inode, size, time) as they were before
        the snapshot started (``before``), and the store's change sequence in it. None
        (the view keeps a result cache of its own) when those files moved while the
        snapshot was being taken: a commit landed then, and the view may hold the
        state before it or after it."""
        if self.kb is None or _file_ids(self.paths) != before:
            return None
        home = str(self.kb.home)
        return (home, self.config_version, self.generation, before, self.kb.lexical.generation, top)

    def try_renew(self, home: Path, generation: int, config_version: int) -> bool:
        """Renew without the gate (a write is in progress), on the spare connection: the
        index is loaded first, then the store's snapshot taken; the new view is kept
        only when the store is not ahead of that index (no half-applied write in it)
        and the index is sound. False: the current view is left as it was."""
        if self.kb is None or self.config_version != config_version:
            return False
        if self.spare is None:
            self.spare = KnowledgeBase.open(home, lexical=self.share)
            self.spare.lexical.close()
        stamp = _manifest_stamp(self.paths)
        kb = KnowledgeBase(self.spare.home, self.spare.conn, self.kb.config, lexical=self.share)
        before = _file_ids(self.paths)
        db.begin_read(kb.conn)
        top = kb.repo.max_seq()
        if kb.lexical.damaged or kb.lexical.applied_seq < top:
            db.end_read(kb.conn)
            kb.lexical.close()
            return False
        old = self.kb
        db.end_read(old.conn)
        old.lexical.close()  # its lease and mapped files go now (the slot lock is held)
        self.kb, self.spare = kb, old
        self.generation, self.stamp, self.pinned = generation, stamp, True
        kb.view_token = self._token(before, top)
        return True

    def close(self) -> None:
        for kb in (self.kb, self.spare):
            if kb is not None:
                kb.close()
        self.kb = self.spare = None


class Runtime:
    """Reader connections, the writer thread and the gate between them."""

    def __init__(
        self,
        home: Path,
        *,
        writer_process: bool = True,
        shared_writer: tuple[str, bytes] | None = None,
        follow_config: bool = False,
    ) -> None:
        self.home = home
        heap.configure()  # glibc: two arenas, before the reader threads start
        switching.configure()  # short GIL turns: the event loop is not kept waiting
        #: ``serve --workers``: another worker may rewrite config.yaml (the page's
        #: settings); its time is checked at most once a second before a read
        self._follow = follow_config
        self._config_path = str(home / "config.yaml")
        self._config_stamp = _mtime(self._config_path)
        self._config_checked = time.monotonic()
        self._stamp_paths = _stamp_paths(home)
        self.gate = Gate()
        #: where :class:`Remote` jobs run; None: on the writer thread, as any other job;
        #: ``shared_writer``: the one writer of all ``serve --workers`` processes
        self.writer_process = WriterProcess(home, shared_writer) if writer_process else None
        self.generation = 0
        self.config_version = 0  # bumped when config.yaml was rewritten (the page's settings)
        self._writer_config = 0
        self._local = threading.local()
        #: the lexical generation the views share (opened once per write, not per view)
        self.lexical_share = LexicalShare()
        self._slots: list[_Slot] = []
        self._opened_lock = threading.Lock()
        self._repair: concurrent.futures.Future[list[str]] | None = None
        self._limiter: anyio.CapacityLimiter | None = None
        self._embedder: tuple[int, Any] | None = None
        self._retired: list[Any] = []  # embedders of an older config, stopped at close
        self._jobs: queue.Queue[Job | None] = queue.Queue()
        self._seq = itertools.count()
        self.queued = 0
        self.current_job: str | None = None
        self.last_write: float | None = None
        self._writer = threading.Thread(target=self._write_loop, name="clawkb-writer", daemon=True)
        self._writer.start()

    # -- reads ------------------------------------------------------------
    def _slot(self) -> _Slot:
        slot: _Slot | None = getattr(self._local, "slot", None)
        if slot is None:
            slot = self._local.slot = _Slot(self.lexical_share)
            with self._opened_lock:
                self._slots.append(slot)
            self._close_orphans()
        return slot

    def _close_orphans(self) -> None:
        """Close the views of reader threads that have ended. The thread pool lets idle
        threads go and starts new ones under load; each new thread opens a view
        (a connection, an index, a spare), and the ended ones' views were kept
        for the life of the server: memory that grew with every burst."""
        with self._opened_lock:
            gone = [slot for slot in self._slots if not slot.owner.is_alive()]
            self._slots = [slot for slot in self._slots if slot not in gone]
        for slot in gone:
            with slot.lock:  # its thread has ended: nobody else takes it
                slot.close()

    def read_sync(self, fn: Callable[[KnowledgeBase], T]) -> T:
        """Run ``fn`` on this thread's pinned view (see :class:`_Slot`)."""
        if self._follow and time.monotonic() - self._config_checked >= 1.0:
            self._follow_config()
        slot = self._slot()
        with slot.lock:
            generation, config_version = self.generation, self.config_version
            if slot.stale(generation, config_version):
                if not (self.gate.writing() and self._renew_during_write(slot, generation)):
                    with self.gate.read():  # the writer is between writes: store and index agree
                        slot.renew(self.home, self.generation, self.config_version)
                slot.kb.repair_handler = self.request_repair  # type: ignore[union-attr]
                self.share_embedder(slot.kb)  # type: ignore[arg-type]
                heap.saw_change(slot.stamp)  # another process's write too: memos age, pages go back
            return fn(slot.kb)  # type: ignore[arg-type]

    def _renew_during_write(self, slot: _Slot, generation: int) -> bool:
        """A write is in progress and ``slot`` is stale. Keep the view when it holds every
        write this process finished (it is stale only because the running write or
        another process committed meanwhile: one renewal after the write, not one
        per commit); else renew it without waiting when the store and the index
        agree. False: wait for the gate."""
        if (
            slot.kb is not None
            and slot.pinned
            and slot.generation == generation
            and slot.config_version == self.config_version
        ):
            return True
        try:
            return slot.try_renew(self.home, generation, self.config_version)
        except Exception:  # e.g. the index mid-replacement: the gated path says why
            return False

    def share_embedder(self, kb: KnowledgeBase) -> None:
        """Give ``kb`` the embedder every view and the writer share (per config version).

        A view is a new :class:`KnowledgeBase` after each write, and each would
        otherwise build its own embedder and load its model (an ONNX session,
        tokenizers) on its first query of every generation. The shared one runs
        the model in a child process (:mod:`clawkb.embed.worker`), started here
        when the KB first has vectors: its load holds no lock of this process,
        and searches stay lexical until it is ready."""
        from clawkb.embed.run import set_kb_embedder

        try:
            embedder = self.shared_embedder(kb)
        except Exception:  # a model that cannot load: each search says why itself
            return
        if embedder is not None:
            set_kb_embedder(kb, embedder)

    def shared_embedder(self, kb: KnowledgeBase, *, start: bool = False) -> Embedder | None:
        """The shared embedder of the current config, started now when the KB has
        vectors (or ``start``); None while it has none."""
        from clawkb.embed import vectors
        from clawkb.embed.base import options_for_vectors
        from clawkb.embed.worker import worker_embedder

        with self._opened_lock:
            shared = self._embedder
            if shared is None or shared[0] != self.config_version:
                if not start and vectors.stored_signature(kb.conn) is None:
                    return None  # lexical only: no model to build (yet)
                section = kb.config.embedding
                stored = vectors.stored_signature(kb.conn)
                options = options_for_vectors(section.model, section.options, stored)
                embedder = worker_embedder(section.model, options)
                if shared is not None:  # a view may still hold it: stopped at close
                    self._retired.append(shared[1])
                shared = self._embedder = (self.config_version, embedder)
            return shared[1]

    def lend_embedder(self, kb: KnowledgeBase) -> None:
        """Make ``kb`` (a KB this process opened besides the views: the ``/mcp`` tools')
        embed through the shared embedding worker too, never a model of its own in
        this process: it gets a stand-in that asks :meth:`share_embedder` for the
        worker at each use, so vectors that appear later are served the same way."""
        from clawkb.embed.run import set_kb_embedder

        set_kb_embedder(kb, _LentEmbedder(self, kb))  # type: ignore[arg-type]  # duck-typed

    def warm(self, timeout: float = 300.0) -> None:
        """At start, when the KB has vectors: start the embedding worker and wait until
        its model is loaded and has embedded one query, before any request."""

        def run(kb: KnowledgeBase) -> Embedder | None:
            from clawkb.embed import vectors
            from clawkb.embed.run import kb_embedder

            if vectors.stored_signature(kb.conn) is None:
                return None
            return kb_embedder(kb)

        with contextlib.suppress(Exception):  # a model that cannot load: searches say why
            embedder = self.read_sync(run)
            if embedder is not None and hasattr(embedder, "wait_ready"):
                embedder.wait_ready(timeout)
        # one search before the first request: the search path's modules, the
        # tokenizers' tables, the index and the decision model are loaded now, not
        # while the first clients wait (a third of a second each), and what they
        # hold is frozen out of full collections (collector.py)
        with contextlib.suppress(Exception):  # a damaged index: the first search says why
            self.read_sync(_warm_search)
        collector.freeze_now()

    def request_repair(self, suspect: str | None = None) -> concurrent.futures.Future[list[str]]:
        """A reader found the index behind or damaged (``suspect``: a damaged segment
        a search met): the writer thread repairs it (readers never write); one
        repair job queued at a time."""
        with self._opened_lock:
            fut = self._repair
            if fut is None or fut.done():
                from clawkb.server import write_jobs

                job = Remote(write_jobs.repair_index, suspect)
                fut = self._repair = self.submit(job, "repair")
            return fut

    def _release_idle(self) -> None:
        """After a write: idle views let go of their old snapshot (so the WAL can be reset)."""
        with self._opened_lock:
            slots = list(self._slots)
        for slot in slots:
            if slot.lock.acquire(blocking=False):
                try:
                    slot.unpin()
                finally:
                    slot.lock.release()

    async def read(self, fn: Callable[[KnowledgeBase], T]) -> T:
        import anyio
        import anyio.to_thread

        if self._limiter is None:  # made on the event loop, at the first read
            self._limiter = anyio.CapacityLimiter(READER_THREADS)
        return await anyio.to_thread.run_sync(self.read_sync, fn, limiter=self._limiter)

    def reload_config(self) -> None:
        """``config.yaml`` changed: every view and the writer read it again before their next use."""
        self._config_stamp = _mtime(self._config_path)
        self.config_version += 1

    def _follow_config(self) -> None:
        self._config_checked = time.monotonic()
        stamp = _mtime(self._config_path)
        if stamp != self._config_stamp:  # rewritten by another worker
            self._config_stamp = stamp
            self.config_version += 1

    # -- writes -----------------------------------------------------------
    def submit(
        self, fn: Callable[[KnowledgeBase], T], name: str = "write", *, gated: bool = True
    ) -> concurrent.futures.Future[T]:
        """Queue ``fn(kb)`` for the writer. ``gated=False``: the job takes
        :meth:`exclusive` itself around each part that writes (long jobs)."""
        fut: concurrent.futures.Future[T] = concurrent.futures.Future()
        fut.job_name = name  # type: ignore[attr-defined]
        fut.gated = gated  # type: ignore[attr-defined]
        self.queued += 1
        self._jobs.put((fn, fut))
        return fut

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        """Hold off readers while writing; they reopen their KB afterwards."""
        with self.gate.write():
            try:
                yield
            finally:
                self.generation += 1
                self.last_write = time.time()
                self._release_idle()
        # readers not held off: what retired views freed goes to the OS; the views that
        # renew onto this state next do not count it again
        heap.saw_change(_manifest_stamp(self._stamp_paths))

    def writer_state(self) -> dict[str, Any]:
        """The writer process: its pid (None before the first job) and how many were started."""
        proc = self.writer_process
        if proc is None:
            return {"process": None, "starts": 0}
        return {"process": proc.pid, "starts": proc.starts}

    async def write(self, fn: Callable[[KnowledgeBase], T], name: str = "write") -> T:
        return await asyncio.wrap_future(self.submit(fn, name))

    def _write_loop(self) -> None:
        kb: KnowledgeBase | None = None  # for the jobs that run here (not a Remote)
        while True:
            item = self._jobs.get()
            if item is None:
                break
            fn, fut = item
            self.queued -= 1
            if not fut.set_running_or_notify_cancel():
                continue
            name = getattr(fut, "job_name", "write")
            self.current_job = name
            try:
                if isinstance(fn, Remote) and self.writer_process is not None:
                    self.writer_process.ensure_started()  # before the readers are held off
                    run = self._remote_runner(fn, name)
                else:
                    if kb is not None and self._writer_config != self.config_version:
                        kb.close()
                        kb = None
                    if kb is None:
                        self._writer_config = self.config_version
                        kb = KnowledgeBase.open(self.home)
                    self.share_embedder(kb)  # once vectors exist, the readers' model too
                    run = self._local_runner(fn, kb)
                if getattr(fut, "gated", True):
                    with self.exclusive():
                        result = run()
                else:
                    result = run()
                fut.set_result(result)
            except BaseException as exc:  # handed to the waiting request
                fut.set_exception(exc)
            finally:
                self.current_job = None
        if kb is not None:
            kb.close()

    def _remote_runner(self, job: Remote[T], name: str) -> Callable[[], Any]:
        """Run ``job`` in the writer process (:mod:`.writer_process`)."""
        writer = self.writer_process
        assert writer is not None
        return lambda: writer.run(job, self.config_version, name)

    @staticmethod
    def _local_runner(fn: Callable[[KnowledgeBase], Any], kb: KnowledgeBase) -> Callable[[], Any]:
        def run() -> object:
            result = fn(kb)
            warm_dense(kb)
            return result

        return run

    def close(self) -> None:
        self._jobs.put(None)
        self._writer.join(timeout=30)
        if self.writer_process is not None:
            self.writer_process.close()
        with self._opened_lock:
            for slot in self._slots:
                slot.close()
            self._slots.clear()
            self.lexical_share.close()
            embedders = [*self._retired, *(self._embedder[1:] if self._embedder else ())]
            self._embedder, self._retired = None, []
        for embedder in embedders:
            close = getattr(embedder, "close", None)
            if close is not None:
                close()


class _LentEmbedder:
    """A KB's embedder that is the runtime's shared worker (:meth:`Runtime.lend_embedder`):
    every attribute is the worker's, looked up when used (the worker is started at
    the first use if the views have not started it yet; its load runs in the child
    process, not here)."""

    def __init__(self, runtime: Runtime, kb: KnowledgeBase) -> None:
        self._runtime, self._kb = runtime, kb

    def _target(self) -> Embedder | None:
        return self._runtime.shared_embedder(self._kb, start=True)

    def __getattr__(self, name: str) -> object:
        return getattr(self._target(), name)
