"""Rows of ``runs`` and ``journal``: the history of indexing runs.

Callers own transactions; these functions only read and write rows.
"""

from __future__ import annotations

import sqlite3

#: ``(id, started_at, finished_at, status, roots json, counts json)``
RunRow = tuple[int, float, float | None, str, str | None, str | None]


def start(conn: sqlite3.Connection, roots_json: str, at: float) -> tuple[int, bool]:
    """Open a run; runs left ``running`` become ``interrupted``. ``(id, resumed)``."""
    interrupted = conn.execute("SELECT COUNT(*) FROM runs WHERE status = 'running'").fetchone()[0]
    if interrupted:
        conn.execute("UPDATE runs SET status = 'interrupted' WHERE status = 'running'")
    cur = conn.execute("INSERT INTO runs (started_at, roots) VALUES (?, ?)", (at, roots_json))
    return int(cur.lastrowid or 0), bool(interrupted)


def finish(conn: sqlite3.Connection, run_id: int, counts_json: str, at: float) -> None:
    """Close a run and keep only the last twenty finished ones."""
    conn.execute(
        "UPDATE runs SET finished_at = ?, status = 'done', counts = ? WHERE id = ?",
        (at, counts_json, run_id),
    )
    conn.execute("DELETE FROM runs WHERE id < ? AND status != 'running'", (run_id - 20,))


def record_failure(
    conn: sqlite3.Connection, run_id: int, path: str, reason: str, at: float
) -> None:
    conn.execute(
        "INSERT INTO journal (run_id, path, state, reason, at) VALUES (?, ?, 'failed', ?, ?)",
        (run_id, path, reason, at),
    )


def failures(conn: sqlite3.Connection, run_id: int) -> list[tuple[str, str | None]]:
    """``(path, reason)`` of up to 100 files that failed in a run."""
    q = "SELECT path, reason FROM journal WHERE run_id = ? AND state = 'failed' LIMIT 100"
    return [(r[0], r[1]) for r in conn.execute(q, (run_id,))]


def last(conn: sqlite3.Connection) -> tuple[float, float | None, str] | None:
    """``(started_at, finished_at, status)`` of the newest run."""
    r = conn.execute(
        "SELECT started_at, finished_at, status FROM runs ORDER BY id DESC LIMIT 1"
    ).fetchone()
    return (r[0], r[1], r[2]) if r else None


def newest(conn: sqlite3.Connection, limit: int) -> list[RunRow]:
    rows = conn.execute(
        "SELECT id, started_at, finished_at, status, roots, counts FROM runs"
        " ORDER BY id DESC LIMIT ?",
        (limit,),
    ).fetchall()
    return [(r[0], r[1], r[2], r[3], r[4], r[5]) for r in rows]
