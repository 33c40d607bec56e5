"""SQLite checks and settings used by doctor, backup and the index workers."""

from __future__ import annotations

import sqlite3


def integrity_check(conn: sqlite3.Connection) -> list[str]:
    """SQLite's own verdict on the file: ``["ok"]`` when sound."""
    return [r[0] for r in conn.execute("PRAGMA integrity_check")]


def foreign_key_violations(conn: sqlite3.Connection) -> list[tuple[str, int | None, str, int]]:
    """``(table, rowid, parent table, foreign key id)`` of every broken reference."""
    return [(r[0], r[1], r[2], r[3]) for r in conn.execute("PRAGMA foreign_key_check")]


def database_file(conn: sqlite3.Connection) -> str | None:
    """The file behind the connection's main database (None for an in-memory one)."""
    row = conn.execute("PRAGMA database_list").fetchone()
    return row[2] if row and row[2] else None


def make_self_contained(conn: sqlite3.Connection) -> None:
    """Leave the database as one file (rollback journal instead of WAL)."""
    conn.execute("PRAGMA journal_mode=DELETE")


def backup_summary(conn: sqlite3.Connection) -> tuple[int, int]:
    """``(latest change seq in the log, document count)`` of a copied store."""
    seq = int(conn.execute("SELECT MAX(seq) FROM changes").fetchone()[0] or 0)
    docs = int(conn.execute("SELECT COUNT(*) FROM documents").fetchone()[0])
    return seq, docs
