"""The server's writes, run in a child process of their own.

The server's searches are Python under one interpreter lock; a write job
(tokenizing, inverting, committing, publishing segments, embedding) used to run
on a thread of the same process and took that lock from the searches in
bursts. :class:`WriterProcess` runs such jobs in one long-lived child instead,
started on first use with the ``spawn`` method: a fresh interpreter that holds
none of the server's open files or sockets, only its end of one pipe, the
standard streams (so its warnings reach the server's log) and multiprocessing's
own resource-tracker pipe. It is started and has imported the KB code before a
job holds the readers off (:meth:`WriterProcess.ensure_started`).

A job is a :class:`Remote`: a module-level function and its arguments, so it
can be pickled to the child; the child runs it on its own writing
:class:`~clawkb.kb.KnowledgeBase` and sends back the result or the exception.
The server keeps the queue, the job names and the status (:mod:`.runtime`);
its reader views see the child's commits as they see another process's (the
manifest and WAL stamps), and renew after each job like after a local write.

A child that dies mid-job (killed, out of memory) fails that job with
:class:`WriterDied`; the next job starts a new child. What the dead child
committed is what a killed terminal ``index`` leaves: the readers keep serving
the last generation the index published, and the next write catches up.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import pickle
import threading
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

from clawkb.errors import ClawkbError, WriterDied

if TYPE_CHECKING:
    from multiprocessing.process import BaseProcess

    from clawkb.kb import KnowledgeBase

T = TypeVar("T")

#: How long a job may take before the server stops waiting for its answer (a day:
#: jobs end by themselves; this only bounds a child that hangs without dying).
JOB_TIMEOUT = 24 * 3600.0


class Remote(Generic[T]):
    """A write job that can run in the writer process: ``func(kb, *args, **kwargs)``,
    ``func`` defined at a module's top level (it is pickled by name)."""

    def __init__(self, func: Callable[..., T], *args: object, **kwargs: object) -> None:
        self.func, self.args, self.kwargs = func, args, kwargs

    def __call__(self, kb: KnowledgeBase) -> T:
        return self.func(kb, *self.args, **self.kwargs)

    def __repr__(self) -> str:
        return f"Remote({self.func.__module__}.{self.func.__qualname__})"


class WriterProcess:
    """One child process that runs :class:`Remote` jobs one at a time (the caller, the
    runtime's job thread, sends the next one only after the answer)."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self._proc: BaseProcess | None = None
        self._conn: Connection | None = None
        self._lock = threading.Lock()
        self.starts = 0

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def _start(self) -> None:
        ctx = multiprocessing.get_context("spawn")
        parent, child = ctx.Pipe(duplex=True)
        proc = ctx.Process(
            target=_child_main,
            args=(child, str(self.home)),
            name="clawkb-writer",
            daemon=True,
        )
        proc.start()
        child.close()
        self._proc, self._conn = proc, parent
        self.starts += 1

    def _stop(self) -> None:
        conn, proc = self._conn, self._proc
        self._conn = self._proc = None
        if conn is not None:
            conn.close()
        if proc is not None:
            proc.join(5)
            if proc.is_alive():
                proc.kill()
                proc.join(5)

    def ensure_started(self) -> None:
        """Start the child when none runs, and wait until it has imported what jobs
        need (a fresh interpreter takes a while on a busy machine: the runtime calls
        this before it holds the readers off for the job)."""
        with self._lock:
            if self._proc is not None and self._proc.is_alive():
                return
            self._stop()
            self._start()
            conn, proc = self._conn, self._proc
            assert conn is not None and proc is not None
            try:
                _wait_reply(conn, proc)  # ("ready", pid)
            except (EOFError, OSError) as exc:
                proc.join(5)
                self._stop()
                raise WriterDied(f"the writer process did not start ({_how(proc)})") from exc

    def run(self, job: Remote[T], config_version: int, name: str = "write") -> T:
        """Run ``job`` in the child (started now if none runs) and return its result or
        raise its exception; :class:`WriterDied` when the child ended meanwhile (the
        next call starts a new one)."""
        self.ensure_started()
        with self._lock:
            conn, proc = self._conn, self._proc
            if conn is None or proc is None:
                raise WriterDied(f"{name}: the writer process stopped")
            assert conn is not None and proc is not None
            try:
                conn.send(("job", config_version, job))
                reply = _wait_reply(conn, proc)
            except (EOFError, OSError) as exc:
                proc.join(5)
                self._stop()
                raise WriterDied(
                    f"{name}: the writer process ended during the job ({_how(proc)});"
                    " the job did not finish, a new writer starts for the next one"
                ) from exc
        kind, value = reply
        if kind == "ok":
            return cast(T, value)  # what job.func returned, through pickle
        raise value

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                with contextlib.suppress(OSError):
                    self._conn.send(("stop", 0, None))
            self._stop()


def _wait_reply(conn: Connection, proc: BaseProcess) -> tuple[str, Any]:
    """The child's answer; EOFError when it ended before giving one."""
    waited = 0.0
    while not conn.poll(0.5):
        waited += 0.5
        if not proc.is_alive():
            raise EOFError("writer process ended")
        if waited > JOB_TIMEOUT:
            proc.kill()
            raise EOFError("writer process timed out")
    reply: tuple[str, Any] = conn.recv()
    return reply


