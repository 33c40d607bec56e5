"""The LRU + TTL cache for search results and query vectors (``cachetools``).

Keys carry the index stamp (lexical applied sequence, vector version), so
any write to the KB makes old entries unreachable; they age out by LRU or TTL.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

import cachetools

V = TypeVar("V")


class TTLCache(Generic[V]):
    """``cachetools.TTLCache`` with hit/miss counts; ``size <= 0`` caches nothing.

    Safe to share between threads (a lock around each call): the query-vector
    cache is one per process, read by every server view."""

    def __init__(
        self, size: int = 256, ttl_s: float = 300.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.size, self.ttl_s = size, ttl_s
        self._data: cachetools.TTLCache[Hashable, V] = cachetools.TTLCache(
            max(size, 1), ttl_s, timer=clock
        )
        self.hits = self.misses = 0
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> V | None:
        with self._lock:
            value = self._data.get(key)
        if value is None:
            self.misses += 1
        else:
            self.hits += 1
        return value

    def put(self, key: Hashable, value: V) -> None:
        if self.size > 0:
            with self._lock:
                self._data[key] = value

    def clear(self) -> None:
        with self._lock:
            self._data.clear()

    def __len__(self) -> int:
        return len(self._data)


class SharedResults:
    """Search-result caches shared by the views that read one data state.

    A server keeps a view per reader thread, each a new KB object after every
    write; with a result cache per view, each view computed every query again
    after each write, once per view. The server marks each view with a token
    naming the data state it reads (``KnowledgeBase.view_token``, set only when
    it is known: :mod:`clawkb.server.views`); views with one token share one
    cache. The newest :attr:`KEEP` tokens' caches are kept (a view pinned to an
    older state keeps using its own until it renews)."""

    KEEP = 4

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._caches: OrderedDict[Hashable, TTLCache[Any]] = OrderedDict()

    def cache(self, token: Hashable, size: int, ttl_s: float) -> TTLCache[Any]:
        key = (token, size, ttl_s)
        with self._lock:
            found = self._caches.get(key)
            if found is None:
                found = self._caches[key] = TTLCache(size, ttl_s)
                while len(self._caches) > self.KEEP:
                    self._caches.popitem(last=False)
            else:
                self._caches.move_to_end(key)
            return found


#: The process's shared result caches (see :class:`SharedResults`).
SHARED_RESULTS = SharedResults()
