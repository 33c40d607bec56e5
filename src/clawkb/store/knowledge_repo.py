"""Document trust and domain columns and the per-domain reads behind routing.

Callers own transactions; these functions only read and write rows.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator

#: ``(path, root, metadata json, board)`` of a document, as classification reads it.
ClassifyRow = tuple[str, str, str, str | None]


def classify_row(conn: sqlite3.Connection, doc_id: int) -> ClassifyRow | None:
    row = conn.execute(
        "SELECT path, root, metadata, board FROM documents WHERE id = ?", (doc_id,)
    ).fetchone()
    return (row[0], row[1], row[2], row[3]) if row else None


def classify_rows(conn: sqlite3.Connection) -> list[tuple[int, str, str, str, str | None]]:
    """``(doc id, path, root, metadata json, board)`` of every document."""
    rows = conn.execute("SELECT id, path, root, metadata, board FROM documents").fetchall()
    return [(r[0], r[1], r[2], r[3], r[4]) for r in rows]


def set_trust_domain(conn: sqlite3.Connection, doc_id: int, trust: str, domain: str | None) -> None:
    conn.execute("UPDATE documents SET trust = ?, domain = ? WHERE id = ?", (trust, domain, doc_id))


def domain_of_path(conn: sqlite3.Connection, want: str) -> str | None:
    """Domain of the document at ``want`` or ending in ``/want`` (first match)."""
    row = conn.execute(
        "SELECT domain FROM documents WHERE path = ? OR path LIKE ? LIMIT 1",
        (want, "%/" + want),
    ).fetchone()
    return row[0] if row else None


def domain_texts(conn: sqlite3.Connection) -> Iterator[tuple[str, str, str, str]]:
    """``(domain, title, heading_path json, text)`` of every chunk of a classified document."""
    yield from conn.execute(
        "SELECT d.domain, d.title, c.heading_path, c.text FROM chunks c"
        " JOIN documents d ON d.id = c.doc_id WHERE d.domain IS NOT NULL"
    )


def domain_vectors(conn: sqlite3.Connection, mkey: str) -> Iterator[tuple[str, bytes]]:
    """``(domain, float32 bytes)`` of every ``mkey`` vector of a classified document's chunk."""
    yield from conn.execute(
        "SELECT d.domain, v.vec FROM chunk_vectors cv"
        " JOIN vectors v ON v.model = cv.model AND v.key = cv.key"
        " JOIN chunks c ON c.id = cv.chunk_id JOIN documents d ON d.id = c.doc_id"
        " WHERE cv.model = ? AND d.domain IS NOT NULL",
        (mkey,),
    )


def markdown_documents(conn: sqlite3.Connection) -> list[tuple[int, str]]:
    """``(doc id, path)`` of every Markdown note, by path."""
    rows = conn.execute(
        "SELECT id, path FROM documents WHERE parser = 'markdown' ORDER BY path"
    ).fetchall()
    return [(r[0], r[1]) for r in rows]


#: ``(anchor, text, path, first line)`` of a chunk, as the content checks read it.
PassageRow = tuple[str, str, str, int]


def document_passages(conn: sqlite3.Connection) -> list[PassageRow]:
    """Every chunk of an indexed file (memories left out)."""
    rows = conn.execute(
        "SELECT c.anchor, c.text, d.path, c.line_start FROM chunks c"
        " JOIN documents d ON d.id = c.doc_id WHERE d.path NOT LIKE 'memory://%'"
    ).fetchall()
    return [(r[0], r[1], r[2], r[3]) for r in rows]


def table_passages(conn: sqlite3.Connection) -> Iterator[PassageRow]:
    """Every chunk that is or holds a table."""
    yield from conn.execute(
        "SELECT c.anchor, c.text, d.path, c.line_start FROM chunks c"
        " JOIN documents d ON d.id = c.doc_id WHERE c.has_table = 1 OR c.kind = 'table'"
    )
