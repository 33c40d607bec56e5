"""Rows of ``links``: the note link graph (migration for the knowledge layer).

Callers own transactions; these functions only read and write rows.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator, Sequence

#: ``(doc_id, chunk_id or None, kind, target, fragment, text, line)``
LinkInsert = tuple[int, int | None, str, str, str, str, int]


def chunk_spans(conn: sqlite3.Connection, doc_id: int) -> list[tuple[int, int, int]]:
    """``(chunk id, first line, last line)`` of a document's chunks, in order."""
    rows = conn.execute(
        "SELECT id, line_start, line_end FROM chunks WHERE doc_id = ? ORDER BY ordinal", (doc_id,)
    ).fetchall()
    return [(r[0], r[1], r[2]) for r in rows]


def replace(conn: sqlite3.Connection, doc_id: int, rows: Iterable[LinkInsert]) -> None:
    """Drop ``doc_id``'s stored links and insert ``rows`` instead."""
    conn.execute("DELETE FROM links WHERE doc_id = ?", (doc_id,))
    conn.executemany(
        "INSERT INTO links (doc_id, chunk_id, kind, target, fragment, text, line)"
        " VALUES (?,?,?,?,?,?,?)",
        rows,
    )


def document_names(conn: sqlite3.Connection) -> Iterator[tuple[int, str, str | None]]:
    """``(doc id, path, title)`` of every document."""
    yield from conn.execute("SELECT id, path, title FROM documents")


def rst_labels(conn: sqlite3.Connection) -> Iterator[tuple[int, str]]:
    """``(doc id, label)`` for every reStructuredText label (``.. _label:``) documents define."""
    rows = conn.execute(
        "SELECT d.id, j.value FROM documents d, json_each(d.metadata, '$.labels') j"
        " WHERE d.metadata LIKE '%\"labels\"%'"
    )
    yield from rows


def heading_paths(conn: sqlite3.Connection, doc_id: int) -> list[str]:
    """The ``heading_path`` JSON of each chunk of a document."""
    rows = conn.execute("SELECT heading_path FROM chunks WHERE doc_id = ?", (doc_id,))
    return [r[0] for r in rows]


def all_rows(conn: sqlite3.Connection) -> list[tuple[int, str, str, str, str, int]]:
    """``(doc_id, kind, target, fragment, text, line)`` of every link, by source and line."""
    rows = conn.execute(
        "SELECT doc_id, kind, target, fragment, text, line FROM links ORDER BY doc_id, line"
    ).fetchall()
    return [(r[0], r[1], r[2], r[3], r[4], r[5]) for r in rows]


def outgoing(conn: sqlite3.Connection, doc_id: int) -> list[tuple[int | None, str, str, str, str]]:
    """``(chunk_id, target, fragment, text, kind)`` of the links written in a document."""
    rows = conn.execute(
        "SELECT chunk_id, target, fragment, text, kind FROM links WHERE doc_id = ?", (doc_id,)
    ).fetchall()
    return [(r[0], r[1], r[2], r[3], r[4]) for r in rows]


def incoming(conn: sqlite3.Connection, names: Sequence[str]) -> list[tuple[int, str, str]]:
    """``(source doc id, text, kind)`` of links whose stored target is one of ``names``."""
    marks = ",".join("?" * len(names))
    rows = conn.execute(
        f"SELECT doc_id, text, kind FROM links WHERE target IN ({marks})", tuple(names)
    ).fetchall()
    return [(r[0], r[1], r[2]) for r in rows]


def doc_chunks(conn: sqlite3.Connection, doc_id: int) -> list[tuple[int, str, str]]:
    """``(chunk id, heading_path json, text)`` of a document's chunks, in order."""
    rows = conn.execute(
        "SELECT id, heading_path, text FROM chunks WHERE doc_id = ? ORDER BY ordinal", (doc_id,)
    ).fetchall()
    return [(r[0], r[1], r[2]) for r in rows]


def chunk_ids_of_anchors(conn: sqlite3.Connection, anchors: Sequence[str]) -> dict[str, int]:
    """Exact anchor -> chunk id (the unique anchor index; no prefix matching)."""
    out: dict[str, int] = {}
    for a in anchors:
        r = conn.execute("SELECT id FROM chunks WHERE anchor = ?", (a,)).fetchone()
        if r is not None:
            out[a] = int(r[0])
    return out