def _how(proc: BaseProcess) -> str:
    code = proc.exitcode
    if code is None:
        return "no answer"
    if code < 0:
        return f"signal {-code}"
    return f"exit status {code}"


# -- the child ------------------------------------------------------------


def _child_main(conn: Connection, home: str) -> None:
    """The writer process: open the KB once (again when the settings changed), run each
    job as the server's writer thread did, answer with the result or the error."""
    from clawkb.kb import KnowledgeBase
    from clawkb.server import heap

    heap.configure()
    kb: KnowledgeBase | None = None
    config_seen = -1
    try:
        conn.send(("ready", os.getpid()))
        while True:
            try:
                kind, config_version, job = conn.recv()
            except (EOFError, OSError):  # the server went away
                break
            if kind == "stop":
                break
            try:
                if kb is not None and config_version != config_seen:
                    kb.close()
                    kb = None
                if kb is None:
                    kb = KnowledgeBase.open(Path(home))
                    config_seen = config_version
                result = job(kb)
                warm_dense(kb)
                heap.after_write()
                reply: tuple[str, Any] = ("ok", result)
            except BaseException as exc:  # handed back to the waiting request
                if isinstance(exc, KeyboardInterrupt | SystemExit):
                    raise
                reply = ("err", _portable(exc))
            try:
                conn.send(reply)
            except (pickle.PicklingError, TypeError, AttributeError) as exc:
                conn.send(("err", RuntimeError(f"the job's answer cannot be sent back: {exc}")))
    finally:
        if kb is not None:
            kb.close()


def _portable(exc: BaseException) -> BaseException:
    """``exc`` when it survives pickling (its type and message then reach the client);
    else a plain error with the same line."""
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:
        if isinstance(exc, ClawkbError):
            out = ClawkbError(str(exc))
            out.http_status, out.code = exc.http_status, exc.code  # type: ignore[misc]
            return out
        return RuntimeError(f"{type(exc).__name__}: {exc}")


def warm_dense(kb: KnowledgeBase) -> None:
    """After a write: bring the dense search copy (``index/dense``) up to the new vectors,
    so the reader views renewed next load it ready-made instead of each finding it
    stale and rebuilding it on a request thread."""
    from clawkb.embed import vectors

    if vectors.stored_signature(kb.conn) is None:
        return
    from clawkb.retrieve.pipeline import retriever_for

    with contextlib.suppress(Exception):  # a damaged copy is the readers' to report
        retriever_for(kb).dense_index().refresh()
