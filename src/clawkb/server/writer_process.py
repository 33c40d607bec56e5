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
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

from clawkb.errors import ClawkbError, WriterDied
from clawkb.server import heap

if TYPE_CHECKING:
    from multiprocessing.process import BaseProcess

    from clawkb.kb import KnowledgeBase

T = TypeVar("T")

#: How long a worker waits for the shared writer to accept it (a new one is starting).
CONNECT_WAIT_S = 120.0
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
    runtime's job thread, sends the next one only after the answer).

    ``shared`` (``serve --workers N``): the writer is not this process's child but
    the one the workers' parent started (:func:`serve_shared`), reached on its
    socket ``(address, key)``; every worker sends its jobs there, and the writer
    runs them one at a time whichever worker sent them."""

    def __init__(self, home: Path, shared: tuple[str, bytes] | None = None) -> None:
        self.home = home
        self.shared = shared
        self._proc: BaseProcess | None = None
        self._conn: Connection | None = None
        self._lock = threading.Lock()
        self._pid: int | None = None
        self._pids: set[int] = set()
        self.starts = 0

    @property
    def pid(self) -> int | None:
        if self.shared is not None:
            return self._pid
        return self._proc.pid if self._proc is not None else None

    def _connect(self) -> None:
        """Reach the shared writer (waiting while the parent starts a new one)."""
        from multiprocessing.connection import Client

        assert self.shared is not None
        address, key = self.shared
        deadline = time.monotonic() + CONNECT_WAIT_S
        while True:
            try:
                conn = Client(address, family="AF_UNIX", authkey=key)
                _ready, pid = conn.recv()
                break
            except (OSError, EOFError) as exc:
                if time.monotonic() > deadline:
                    raise WriterDied(f"the shared writer process does not answer: {exc}") from exc
                time.sleep(0.1)
        self._conn, self._pid = conn, pid
        self._pids.add(pid)
        self.starts = len(self._pids)

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
            if self.shared is not None:
                if self._conn is None:
                    self._connect()
                return
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
            if conn is None or (proc is None and self.shared is None):
                raise WriterDied(f"{name}: the writer process stopped")
            try:
                conn.send(("job", config_version, job))
                reply = _wait_reply(conn, proc)
            except (EOFError, OSError) as exc:
                if proc is not None:
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
            if self._conn is not None and self.shared is None:
                with contextlib.suppress(OSError):
                    self._conn.send(("stop", 0, None))
            self._stop()


def _wait_reply(conn: Connection, proc: BaseProcess | None) -> tuple[str, Any]:
    """The child's answer; EOFError when it ended before giving one (``proc`` None: the
    shared writer, whose end closes the connection)."""
    waited = 0.0
    while not conn.poll(0.5):
        waited += 0.5
        if proc is not None and not proc.is_alive():
            raise EOFError("writer process ended")
        if waited > JOB_TIMEOUT:
            if proc is not None:
                proc.kill()
            raise EOFError("writer process timed out")
    reply: tuple[str, Any] = conn.recv()
    return reply


def _how(proc: BaseProcess | None) -> str:
    if proc is None:
        return "the shared writer's connection closed"
    code = proc.exitcode
    if code is None:
        return "no answer"
    if code < 0:
        return f"signal {-code}"
    return f"exit status {code}"


# -- the child ------------------------------------------------------------


class _Jobs:
    """The child's writing KB (opened again when a sender's settings changed) and the
    lock that runs one job at a time."""

    def __init__(self, home: str) -> None:
        self.home = home
        self.kb: KnowledgeBase | None = None
        self.seen: dict[int, int] = {}  # config version last sent, per sender
        self.lock = threading.Lock()

    def run(self, sender: int, config_version: int, job: Remote[Any]) -> tuple[str, Any]:
        from clawkb.kb import KnowledgeBase

        with self.lock:
            try:
                if self.kb is not None and self.seen.get(sender, config_version) != config_version:
                    self.kb.close()
                    self.kb = None
                self.seen[sender] = config_version
                if self.kb is None:
                    self.kb = KnowledgeBase.open(Path(self.home))
                result = job(self.kb)
                warm_dense(self.kb)
                heap.after_write()
                return ("ok", result)
            except BaseException as exc:  # handed back to the waiting request
                if isinstance(exc, KeyboardInterrupt | SystemExit):
                    raise
                return ("err", _portable(exc))

    def close(self) -> None:
        if self.kb is not None:
            self.kb.close()
            self.kb = None


def _answer(conn: Connection, jobs: _Jobs, sender: int, *, stop_on_request: bool) -> None:
    """Run the jobs one sender sends until it goes away (or asks to stop)."""
    while True:
        try:
            kind, config_version, job = conn.recv()
        except (EOFError, OSError):  # the sender went away
            return
        if kind == "stop":
            if stop_on_request:
                return
            continue
        reply = jobs.run(sender, config_version, job)
        try:
            conn.send(reply)
        except (pickle.PicklingError, TypeError, AttributeError) as exc:
            conn.send(("err", RuntimeError(f"the job's answer cannot be sent back: {exc}")))
        except OSError:
            return


def _child_main(conn: Connection, home: str) -> None:
    """The writer process: open the KB once (again when the settings changed), run each
    job as the server's writer thread did, answer with the result or the error."""
    heap.configure()
    jobs = _Jobs(home)
    try:
        conn.send(("ready", os.getpid()))
        _answer(conn, jobs, 0, stop_on_request=True)
    finally:
        jobs.close()


def serve_shared(address: str, key: bytes, home: str) -> None:
    """The shared writer of ``serve --workers N`` (started by the workers' parent, ended
    with it): accept each worker on ``address`` and run the jobs of all of them one at
    a time on one writing KB."""
    from multiprocessing.connection import Listener

    from clawkb.server.workers import die_with_parent

    die_with_parent()
    heap.configure()
    jobs = _Jobs(home)
    senders = 0
    with Listener(address, family="AF_UNIX", authkey=key) as listener:
        while True:
            try:
                conn = listener.accept()
            except (OSError, EOFError):  # a client that failed the handshake
                continue
            senders += 1
            conn.send(("ready", os.getpid()))
            threading.Thread(
                target=_answer, args=(conn, jobs, senders), kwargs={"stop_on_request": False},
                daemon=True,
            ).start()  # fmt: skip


def _shared_main() -> None:
    """``python -m clawkb.server.writer_process ADDRESS HOME``, the key on stdin."""
    import sys

    key = bytes.fromhex(sys.stdin.readline().strip())
    sys.stdin.close()
    serve_shared(sys.argv[1], key, sys.argv[2])


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


if __name__ == "__main__":
    _shared_main()
