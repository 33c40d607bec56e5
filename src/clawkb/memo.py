"""A least-recently-used memo bounded by the bytes it holds, not by its entry count.

``functools.lru_cache(maxsize=N)`` bounds entries; when an entry is a whole
passage's derived form (its display text, its token sets) the memory behind
N entries depends on how long the passages are, and a long-running server that
keeps meeting new passages (files rewritten, re-indexed) grows until the N-th
one: tens of MB for short English chunks, far more for long Chinese ones.
:func:`bytes_lru` keeps the most recently used entries whose estimated sizes add
up to at most ``max_bytes``, so the memory is flat once it is full, whatever the
passages are like. Thread-safe (one lock per memo; the function runs outside it).

A budget that takes hours of new passages to fill is still growth in a server
that rewrites files all day: each write retires passages nobody will search for
again, and they stayed until the budget pushed them out. A process that writes
calls :func:`new_generation` after each write, and a server after each new state
of the KB its views see, whoever wrote it (``clawkb.server.heap.saw_change``);
an entry not used during the last :data:`MAX_AGE` generations is then dropped
at the memo's next insertion (oldest first, so the cost is the entries
dropped). A process that never sees a write keeps the plain budget.
"""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, Generic, ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")

#: Write generations an entry is kept unused (see :func:`new_generation`).
MAX_AGE = 64
_generation = [0]


def new_generation() -> None:
    """This process finished a write (or a server saw another process's): entries of
    every memo unused for :data:`MAX_AGE` of these are dropped at their memo's next
    insertion."""
    _generation[0] += 1


def generation() -> int:
    return _generation[0]


class BytesLRU(Generic[P, R]):
    """``fn`` memoised by its (hashable) arguments, at most ``max_bytes`` of entries as
    estimated by ``size(args, result)``; an entry larger than the budget is not kept."""

    def __init__(
        self, fn: Callable[P, R], max_bytes: int, size: Callable[[tuple[Any, ...], R], int]
    ) -> None:
        functools.update_wrapper(self, fn)
        self._fn, self._size = fn, size
        self.max_bytes = max_bytes
        self.nbytes = 0
        #: key -> (value, its size, the generation it was last used in); oldest use first
        self._data: OrderedDict[Hashable, tuple[R, int, int]] = OrderedDict()
        self._lock = threading.Lock()

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        key: Hashable = args if not kwargs else (args, tuple(sorted(kwargs.items())))
        now = _generation[0]
        with self._lock:
            found = self._data.get(key)
            if found is not None:
                self._data.move_to_end(key)
                if found[2] != now:
                    self._data[key] = (found[0], found[1], now)
                return found[0]
        value = self._fn(*args, **kwargs)
        nbytes = self._size(args, value)
        if nbytes > self.max_bytes:
            return value
        with self._lock:
            if key not in self._data:
                self._data[key] = (value, nbytes, now)
                self.nbytes += nbytes
                self._evict(now)
        return value

    def _evict(self, now: int) -> None:
        """Drop the least recently used entries while over budget or unused for
        :data:`MAX_AGE` generations (the lock is held)."""
        data = self._data
        while data:
            key, (_, nbytes, used) = next(iter(data.items()))
            if self.nbytes <= self.max_bytes and now - used <= MAX_AGE:
                break
            del data[key]
            self.nbytes -= nbytes

    def __len__(self) -> int:
        return len(self._data)

    def cache_clear(self) -> None:
        with self._lock:
            self._data.clear()
            self.nbytes = 0


def bytes_lru(
    max_bytes: int, size: Callable[[tuple[Any, ...], Any], int]
) -> Callable[[Callable[P, R]], BytesLRU[P, R]]:
    """Decorator: ``@bytes_lru(8 << 20, size=lambda args, result: ...)``."""

    def wrap(fn: Callable[P, R]) -> BytesLRU[P, R]:
        return BytesLRU(fn, max_bytes, size)

    return wrap


def str_bytes(s: str) -> int:
    """About what a str takes (``sys.getsizeof`` without the call: 1-4 bytes a character)."""
    width = 1 if s.isascii() else 4  # not exact for Latin-1/BMP text: an upper bound
    return 49 + width * len(s)
