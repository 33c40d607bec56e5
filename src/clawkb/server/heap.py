"""The long-running processes' C heap (glibc malloc): fewer arenas, free pages given back.

A server's reader threads each get a glibc *arena* of their own (up to eight per
core), and each arena keeps the pages its thread freed for its own later use. A
reader view is replaced after every write: the old one's store rows, token sets
and numpy arrays are freed into whichever arenas allocated them, and the next
view's land partly elsewhere, so the resident heap creeps write after write
although the live objects do not grow (bench/results/soak-rss.md, round 9).

:func:`configure` (once, at start) caps the arenas at :data:`ARENAS`, and
:func:`after_write` hands the free pages of every arena back to the OS
(``malloc_trim``) after a write generation, at most once per
:data:`TRIM_EVERY` seconds. :func:`saw_change` is how the server reports a
generation: once per new state of the KB its views or its own writes see,
whoever wrote it. Both are no-ops where there is no glibc (macOS,
Windows, musl), when ``MALLOC_ARENA_MAX`` is set in the environment (the user's
choice wins), and with ``CLAWKB_MALLOC=off`` (``arenas`` / ``trim``: only
that half; for measurements). :func:`stats` reads ``malloc_info`` (arenas,
bytes held, bytes free) for the soak.
"""

from __future__ import annotations

import ctypes
import os
import re
import sys
import threading
import time
from collections.abc import Hashable

from clawkb import memo

#: ``mallopt`` parameter number of M_ARENA_MAX (glibc's malloc.h).
M_ARENA_MAX = -8
#: Arenas for the whole process: the main one and one the threads share.
ARENAS = 2
#: The least time between two trims (a trim walks every arena's free lists).
TRIM_EVERY = 5.0

_lock = threading.Lock()
_libc: list[ctypes.CDLL | None] = []  # [CDLL or None], loaded once
_last_trim = [0.0]
_seen: list[Hashable] = [None]  # the last state of the KB a view or a write reported


def _glibc() -> ctypes.CDLL | None:
    if not _libc:
        lib = None
        if sys.platform.startswith("linux"):
            try:
                lib = ctypes.CDLL("libc.so.6")
                lib.gnu_get_libc_version  # noqa: B018  (glibc, not musl)
                lib.mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
                lib.malloc_trim.argtypes = [ctypes.c_size_t]
            except (OSError, AttributeError):
                lib = None
        _libc.append(lib)
    return _libc[0]


def _wanted(part: str) -> bool:
    mode = os.environ.get("CLAWKB_MALLOC", "on").strip().lower()
    return mode in ("on", "", part)


def configure() -> bool:
    """Cap glibc's arenas at :data:`ARENAS` for this process (before its threads
    allocate much). True when applied."""
    lib = _glibc()
    if lib is None or "MALLOC_ARENA_MAX" in os.environ or not _wanted("arenas"):
        return False
    return bool(lib.mallopt(M_ARENA_MAX, ARENAS))


def after_write() -> bool:
    """A write generation ended: the per-passage memos may forget passages unused for
    a while (:func:`clawkb.memo.new_generation`), and free heap pages go back to
    the OS unless a trim ran less than :data:`TRIM_EVERY` seconds ago. True when
    it trimmed."""
    memo.new_generation()
    lib = _glibc()
    if lib is None or not _wanted("trim"):
        return False
    now = time.monotonic()
    with _lock:
        if now - _last_trim[0] < TRIM_EVERY:
            return False
        _last_trim[0] = now
    lib.malloc_trim(0)
    return True


def saw_change(stamp: Hashable) -> bool:
    """A view of this process moved to a new state of the KB (``stamp``: the index
    manifest's and the store's times it was taken at), or this process's own write
    ended there: the first to report a state counts it as a write generation
    (:func:`after_write`); the other views that renew onto it do not.

    Under ``serve --workers`` a worker's views follow the writes of the other
    workers and of terminal runs without writing themselves (an HTTP client
    keeps its connection, so one worker may get every write): counting only its
    own writes, such a worker never aged its memos nor gave its freed pages back,
    and its heap grew for the whole soak (bench/results/soak-rss.md, round 11).
    True when this was a new state."""
    with _lock:
        if stamp == _seen[0]:
            return False
        _seen[0] = stamp
    after_write()
    return True


_TOTAL = re.compile(r'<total type="(\w+)" count="(\d+)" size="(\d+)"/>')
_SYSTEM = re.compile(r'<system type="current" size="(\d+)"/>')


def stats() -> dict[str, int] | None:
    """glibc's own account of this process's heap: ``arenas``, ``system`` (bytes the
    arenas hold from the OS), ``free`` (of those, free in its lists), ``mmap``
    (large blocks mapped on their own). None without glibc."""
    lib = _glibc()
    if lib is None:
        return None
    buf, size = ctypes.c_char_p(), ctypes.c_size_t()
    lib.open_memstream.restype = ctypes.c_void_p
    lib.open_memstream.argtypes = [ctypes.POINTER(ctypes.c_char_p), ctypes.POINTER(ctypes.c_size_t)]
    lib.malloc_info.argtypes = [ctypes.c_int, ctypes.c_void_p]
    lib.fclose.argtypes = [ctypes.c_void_p]
    lib.free.argtypes = [ctypes.c_void_p]
    stream = lib.open_memstream(ctypes.byref(buf), ctypes.byref(size))
    if not stream:
        return None
    try:
        lib.malloc_info(0, stream)
    finally:
        lib.fclose(stream)
    text = ctypes.string_at(buf, size.value).decode("ascii", "replace")
    lib.free(ctypes.cast(buf, ctypes.c_void_p))
    tail = text[text.rfind("</heap>") :]  # the process-wide totals follow the last arena
    totals = {kind: int(nbytes) for kind, _, nbytes in _TOTAL.findall(tail)}
    system = _SYSTEM.findall(tail)
    return {
        "arenas": text.count("<heap nr="),
        "system": int(system[-1]) if system else 0,
        "free": totals.get("fast", 0) + totals.get("rest", 0),
        "mmap": totals.get("mmap", 0),
    }
