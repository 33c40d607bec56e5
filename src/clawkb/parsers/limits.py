"""Per-file parse time limit (``Config.parse_timeout_s``), reusable by any parser.

Two ways to stop a parser that runs too long, chosen per parser:

* **Isolated** (parsers with ``isolate = True``: PDF, DOCX, XLSX, HTML): the
  parse runs in a forked worker process in its own process group, confined
  by :mod:`clawkb.parsers.sandbox` (none of the parent's descriptors, no
  secrets in its environment, not dumpable, no new privileges, resource
  limits, an allow-list seccomp filter: no sockets, ``exec``, file writes or
  reaching other processes; ``sandbox = False`` on a parser keeps the rest
  but drops the filter); on time-out
  the whole group is killed (so is its helper broker and what that started,
  such as ``tesseract``). This also stops C code that never returns to
  Python, and a worker that crashes (a segfault in a C library) or is
  stopped by the filter fails only its file. The result comes back pickled
  over a pipe. Cost: one ``fork`` per file, a few milliseconds. Isolated
  parsers run isolated even without a time limit.
* **In-process** (everything else, e.g. Markdown, where a fork per file would
  cost more than the parse): ``SIGALRM`` interrupts the parse at the next
  Python bytecode. It needs the main thread and a free interval timer;
  elsewhere the parse runs without a limit.

Either way a time-out is a :class:`ParseError` naming the file and the limit,
and the indexing run goes on with the next file.
"""

from __future__ import annotations

import contextlib
import faulthandler
import os
import pickle
import select
import signal
import threading
import time
import warnings
from collections.abc import Callable
from typing import Literal, TypeVar, TypeVarTuple

from clawkb.errors import ClawkbError, ParseError
from clawkb.parsers import sandbox
from clawkb.parsers.base import Parser
from clawkb.types import ParsedDocument

T = TypeVar("T")
Ts = TypeVarTuple("Ts")
#: What a forked worker sends back: its value, or why there is none.
_Payload = (
    tuple[Literal["ok"], T]
    | tuple[Literal["parse"], str, str]
    | tuple[Literal["error"], str]
    | tuple[Literal["crash"], str]
)

#: When the parse running in this process must end (``time.monotonic()``), if limited.
_deadline: float | None = None
#: True in a forked, sandboxed parse worker (a parser calling another parser runs it here).
_in_worker = False


def in_worker() -> bool:
    """Whether this process is an isolated parse worker (already sandboxed)."""
    return _in_worker


def time_left() -> float | None:
    """Seconds the current parse has left, or ``None`` when it runs without a limit.

    Lets a parser with optional slow work (OCR) skip it and say so instead of
    losing the whole file to the time limit.
    """
    return None if _deadline is None else _deadline - time.monotonic()


def parse_with_limit(parser: Parser, data: bytes, path: str, timeout_s: float) -> ParsedDocument:
    """``parser.parse(data, path)`` under the time limit (``<= 0`` means none)."""
    if getattr(parser, "isolate", False) and hasattr(os, "fork"):
        preload = getattr(parser, "preload", None)
        if preload is not None:
            preload()  # imports done once here, inherited by every forked worker
        return call_isolated(
            parser.parse,
            (data, path),
            timeout_s,
            path,
            parser.name,
            seccomp=getattr(parser, "sandbox", True),
            helpers=bool(getattr(parser, "helpers", ())),
        )
    if timeout_s <= 0:
        return parser.parse(data, path)
    return call_with_alarm(parser.parse, (data, path), timeout_s, path)


def _timeout_error(path: str, timeout_s: float) -> ParseError:
    return ParseError(
        path, f"parse time limit exceeded ({timeout_s:g} s; raise parse_timeout_s in config.yaml)"
    )


# -- in-process: SIGALRM ------------------------------------------------------


class _Deadline(BaseException):
    """Raised by the alarm; a BaseException so a parser's ``except Exception`` lets it pass."""


def call_with_alarm(fn: Callable[[*Ts], T], args: tuple[*Ts], timeout_s: float, path: str) -> T:
    """Run ``fn(*args)``, interrupting it after ``timeout_s`` when the alarm is usable."""
    usable = (
        hasattr(signal, "setitimer")
        and threading.current_thread() is threading.main_thread()
        and signal.getitimer(signal.ITIMER_REAL)[0] == 0
    )
    if not usable:
        return fn(*args)

    def ring(_signum: int, _frame: object) -> None:
        raise _Deadline

    global _deadline
    previous = signal.signal(signal.SIGALRM, ring)
    _deadline = time.monotonic() + timeout_s
    try:
        signal.setitimer(signal.ITIMER_REAL, timeout_s)
        try:
            return fn(*args)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    except _Deadline:
        raise _timeout_error(path, timeout_s) from None
    finally:
        _deadline = None
        signal.signal(signal.SIGALRM, previous)


