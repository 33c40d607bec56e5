"""Reads and writes behind the replicas: Milvus export rows, the remote scratch store
and the import of an exported collection.

Callers own transactions; these functions only read and write rows.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

#: ``(chunk id, anchor, ordinal, text, heading_path json, line_start, line_end, page, kind,
#: language, path, root, title, parser, board, mtime_ns, metadata json, trust, domain)``
ExportRow = tuple[
    int, str, int, str, str, int, int, int | None, str, str | None,
    str, str, str | None, str | None, str | None, int, str | None, str | None, str | None,
]  # fmt: skip

_ROW_SQL = (
    "SELECT c.id, c.anchor, c.ordinal, c.text, c.heading_path, c.line_start, c.line_end,"
    " c.page, c.kind, c.language, d.path, d.root, d.title, d.parser, d.board, d.mtime_ns,"
    " d.metadata, COALESCE(d.trust, CASE WHEN d.path LIKE 'memory://%' THEN 'memory' END),"
    " d.domain FROM chunks c JOIN documents d ON d.id = c.doc_id WHERE c.id IN ({marks})"
)


def export_rows(conn: sqlite3.Connection, ids: Sequence[int]) -> list[ExportRow]:
    """The chunks ``ids`` still in the store with their document's columns."""
    rows = conn.execute(_ROW_SQL.format(marks=",".join("?" * len(ids))), list(ids)).fetchall()
    return [tuple(r) for r in rows]


def scratch_document(conn: sqlite3.Connection, path: str, title: str, at: float) -> int:
    """Id of the scratch document ``path`` (inserted when missing)."""
    conn.execute(
        "INSERT OR IGNORE INTO documents (path, content_hash, title, indexed_at)"
        " VALUES (?, '', ?, ?)",
        (path, title, at),
    )
    return int(conn.execute("SELECT id FROM documents WHERE path = ?", (path,)).fetchone()[0])


def scratch_chunk(
    conn: sqlite3.Connection,
    doc_id: int,
    anchor: str,
    ordinal: int,
    text: str,
    heading_json: str,
    lines: tuple[int, int],
    page: int | None,
    kind: str,
    language: str | None,
) -> None:
    """Keep a remote hit's passage (once per anchor) so context can be merged locally."""
    conn.execute(
        "INSERT OR IGNORE INTO chunks (doc_id, anchor, ordinal, text, content_hash,"
        " heading_path, line_start, line_end, page, kind, language)"
        " VALUES (?,?,?,?,'',?,?,?,?,?,?)",
        (doc_id, anchor, ordinal, text, heading_json, lines[0], lines[1], page, kind, language),
    )


def set_board(conn: sqlite3.Connection, doc_id: int, board: str | None) -> None:
    conn.execute("UPDATE documents SET board = ? WHERE id = ?", (board, doc_id))


def chunk_ids_of_doc(conn: sqlite3.Connection, doc_id: int) -> list[int]:
    """A document's chunk ids in reading order."""
    rows = conn.execute("SELECT id FROM chunks WHERE doc_id = ? ORDER BY ordinal", (doc_id,))
    return [r[0] for r in rows]
