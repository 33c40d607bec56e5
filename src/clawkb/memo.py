"""A least-recently-used memo bounded by the bytes it holds, not by its entry count.

``functools.lru_cache(maxsize=N)`` bounds entries; when an entry is a whole
passage's derived form (its display text, its token sets) the memory behind
N entries depends on how long the passages are, and a long-running server that
keeps meeting new passages (files rewritten, re-indexed) grows until the N-th
one: tens of MB for short English chunks, far more for long Chinese ones.
:func:`bytes_lru` keeps the most recently used entries whose estimated sizes add
up to at most ``max_bytes``, so the memory is flat once it is full, whatever the
passages are like. Thread-safe (one lock per memo; the function runs outside it).
"""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, Generic, ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")


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
        self._data: OrderedDict[Hashable, tuple[R, int]] = OrderedDict()
        self._lock = threading.Lock()

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        key: Hashable = args if not kwargs else (args, tuple(sorted(kwargs.items())))
        with self._lock:
            found = self._data.get(key)
            if found is not None:
                self._data.move_to_end(key)
                return found[0]
        value = self._fn(*args, **kwargs)
        nbytes = self._size(args, value)
        if nbytes > self.max_bytes:
            return value
        with self._lock:
            if key not in self._data:
                self._data[key] = (value, nbytes)
                self.nbytes += nbytes
                while self.nbytes > self.max_bytes:
                    _, (_, gone) = self._data.popitem(last=False)
                    self.nbytes -= gone
        return value

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
