"""Where sections start: the SQL behind the title channel (clawkb.retrieve.titles)."""

from __future__ import annotations

import sqlite3


def chunk_headings(conn: sqlite3.Connection) -> list[tuple[int, int, str, str]]:
    """(chunk id, document id, document title, heading path JSON) of every chunk, in reading order."""
    rows = conn.execute(
        "SELECT c.id, c.doc_id, COALESCE(d.title, ''), c.heading_path"
        " FROM chunks c JOIN documents d ON d.id = c.doc_id ORDER BY c.doc_id, c.ordinal"
    )
    return [(int(a), int(b), str(c), str(h)) for a, b, c, h in rows]
