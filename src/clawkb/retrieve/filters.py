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
    where: list[str] = []
    params: list[object] = []
    if f.path_globs:
        where.append(
            "("
            + " OR ".join(
                "d.path GLOB ? OR substr(d.path, length(d.root) + 2) GLOB ?" for _ in f.path_globs
            )
            + ")"
        )
        for g in f.path_globs:
            params += [g, g]
    if f.doc_types:
        parts = []
        for t in f.doc_types:
            t = t.lower().lstrip(".")
            parts.append("(d.parser = ? OR lower(d.path) LIKE ?)")
            params += [t, f"%.{t}"]
        where.append("(" + " OR ".join(parts) + ")")
    for key, value in f.metadata:
        path = "$." + '"' + key.replace('"', "") + '"'
        if value is None:
            where.append("json_extract(d.metadata, ?) IS NOT NULL")
            params.append(path)
        else:
            where.append("CAST(json_extract(d.metadata, ?) AS TEXT) = ?")
            params += [path, value]
    if f.since is not None:
        where.append("d.mtime_ns >= ?")
        params.append(int(f.since * 1e9))
    if f.until is not None:
        where.append("d.mtime_ns <= ?")
        params.append(int(f.until * 1e9))
    q = "SELECT c.id FROM chunks c JOIN documents d ON d.id = c.doc_id"
    if where:
        q += " WHERE " + " AND ".join(where)
    rows = repo.conn.execute(q + " ORDER BY c.id", params).fetchall()
    return np.fromiter((r[0] for r in rows), np.int64, len(rows))
