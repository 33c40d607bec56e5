"""The LRU + TTL cache for search results and query vectors (``cachetools``).

Keys carry the index stamp (lexical applied sequence, vector version), so
any write to the KB makes old entries unreachable; they age out by LRU or TTL.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

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
