"""``clawkb serve --workers N``: N server processes on one port.

One process serves reads with one interpreter lock; on a machine with free
cores, more processes serve more searches at once. The parent binds the
socket, then forks the workers *before it has started any thread* (a fork
copies only the calling thread, so a parent with threads could hand a child a
lock held forever). Each worker builds its own app (:func:`create_app`: its
own reader views, writer thread and writer process) and runs uvicorn. On
Linux each worker then listens on a socket of its own bound to the parent's
port (``SO_REUSEPORT``; the parent's socket only holds the port) and the
kernel hashes every new connection to one of them; with one shared listening
socket, the worker that won the accept race at a burst kept all of its
keep-alive clients (a soak once sent 88,188 searches to one worker of two).
Elsewhere the workers serve the inherited socket.

The parent only supervises: it forwards SIGINT/SIGTERM to the workers, waits
for them, and starts a new worker in the place of one that died. Each worker
asks the kernel for SIGTERM when the parent dies (``PR_SET_PDEATHSIG``), so a
parent killed with SIGKILL leaves no worker behind; a worker's own children
(writer process, embedding worker) end with it as they do under a plain
``serve``.

What the workers share (their state would otherwise differ per process):
chat conversations and the ``ask`` rate limits live in a small SQLite file
beside the KB (:mod:`clawkb.server.shared`); ``/mcp`` runs stateless (every
request stands alone, so any worker can answer it); only worker 0 watches
the folders (``--watch``). Every response names the worker that answered
(``x-clawkb-worker``).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from clawkb.server.settings import ServerSettings

PR_SET_PDEATHSIG = 1
#: A worker that dies this soon after its start is not restarted at once again
#: (a broken KB or port would otherwise fork in a tight loop).
RESTART_PAUSE_S = 1.0
#: How long the parent waits for the workers after forwarding a stop signal.
STOP_WAIT_S = 30.0


def die_with_parent(sig: int = signal.SIGTERM) -> None:
    """Ask Linux to send ``sig`` to this process when its parent ends (no-op elsewhere)."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)


def serve_workers(
    settings: ServerSettings,
    sock: socket.socket,
    run_worker: Callable[[int], None],
    *,
    announce: Callable[[str], None] = print,
    on_exit: Callable[[int], None] | None = None,
    helper: Callable[[], int] | None = None,
) -> int:
    """Fork ``settings.workers`` children that each call ``run_worker(index)`` (serving on
    ``sock``), restart any that dies, and stop them all on SIGINT/SIGTERM. Returns the
    exit status for the parent. ``helper()`` starts a process that serves the workers (the
    shared writer) and returns its pid: started first, started again when it ends,
    stopped after the workers."""
    parent = os.getpid()
    workers: dict[int, int] = {}  # pid -> index
    helpers: set[int] = set()
    stopping = False

    def spawn(index: int) -> None:
        pid = os.fork()
        if pid == 0:  # the worker
            code = 0
            try:
                signal.signal(signal.SIGINT, signal.SIG_DFL)
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                die_with_parent()
                if os.getppid() != parent:  # the parent died before the prctl
                    os._exit(0)
                run_worker(index)
            except BaseException:  # reported; the parent starts another worker
                import traceback

                traceback.print_exc()
                code = 1
            finally:
                with contextlib.suppress(Exception):
                    sys.stdout.flush()
                    sys.stderr.flush()
                os._exit(code)
        workers[pid] = index

    def stop(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True
        for pid in list(workers):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    if helper is not None:
        helpers.add(helper())
    import threading

    if threading.active_count() > 1:  # a fork copies only this thread: say so, it is a bug
        names = ", ".join(t.name for t in threading.enumerate() if t is not threading.main_thread())
        announce(f"warning: forking workers while other threads run ({names})")
    for n in range(settings.workers):
        spawn(n)
    announce(f"{settings.workers} worker processes: {', '.join(map(str, sorted(workers)))}")
    started = {n: time.monotonic() for n in workers.values()}
    deadline: float | None = None
    while workers:
        try:
            pid, _status = os.waitpid(-1, os.WNOHANG if stopping else 0)
        except ChildProcessError:
            break
        except InterruptedError:
            continue
        if pid == 0:  # stopping: nobody ended yet
            if deadline is None:
                deadline = time.monotonic() + STOP_WAIT_S
            if time.monotonic() > deadline:
                for other in list(workers):
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(other, signal.SIGKILL)
            time.sleep(0.05)
            continue
        if pid in helpers:
            helpers.discard(pid)
            if not stopping and helper is not None:
                announce(f"the shared writer (pid {pid}) ended: starting another")
                helpers.add(helper())
            continue
        index = workers.pop(pid, None)
        if on_exit is not None:
            on_exit(pid)
        if index is None or stopping:
            continue
        announce(f"worker {index} (pid {pid}) ended: starting another")
        pause = RESTART_PAUSE_S - (time.monotonic() - started.get(index, 0.0))
        if pause > 0:
            time.sleep(pause)
        if not stopping:
            started[index] = time.monotonic()
            spawn(index)
    for pid in helpers:  # the workers are gone: their writer may go
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    for pid in helpers:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
    sock.close()
    return 0
