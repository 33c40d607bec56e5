"""Search filters, applied before ranking in every channel.

A filter becomes the set of chunk ids allowed, computed in SQL once per query
and handed to both the lexical and the dense search.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np

from clawkb.errors import ConfigError
from clawkb.store.repo import Repository


@dataclass(frozen=True)
class Filters:
    path_globs: tuple[str, ...] = ()
    doc_types: tuple[str, ...] = ()  # parser names or file extensions (".pdf", "pdf")
    metadata: tuple[tuple[str, str | None], ...] = ()  # key (must exist) or key=value
    since: float | None = None  # epoch seconds (file mtime)
    until: float | None = None

    @property
    def active(self) -> bool:
        return bool(self.path_globs or self.doc_types or self.metadata or self.since or self.until)


def parse_time(value: str, *, now: float | None = None) -> float:
    """``2024-05-01``, an ISO date-time, or an age (:func:`clawkb.durations.parse_duration`)."""
    from clawkb.durations import is_duration, parse_duration

    value = value.strip()
    if is_duration(value) and not value.isdigit():
        return (now if now is not None else time.time()) - parse_duration(value)
    try:
        dt = datetime.fromisoformat(value)
    except ValueError:
        raise ConfigError(
            f"bad time {value!r}: use YYYY-MM-DD, an ISO date-time, or an age like 30d"
        ) from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.timestamp()


#: SQLite integers are 64-bit: nanosecond times reach from 1677 to 2262.
_NS_RANGE = (-(2**63) + 1, 2**63 - 1)


def _ns(seconds: float) -> int:
    """Epoch seconds as nanoseconds, clamped to what SQLite stores (a far date, any file)."""
    return int(min(max(seconds * 1e9, _NS_RANGE[0]), _NS_RANGE[1]))


def parse_meta(items: tuple[str, ...]) -> tuple[tuple[str, str | None], ...]:
    out = []
    for item in items:
        key, eq, value = item.partition("=")
        if not key.strip():
            raise ConfigError(f"bad metadata filter {item!r}: expected KEY or KEY=VALUE")
        out.append((key.strip(), value.strip() if eq else None))
    return tuple(out)


def allowed_ids(repo: Repository, f: Filters) -> np.ndarray:
    """Chunk ids passing every filter (sorted)."""
    ids = repo.chunk_ids_filtered(
        path_globs=f.path_globs,
        doc_types=f.doc_types,
        metadata=f.metadata,
        since_ns=_ns(f.since) if f.since is not None else None,
        until_ns=_ns(f.until) if f.until is not None else None,
    )
    return np.asarray(ids, np.int64)
