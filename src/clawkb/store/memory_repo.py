"""SQL for the ``memories`` table (migration ``0002_memory``); callers own transactions."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class MemoryRecord:
    """One stored memory (the row in ``memories``)."""

    id: str
    namespace: str
    text: str
    tags: tuple[str, ...]
    importance: float
    created_at: float
    updated_at: float
    expires_at: float | None
    path: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "namespace": self.namespace,
            "text": self.text,
            "tags": list(self.tags),
            "importance": self.importance,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "expires_at": self.expires_at,
            "path": self.path,
        }


_COLS = "id, namespace, text, tags, importance, created_at, updated_at, expires_at, path"


def _record(r: Sequence[Any]) -> MemoryRecord:
    return MemoryRecord(
        id=r[0],
        namespace=r[1],
        text=r[2],
        tags=tuple(json.loads(r[3])),
        importance=float(r[4]),
        created_at=float(r[5]),
        updated_at=float(r[6]),
        expires_at=None if r[7] is None else float(r[7]),
        path=r[8],
    )


def _filters(
    now: float, namespace: str | None, tags: Sequence[str], alias: str = ""
) -> tuple[str, list[Any]]:
    """WHERE clause for live memories in ``namespace`` carrying every tag in ``tags``."""
    p = f"{alias}." if alias else ""
    clauses = [f"({p}expires_at IS NULL OR {p}expires_at > ?)"]
    params: list[Any] = [now]
    if namespace is not None:
        clauses.append(f"{p}namespace = ?")
        params.append(namespace)
    for tag in tags:
        clauses.append(f"EXISTS (SELECT 1 FROM json_each({p}tags) WHERE value = ?)")
        params.append(tag)
    return " AND ".join(clauses), params


def get(conn: sqlite3.Connection, mid: str) -> MemoryRecord | None:
    r = conn.execute(f"SELECT {_COLS} FROM memories WHERE id = ?", (mid,)).fetchone()
    return _record(r) if r else None


def by_prefix(conn: sqlite3.Connection, prefix: str, now: float) -> list[MemoryRecord]:
    """Live memories whose id is ``prefix`` or starts with it."""
    rows = conn.execute(
        f"SELECT {_COLS} FROM memories WHERE (id = ? OR id LIKE ?)"
        " AND (expires_at IS NULL OR expires_at > ?) LIMIT 2",
        (prefix, prefix.replace("%", "").replace("_", "") + "%", now),
    ).fetchall()
    exact = [r for r in rows if r[0] == prefix]
    return [_record(r) for r in (exact or rows)]


def upsert(conn: sqlite3.Connection, rec: MemoryRecord, digest: str) -> None:
    conn.execute(
        f"INSERT INTO memories ({_COLS}, content_hash) VALUES (?,?,?,?,?,?,?,?,?,?)"
        " ON CONFLICT(id) DO UPDATE SET text=excluded.text, tags=excluded.tags,"
        " importance=excluded.importance, updated_at=excluded.updated_at,"
        " expires_at=excluded.expires_at, content_hash=excluded.content_hash",
        (
            rec.id,
            rec.namespace,
            rec.text,
            json.dumps(list(rec.tags), ensure_ascii=False),
            rec.importance,
            rec.created_at,
            rec.updated_at,
            rec.expires_at,
            rec.path,
            digest,
        ),
    )


def delete(conn: sqlite3.Connection, mid: str) -> None:
    conn.execute("DELETE FROM memories WHERE id = ?", (mid,))


def expired(conn: sqlite3.Connection, now: float) -> list[MemoryRecord]:
    rows = conn.execute(
        f"SELECT {_COLS} FROM memories WHERE expires_at IS NOT NULL AND expires_at <= ?", (now,)
    )
    return [_record(r) for r in rows]


def listing(
    conn: sqlite3.Connection,
    now: float,
    namespace: str | None,
    tags: Sequence[str],
    limit: int | None,
) -> list[MemoryRecord]:
    where, params = _filters(now, namespace, tags)
    q = f"SELECT {_COLS} FROM memories WHERE {where} ORDER BY updated_at DESC, id"
    if limit is not None:
        q += " LIMIT ?"
        params.append(limit)
    return [_record(r) for r in conn.execute(q, params)]


def chunk_map(
    conn: sqlite3.Connection, now: float, namespace: str | None, tags: Sequence[str]
) -> dict[int, MemoryRecord]:
    """Chunk id → its live memory, for the memories that pass the filters."""
    where, params = _filters(now, namespace, tags, alias="m")
    q = (
        f"SELECT c.id, {', '.join('m.' + c.strip() for c in _COLS.split(','))} FROM memories m"
        " JOIN documents d ON d.path = m.path JOIN chunks c ON c.doc_id = d.id"
        f" WHERE {where}"
    )
    return {r[0]: _record(r[1:]) for r in conn.execute(q, params)}


def count(conn: sqlite3.Connection, now: float) -> dict[str, int]:
    """Live memories per namespace."""
    rows = conn.execute(
        "SELECT namespace, COUNT(*) FROM memories WHERE expires_at IS NULL OR expires_at > ?"
        " GROUP BY namespace ORDER BY namespace",
        (now,),
    )
    return {r[0]: int(r[1]) for r in rows}
