"""The small SQLite file the workers of ``serve --workers N`` share (beside the KB):
chat conversations and the per-client question buckets
(:mod:`clawkb.server.shared` is its only user). Each function is one short
``BEGIN IMMEDIATE`` transaction, so two workers never interleave an update."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

_SCHEMA = """
CREATE TABLE IF NOT EXISTS conversation (
    kb TEXT NOT NULL, id TEXT NOT NULL, turns TEXT NOT NULL, used REAL NOT NULL,
    PRIMARY KEY (kb, id));
CREATE TABLE IF NOT EXISTS bucket (
    kb TEXT NOT NULL, client TEXT NOT NULL, tokens REAL NOT NULL, at REAL NOT NULL,
    PRIMARY KEY (kb, client));
"""


def connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, timeout=30, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.executescript(_SCHEMA)
    return conn


@contextmanager
def _immediate(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def new_conversation(conn: sqlite3.Connection, kb: str, cid: str, now: float, keep: int) -> None:
    """Add an empty conversation; only the ``keep`` most recently used stay."""
    with _immediate(conn):
        conn.execute(
            "INSERT INTO conversation (kb, id, turns, used) VALUES (?, ?, '[]', ?)", (kb, cid, now)
        )
        conn.execute(
            "DELETE FROM conversation WHERE kb = ? AND id NOT IN (SELECT id FROM"
            " conversation WHERE kb = ? ORDER BY used DESC LIMIT ?)",
            (kb, kb, keep),
        )


def touch_conversation(conn: sqlite3.Connection, kb: str, cid: str, now: float) -> str | None:
    """The conversation's turns (JSON), marked used now; None when it is not kept."""
    with _immediate(conn):
        row = conn.execute(
            "SELECT turns FROM conversation WHERE kb = ? AND id = ?", (kb, cid)
        ).fetchone()
        if row is None:
            return None
        conn.execute("UPDATE conversation SET used = ? WHERE kb = ? AND id = ?", (now, kb, cid))
        return str(row[0])


def update_turns(
    conn: sqlite3.Connection, kb: str, cid: str, change: Callable[[str | None], str], now: float
) -> None:
    """Replace the turns with ``change(old_json_or_None)`` (a JSON string), in one transaction."""
    with _immediate(conn):
        row = conn.execute(
            "SELECT turns FROM conversation WHERE kb = ? AND id = ?", (kb, cid)
        ).fetchone()
        turns = change(row[0] if row else None)
        conn.execute(
            "INSERT OR REPLACE INTO conversation (kb, id, turns, used) VALUES (?, ?, ?, ?)",
            (kb, cid, turns, now),
        )


def take_token(
    conn: sqlite3.Connection, kb: str, client: str, now: float, rate: float, capacity: float
) -> float:
    """A token bucket per client: 0 when a token was taken, else seconds to wait."""
    with _immediate(conn):
        row = conn.execute(
            "SELECT tokens, at FROM bucket WHERE kb = ? AND client = ?", (kb, client)
        ).fetchone()
        tokens, at = row if row else (capacity, now)
        tokens = min(capacity, tokens + max(0.0, now - at) * rate)
        wait = 0.0
        if tokens >= 1:
            tokens -= 1
        else:
            wait = (1 - tokens) / rate
        conn.execute(
            "INSERT OR REPLACE INTO bucket (kb, client, tokens, at) VALUES (?, ?, ?, ?)",
            (kb, client, tokens, now),
        )
        return wait
