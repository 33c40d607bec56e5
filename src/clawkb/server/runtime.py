"""One process, many readers, one writer.

* Readers: every worker thread keeps its own :class:`KnowledgeBase` (one
  SQLite connection per thread) and reopens it after each write this process
  made, so it never serves an index older than the store it reads.
* Writer: one thread owns the writing :class:`KnowledgeBase` and runs jobs
  from a queue in order (index, upload, memory, pins, watch runs, embedding).
  Each job still takes the KB's file lock, so a CLI ``index`` and the server
  never write at once.
* Gate: while a job writes, reads wait (a readers-writer gate); a job is
  short (a watch batch, one upload), so a search waits at most that long and
  never sees the store ahead of the index.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import queue
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from clawkb.kb import KnowledgeBase

T = TypeVar("T")
Job = tuple[Callable[[KnowledgeBase], Any], "concurrent.futures.Future[Any]"]


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


class Runtime:
    """Reader connections, the writer thread and the gate between them."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.gate = Gate()
        self.generation = 0
        self._local = threading.local()
        self._opened: list[KnowledgeBase] = []
        self._opened_lock = threading.Lock()
        self._jobs: queue.Queue[Job | None] = queue.Queue()
        self._seq = itertools.count()
        self.queued = 0
        self.current_job: str | None = None
        self.last_write: float | None = None
        self._writer = threading.Thread(target=self._write_loop, name="clawkb-writer", daemon=True)
        self._writer.start()

    # -- reads ------------------------------------------------------------
    def reader(self) -> KnowledgeBase:
        """This thread's KB, reopened when the writer committed since it was opened."""
        kb = getattr(self._local, "kb", None)
        if kb is None or self._local.generation != self.generation:
            if kb is not None:
                kb.close()
                with self._opened_lock:
                    self._opened.remove(kb)
            gen = self.generation
            kb = KnowledgeBase.open(self.home)
            with self._opened_lock:
                self._opened.append(kb)
            self._local.kb, self._local.generation = kb, gen
        return kb

    def read_sync(self, fn: Callable[[KnowledgeBase], T]) -> T:
        with self.gate.read():
            return fn(self.reader())

    async def read(self, fn: Callable[[KnowledgeBase], T]) -> T:
        import anyio.to_thread

        return await anyio.to_thread.run_sync(self.read_sync, fn)

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

    async def write(self, fn: Callable[[KnowledgeBase], T], name: str = "write") -> T:
        return await asyncio.wrap_future(self.submit(fn, name))

    def _write_loop(self) -> None:
        kb: KnowledgeBase | None = None
        while True:
            item = self._jobs.get()
            if item is None:
                break
            fn, fut = item
            self.queued -= 1
            if not fut.set_running_or_notify_cancel():
                continue
            self.current_job = getattr(fut, "job_name", "write")
            try:
                if kb is None:
                    kb = KnowledgeBase.open(self.home)
                if getattr(fut, "gated", True):
                    with self.exclusive():
                        result = fn(kb)
                else:
                    result = fn(kb)
                fut.set_result(result)
            except BaseException as exc:  # handed to the waiting request
                fut.set_exception(exc)
            finally:
                self.current_job = None
        if kb is not None:
            kb.close()

    def close(self) -> None:
        self._jobs.put(None)
        self._writer.join(timeout=30)
        with self._opened_lock:
            for kb in self._opened:
                kb.close()
            self._opened.clear()
