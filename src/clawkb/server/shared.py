"""State the processes of ``serve --workers N`` share: chat turns and ``ask`` rate limits.

A lone server keeps both in memory (:class:`clawkb.server.chat.Conversations`,
:class:`clawkb.server.security.RateLimiter`). Under several workers a client's
next request can land on any of them, so both live in one small SQLite file
beside the KB (:data:`FILE_NAME`), with the same interface: a follow-up finds
its conversation whichever worker answers, and a client gets its
``ask_per_minute`` in total, not once per worker. Each update is one short
``BEGIN IMMEDIATE`` transaction; rows are keyed by the KB's name, so the KBs of
one server (``--add-kb``) keep theirs apart.
"""

from __future__ import annotations

import json
import secrets
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from clawkb.errors import NotFoundError

FILE_NAME = "serve-shared.sqlite"
_SCHEMA = """
CREATE TABLE IF NOT EXISTS conversation (
    kb TEXT NOT NULL, id TEXT NOT NULL, turns TEXT NOT NULL, used REAL NOT NULL,
    PRIMARY KEY (kb, id));
CREATE TABLE IF NOT EXISTS bucket (
    kb TEXT NOT NULL, client TEXT NOT NULL, tokens REAL NOT NULL, at REAL NOT NULL,
    PRIMARY KEY (kb, client));
"""


class SharedFile:
    """The shared SQLite file: one connection per thread, WAL, short write transactions."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._local = threading.local()

    def conn(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=30, isolation_level=None)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.executescript(_SCHEMA)
            self._local.conn = conn
        return conn

    def transaction(self) -> _Immediate:
        return _Immediate(self.conn())


class _Immediate:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def __enter__(self) -> sqlite3.Connection:
        self.conn.execute("BEGIN IMMEDIATE")
        return self.conn

    def __exit__(self, kind: object, *rest: object) -> None:
        self.conn.execute("ROLLBACK" if kind is not None else "COMMIT")


class SharedConversations:
    """:class:`clawkb.server.chat.Conversations` in the shared file."""

    def __init__(self, file: SharedFile, kb: str, *, keep: int, turns: int) -> None:
        self.file, self.kb, self.keep, self.max_turns = file, kb, keep, turns

    def turns(self, cid: str | None) -> tuple[str, list[dict[str, Any]]]:
        now = time.time()
        with self.file.transaction() as conn:
            if cid is None:
                cid = secrets.token_hex(8)
                conn.execute(
                    "INSERT INTO conversation (kb, id, turns, used) VALUES (?, ?, '[]', ?)",
                    (self.kb, cid, now),
                )
                conn.execute(
                    "DELETE FROM conversation WHERE kb = ? AND id NOT IN (SELECT id FROM"
                    " conversation WHERE kb = ? ORDER BY used DESC LIMIT ?)",
                    (self.kb, self.kb, self.keep),
                )
                return cid, []
            row = conn.execute(
                "SELECT turns FROM conversation WHERE kb = ? AND id = ?", (self.kb, cid)
            ).fetchone()
            if row is None:
                raise NotFoundError(
                    f"no conversation {cid!r} (the server keeps the newest {self.keep})"
                )
            conn.execute(
                "UPDATE conversation SET used = ? WHERE kb = ? AND id = ?", (now, self.kb, cid)
            )
            turns: list[dict[str, Any]] = json.loads(row[0])
            return cid, turns

    def add(self, cid: str, turn: dict[str, Any]) -> None:
        with self.file.transaction() as conn:
            row = conn.execute(
                "SELECT turns FROM conversation WHERE kb = ? AND id = ?", (self.kb, cid)
            ).fetchone()
            turns = json.loads(row[0]) if row else []
            turns = [*turns, turn][-self.max_turns :]
            conn.execute(
                "INSERT OR REPLACE INTO conversation (kb, id, turns, used) VALUES (?, ?, ?, ?)",
                (self.kb, cid, json.dumps(turns, ensure_ascii=False), time.time()),
            )


class SharedRateLimiter:
    """:class:`clawkb.server.security.RateLimiter` (a token bucket per client) in the
    shared file: the workers draw from one bucket per client."""

    def __init__(self, file: SharedFile, kb: str, per_minute: int) -> None:
        self.file, self.kb = file, kb
        self.rate = per_minute / 60.0
        self.capacity = float(max(per_minute, 1))

    def allow(self, client: str) -> float:
        """0 when allowed, else seconds until the next call would be."""
        if self.rate <= 0:
            return 0.0
        now = time.time()
        with self.file.transaction() as conn:
            row = conn.execute(
                "SELECT tokens, at FROM bucket WHERE kb = ? AND client = ?", (self.kb, client)
            ).fetchone()
            tokens, at = row if row else (self.capacity, now)
            tokens = min(self.capacity, tokens + max(0.0, now - at) * self.rate)
            wait = 0.0
            if tokens >= 1:
                tokens -= 1
            else:
                wait = (1 - tokens) / self.rate
            conn.execute(
                "INSERT OR REPLACE INTO bucket (kb, client, tokens, at) VALUES (?, ?, ?, ?)",
                (self.kb, client, tokens, now),
            )
            return wait
