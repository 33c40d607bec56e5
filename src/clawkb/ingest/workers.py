"""A small pool of persistent ingest worker processes with ordered results.

Workers are fresh interpreters (``python -m clawkb.ingest.workers``), not
forks of the caller: they share none of its memory or threads and never
re-import the caller's script (the ``spawn``/``forkserver`` start methods
would). A task names a function as ``"module:function"`` plus its pickled
arguments; frames are ``<8-byte length><pickle>`` over the worker's stdin and
stdout. Results come back in submission order, so whatever the parent does
with them (store writes, chunk ids) is the same for any worker count.

Memory stays bounded: at most ``window`` tasks are in flight per worker, and
:meth:`WorkerPool.imap` only reads ahead of its consumer by that much. A
worker that dies (killed, out of memory, a crash in C code) fails its tasks
with :class:`WorkerDied` and is replaced; a parent that dies closes the
workers' stdin, and they exit on end of input.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import pickle
import queue
import struct
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import IO, TypeVar, cast

_LEN = struct.Struct("<Q")

#: A task's arguments (they travel pickled, so any picklable values).
Args = tuple[object, ...]
#: What a worker is sent: the function's import name (``module:function``) and its arguments.
Task = tuple[str, Args]
A = TypeVar("A", bound=Args)


class WorkerDied(RuntimeError):
    """The worker running a task exited before answering."""


def default_workers() -> int:
    """One worker per CPU this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def _write_frame(fh: IO[bytes], obj: object) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    fh.write(_LEN.pack(len(data)))
    fh.write(data)
    fh.flush()


def _read_raw(fh: IO[bytes]) -> bytes:
    head = fh.read(_LEN.size)
    if len(head) < _LEN.size:
        raise EOFError
    (n,) = _LEN.unpack(head)
    data = fh.read(n)
    if len(data) < n:
        raise EOFError
    return data


def _read_frame(fh: IO[bytes]) -> object:
    return pickle.loads(_read_raw(fh))


def _read_task(fh: IO[bytes]) -> Task:
    # the parent's WorkerPool is the only writer of this pipe: a frame is a Task
    return cast("Task", _read_frame(fh))


def resolve(name: str) -> Callable[..., object]:
    module, _, func = name.partition(":")
    return getattr(importlib.import_module(module), func)


class _Worker:
    """One worker process and the thread that feeds it (so a large task being
    written never waits on a large result being read: no pipe deadlock)."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "clawkb.ingest.workers"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        self.outbox: queue.Queue[Task | None] = queue.Queue()
        self.feeder = threading.Thread(target=self._feed, daemon=True)
        self.feeder.start()

    def _feed(self) -> None:
        assert self.proc.stdin is not None
        while True:
            task = self.outbox.get()
            if task is None:
                break
            try:
                _write_frame(self.proc.stdin, task)
            except (BrokenPipeError, OSError, ValueError):
                break  # the worker died; the reader reports it
        with contextlib.suppress(OSError):
            self.proc.stdin.close()

    def receive(self) -> object:
        assert self.proc.stdout is not None
        try:
            data = _read_raw(self.proc.stdout)
        except (EOFError, OSError) as exc:
            code = self.proc.wait()
            raise WorkerDied(f"an ingest worker exited (status {code})") from exc
        try:
            ok, value = pickle.loads(data)
        except Exception as exc:  # e.g. an exception type that cannot be rebuilt
            raise RuntimeError(f"unreadable answer from an ingest worker: {exc}") from exc
        if not ok:
            raise value
        return value

    def close(self) -> None:
        self.outbox.put(None)
        self.feeder.join(timeout=5)
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()


class _Ticket:
    """One submitted task: filled in when its worker's answer is read."""

    __slots__ = ("args", "done", "func", "value", "worker")

    def __init__(self, func: str, args: Args, worker: int) -> None:
        self.func, self.args, self.worker = func, args, worker
        self.done = False
        self.value: object = None


