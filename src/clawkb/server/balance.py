"""Keep-alive connections spread evenly over the workers of ``serve --workers``.

Each worker listens on its own socket on the port (``SO_REUSEPORT``) and the
kernel hashes every new connection to one of them. Few long-lived keep-alive
clients (an agent or two, the web page, the soak's 8 readers) then often land
unevenly: with 8 connections over 2 workers an even split comes up about one
time in four, and 6 / 2 one time in five, for as long as the connections live.
The worker holding more is the one every slow answer comes from.

So each worker counts its open connections in a small table the parent makes
before it forks (shared memory, one slot per worker, written only by its
worker's event loop). A worker that holds more than its share, the open
connections of all workers divided by their number and rounded up, answers
the request in hand with ``Connection: close``; the client's next request
opens a new connection, which the kernel hashes again, until the split is even.
Only the httptools protocol does this (server/protocol.py); a lone process has
no table and never sheds.
"""

from __future__ import annotations

import ctypes
import multiprocessing

#: open connections per worker, in memory the workers share with the parent
_table: ctypes.Array[ctypes.c_int] | None = None
_me = -1


def share_over(workers: int) -> None:
    """In the parent, before it forks ``workers`` workers."""
    global _table
    _table = multiprocessing.RawArray("i", workers)


def joined(index: int) -> None:
    """In worker ``index`` at its start (a restarted worker starts from 0)."""
    global _me
    _me = index
    if _table is not None:
        _table[index] = 0


def opened() -> None:
    if _table is not None and _me >= 0:
        _table[_me] += 1


def closed() -> None:
    if _table is not None and _me >= 0:
        _table[_me] = max(0, _table[_me] - 1)


def over_share() -> bool:
    """This worker holds more than its share of the open connections."""
    if _table is None or _me < 0:
        return False
    counts = list(_table)
    share = -(-sum(counts) // len(counts))
    return counts[_me] > share


def counts() -> list[int]:
    """Open connections per worker (empty for a lone process)."""
    return list(_table) if _table is not None else []