# -- isolated: a forked worker ------------------------------------------------


def call_isolated(
    fn: Callable[[*Ts], T],
    args: tuple[*Ts],
    timeout_s: float,
    path: str,
    name: str = "parser",
    *,
    seccomp: bool = True,
    helpers: bool = False,
) -> T:
    """Run ``fn(*args)`` in a sandboxed, forked worker; kill its process group after
    ``timeout_s`` (``<= 0``: no limit). ``seccomp=False`` keeps only the limits;
    ``helpers`` starts the broker for :func:`clawkb.parsers.sandbox.run_helper`."""
    if seccomp:
        sandbox.prepare()  # here: importing pyseccomp runs ldconfig, which the filter forbids
    else:
        sandbox.harden_parent()
    read_end, write_end = os.pipe()
    started = time.monotonic()
    deadline = started + timeout_s if timeout_s > 0 else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads (3.12+)
        pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the worker
        os.close(read_end)
        global _deadline, _in_worker
        _deadline = deadline
        _in_worker = True
        _worker(fn, args, write_end, timeout_s, seccomp, helpers)
    os.close(write_end)
    with contextlib.suppress(OSError):
        os.setpgid(pid, pid)  # also done by the worker: whoever runs first wins the race
    reaped = False
    try:
        blob = _read_until(read_end, deadline)
        if blob is None:
            raise _timeout_error(path, timeout_s)
        _, status = os.waitpid(pid, 0)
        reaped = True
    finally:
        os.close(read_end)
        if not reaped:
            _kill_group(pid)
    if not blob:
        stopped = os.WIFSIGNALED(status) and sandbox.stopped_reason(os.WTERMSIG(status))
        if stopped:
            raise ParseError(path, f"parser {name} {stopped}")
        how = (
            f"killed by signal {signal.Signals(-os.waitstatus_to_exitcode(status)).name}"
            if os.WIFSIGNALED(status)
            else f"exit status {os.waitstatus_to_exitcode(status)}"
        )
        raise ParseError(path, f"parser {name} crashed (worker {how})")
    payload: _Payload[T] = pickle.loads(blob)  # our own child wrote it
    return _unpack(payload, path, name)


def _worker(  # pragma: no cover - runs in the worker
    fn: Callable[[*Ts], object],
    args: tuple[*Ts],
    fd: int,
    timeout_s: float,
    seccomp: bool,
    helpers: bool,
) -> None:
    """The forked child: confine, run, send ``(kind, ...)`` back, leave without cleanup."""
    code = 0
    try:
        faulthandler.disable()  # a crash is reported as the file's error, not a dump
        with contextlib.suppress(OSError):
            os.setpgid(0, 0)
        try:
            keep = [fd]
            broker = sandbox.start_broker(timeout_s) if helpers else None
            if broker is not None:
                keep.append(broker)
            sandbox.enter(keep, timeout_s, seccomp=seccomp)
            payload: _Payload[object] = ("ok", fn(*args))
        except ParseError as exc:
            payload = ("parse", exc.path, exc.reason)
        except ClawkbError as exc:
            payload = ("error", str(exc))
        except BaseException as exc:
            payload = ("crash", f"{type(exc).__name__}: {exc}")
        try:
            blob = pickle.dumps(payload)
        except Exception as exc:
            blob = pickle.dumps(("crash", f"result cannot be sent back: {exc}"))
        with os.fdopen(fd, "wb") as fh:
            fh.write(blob)
    except BaseException:
        code = 1
    finally:
        os._exit(code)


def _read_until(fd: int, deadline: float | None) -> bytes | None:
    """All bytes until EOF, or ``None`` if the deadline passes first."""
    parts: list[bytes] = []
    while True:
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            return None
        # poll, not select: select() cannot watch a descriptor numbered 1024 or above
        poller = select.poll()
        poller.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
        if not poller.poll(None if left is None else max(0, int(left * 1000) + 1)):
            return None
        part = os.read(fd, 1 << 20)
        if not part:
            return b"".join(parts)
        parts.append(part)


def _kill_group(pid: int) -> None:
    for kill in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
        with contextlib.suppress(OSError):
            kill()
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)


def _unpack(payload: _Payload[T], path: str, name: str) -> T:
    match payload:
        case ("ok", value):
            return value
        case ("parse", where, reason):
            raise ParseError(where, reason)
        case ("error", reason):
            raise ParseError(path, reason)
    raise ParseError(path, f"parser {name} crashed: {payload[1]}")