class WorkerPool:
    """``n`` persistent workers; :meth:`imap` runs tasks and yields results in order.

    Each worker answers its tasks in the order it got them, whoever submitted
    them, so every task has a ticket in its worker's queue and reading an
    answer fills the oldest ticket: several streams (the ingest stream and an
    index batch started in the middle of it) share the workers safely.
    """

    def __init__(self, n: int, window: int = 2) -> None:
        self.n = max(1, n)
        self.window = max(1, window)
        self._workers: list[_Worker | None] = [None] * self.n
        self._queues: list[deque[_Ticket]] = [deque() for _ in range(self.n)]
        self._next = 0

    def _worker(self, i: int) -> _Worker:
        w = self._workers[i]
        if w is None:
            w = self._workers[i] = _Worker()
        return w

    def submit(self, func: str, args: Args) -> _Ticket:
        i = self._next
        self._next = (self._next + 1) % self.n
        ticket = _Ticket(func, args, i)
        self._queues[i].append(ticket)
        self._worker(i).outbox.put((func, args))
        return ticket

    def result(self, ticket: _Ticket) -> object:
        """The task's value, or the exception it raised (:class:`WorkerDied` if its
        worker exited while running it); never raises."""
        while not ticket.done:
            self._read_one(ticket.worker)
        return ticket.value

    def _read_one(self, i: int) -> None:
        head = self._queues[i].popleft()
        w = self._worker(i)
        try:
            head.value = w.receive()
        except WorkerDied as exc:
            # Tasks queued behind the lost one on this worker are lost too:
            # resubmit them, in order, to a fresh worker.
            w.close()
            self._workers[i] = None
            fresh = self._worker(i)
            for t in self._queues[i]:
                fresh.outbox.put((t.func, t.args))
            head.value = exc
        except Exception as exc:  # the task raised: pass it on
            head.value = exc
        head.done = True

    def imap(self, func: str, args: Iterable[A]) -> Iterator[tuple[A, object]]:
        """``(a, func(*a))`` for each ``a``, in order; a failed task yields its exception.

        The task's exception (or :class:`WorkerDied`) is yielded, not raised,
        so the caller decides what one bad task means; the rest go on. At most
        ``window`` tasks per worker are submitted ahead of the consumer.
        """
        inflight: deque[tuple[A, _Ticket]] = deque()
        limit = self.n * self.window
        it = iter(args)
        exhausted = False
        while True:
            while not exhausted and len(inflight) < limit:
                try:
                    task = next(it)
                    inflight.append((task, self.submit(func, task)))
                except StopIteration:
                    exhausted = True
            if not inflight:
                return
            task, ticket = inflight.popleft()
            yield task, self.result(ticket)

    def map(self, func: str, args: Iterable[Args]) -> list[object]:
        """All at once; the first failure is raised after every task has ended."""
        tickets = [self.submit(func, a) for a in args]
        out = [self.result(t) for t in tickets]
        for r in out:
            if isinstance(r, BaseException):
                raise r
        return out

    def close(self) -> None:
        for i, w in enumerate(self._workers):
            if w is not None:
                w.close()
                self._workers[i] = None
            self._queues[i].clear()

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _serve() -> int:
    """Worker loop: read tasks until end of input, answer each with (ok, value)."""
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    # Anything a library prints must not corrupt the result stream.
    sys.stdout = sys.stderr
    while True:
        try:
            func, args = _read_task(stdin)
        except EOFError:
            return 0
        try:
            answer: tuple[bool, object] = (True, resolve(func)(*args))
        except Exception as exc:
            answer = (False, exc)
        try:
            _write_frame(stdout, answer)
        except (pickle.PicklingError, TypeError, AttributeError) as exc:
            _write_frame(stdout, (False, RuntimeError(f"unpicklable result: {exc}")))
        except BrokenPipeError:
            return 0


if __name__ == "__main__":
    sys.exit(_serve())
