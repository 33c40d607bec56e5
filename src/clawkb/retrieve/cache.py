"""A small LRU + TTL cache for search results and query vectors.

Keys carry the index stamp (lexical applied sequence, vector version), so
any write to the KB makes old entries unreachable; they age out by LRU.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any


class TTLCache:
    def __init__(
        self, size: int = 256, ttl_s: float = 300.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.size, self.ttl_s, self.clock = size, ttl_s, clock
        self._data: OrderedDict[Hashable, tuple[float, Any]] = OrderedDict()
        self.hits = self.misses = 0

    def get(self, key: Hashable) -> Any | None:
        item = self._data.get(key)
        if item is None or self.clock() - item[0] > self.ttl_s:
            if item is not None:
                del self._data[key]
            self.misses += 1
            return None
        self._data.move_to_end(key)
        self.hits += 1
        return item[1]

    def put(self, key: Hashable, value: Any) -> None:
        if self.size <= 0:
            return
        self._data[key] = (self.clock(), value)
        self._data.move_to_end(key)
        while len(self._data) > self.size:
            self._data.popitem(last=False)

    def clear(self) -> None:
        self._data.clear()

    def __len__(self) -> int:
        return len(self._data)
