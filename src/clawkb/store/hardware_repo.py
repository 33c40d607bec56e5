"""Board and alias rows in the store (tables from migration ``0003_hardware``)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from clawkb.store.repo import Repository


@dataclass(frozen=True, slots=True)
class FoundAlias:
    """One alias as written in a file: where it is and what else its row said."""

    alias: str
    pin: str
    line: int
    heading_path: tuple[str, ...] = ()
    extra: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class PinAlias:
    """A stored alias of one board, traceable to its file, line and chunk anchor."""

    board: str
    alias: str
    pin: str
    path: str
    line: int
    heading_path: tuple[str, ...] = ()
    anchor: str | None = None
    extra: dict[str, str] = field(default_factory=dict)

    def describe(self) -> str:
        """``nucleo-f401re: red_led = pin 13 (port: PA5)`` — the line agents read."""
        text = f"{self.board or 'generic'}: {self.alias} = pin {self.pin}"
        if self.extra:
            text += " (" + ", ".join(f"{k}: {v}" for k, v in self.extra.items()) + ")"
        return text

    def to_dict(self) -> dict[str, object]:
        return {
            "board": self.board,
            "alias": self.alias,
            "pin": self.pin,
            "extra": dict(self.extra),
            "path": self.path,
            "line": self.line,
            "heading_path": list(self.heading_path),
            "anchor": self.anchor,
            "text": self.describe(),
        }


def save_document(
    repo: Repository, doc_id: int, board: str | None, found: Sequence[FoundAlias]
) -> None:
    """Set a document's board and replace its aliases (caller holds the transaction).

    Each alias records the anchor of the chunk holding its line, so a listing
    can point at the exact passage.
    """
    conn = repo.conn
    conn.execute("UPDATE documents SET board = ? WHERE id = ?", (board, doc_id))
    conn.execute("DELETE FROM pin_aliases WHERE doc_id = ?", (doc_id,))
    if board is None or not found:
        return
    spans = conn.execute(
        "SELECT anchor, line_start, line_end FROM chunks WHERE doc_id = ? ORDER BY ordinal",
        (doc_id,),
    ).fetchall()
    rows = []
    for a in found:
        holding = [s for s in spans if s[1] <= a.line <= s[2]]
        anchor = min(holding, key=lambda s: s[2] - s[1])[0] if holding else None
        rows.append(
            (
                doc_id,
                board,
                a.alias,
                a.pin,
                json.dumps(dict(a.extra), ensure_ascii=False),
                a.line,
                json.dumps(list(a.heading_path), ensure_ascii=False),
                anchor,
            )
        )
    conn.executemany(
        "INSERT INTO pin_aliases (doc_id, board, alias, pin, extra, line, heading_path, anchor)"
        " VALUES (?,?,?,?,?,?,?,?)",
        rows,
    )


def clear_document(repo: Repository, doc_id: int) -> None:
    """A document that is no longer under a datasheet root loses its board and aliases."""
    repo.conn.execute(
        "UPDATE documents SET board = NULL WHERE id = ? AND board IS NOT NULL", (doc_id,)
    )
    repo.conn.execute("DELETE FROM pin_aliases WHERE doc_id = ?", (doc_id,))


def load_aliases(conn: sqlite3.Connection, boards: Sequence[str] | None = None) -> list[PinAlias]:
    """Aliases of the given boards (plus generic ones), or of every board, in file order."""
    q = (
        "SELECT a.board, a.alias, a.pin, d.path, a.line, a.heading_path, a.anchor, a.extra"
        " FROM pin_aliases a JOIN documents d ON d.id = a.doc_id"
    )
    params: list[str] = []
    if boards is not None:
        q += f" WHERE a.board IN ({','.join('?' * len(boards))}) OR a.board = ''"
        params = list(boards)
    q += " ORDER BY a.board, d.path, a.line"
    return [
        PinAlias(
            board=r[0],
            alias=r[1],
            pin=r[2],
            path=r[3],
            line=r[4],
            heading_path=tuple(json.loads(r[5])),
            anchor=r[6],
            extra=json.loads(r[7]),
        )
        for r in conn.execute(q, params)
    ]


def chunk_ids_of_boards(
    conn: sqlite3.Connection, boards: Sequence[str], *, generic: bool
) -> np.ndarray:
    """Chunk ids of datasheets of ``boards`` (and generic datasheets if asked)."""
    names = list(boards) + ([""] if generic else [])
    if not names:
        return np.empty(0, np.int64)
    rows = conn.execute(
        "SELECT c.id FROM chunks c JOIN documents d ON d.id = c.doc_id"
        f" WHERE d.board IN ({','.join('?' * len(names))})",
        names,
    ).fetchall()
    return np.fromiter((r[0] for r in rows), np.int64, len(rows))


def datasheet_chunk_ids(conn: sqlite3.Connection) -> np.ndarray | None:
    """Chunk ids of every datasheet, or None when the KB has no datasheet at all."""
    rows = conn.execute(
        "SELECT c.id FROM chunks c JOIN documents d ON d.id = c.doc_id WHERE d.board IS NOT NULL"
    ).fetchall()
    return np.fromiter((r[0] for r in rows), np.int64, len(rows)) if rows else None


def boards_of_anchors(conn: sqlite3.Connection, anchors: Sequence[str]) -> dict[str, str | None]:
    if not anchors:
        return {}
    rows = conn.execute(
        "SELECT c.anchor, d.board FROM chunks c JOIN documents d ON d.id = c.doc_id"
        f" WHERE c.anchor IN ({','.join('?' * len(anchors))})",
        list(anchors),
    )
    return {r[0]: r[1] for r in rows}


def known_boards(conn: sqlite3.Connection) -> list[str]:
    """Boards with at least one datasheet or alias in the store."""
    rows = conn.execute(
        "SELECT board FROM documents WHERE board IS NOT NULL AND board != ''"
        " UNION SELECT board FROM pin_aliases ORDER BY 1"
    )
    return [r[0] for r in rows]


def board_document_paths(conn: sqlite3.Connection, board: str) -> list[str]:
    """Paths of the documents filed under ``board``, sorted."""
    rows = conn.execute("SELECT path FROM documents WHERE board = ? ORDER BY path", (board,))
    return [r[0] for r in rows]


def mark_plain_notes_stale(conn: sqlite3.Connection, prefix: str) -> None:
    """Make boardless documents under ``prefix`` look changed, so the next run re-parses them."""
    conn.execute(
        "UPDATE documents SET mtime_ns = 0, content_hash = '' WHERE board IS NULL"
        " AND substr(path, 1, ?) = ?",
        (len(prefix), prefix),
    )


def pins_of_aliases(conn: sqlite3.Connection, aliases: Sequence[str]) -> list[tuple[str, str]]:
    """Distinct ``(pin, extra json)`` that any of ``aliases`` names."""
    marks = ",".join("?" * len(aliases))
    rows = conn.execute(
        f"SELECT DISTINCT pin, extra FROM pin_aliases WHERE alias IN ({marks})", tuple(aliases)
    ).fetchall()
    return [(r[0], r[1]) for r in rows]


def aliases_of_pins(conn: sqlite3.Connection, pins: Sequence[str]) -> list[str]:
    """Distinct aliases recorded for any of ``pins``."""
    marks = ",".join("?" * len(pins))
    rows = conn.execute(
        f"SELECT DISTINCT alias FROM pin_aliases WHERE pin IN ({marks})", tuple(pins)
    ).fetchall()
    return [r[0] for r in rows]


def alias_places(conn: sqlite3.Connection) -> Iterator[tuple[str, str, str, str, int, str | None]]:
    """``(board, alias, pin, path, line, anchor)`` of every alias, by path and line."""
    yield from conn.execute(
        "SELECT a.board, a.alias, a.pin, d.path, a.line, a.anchor FROM pin_aliases a"
        " JOIN documents d ON d.id = a.doc_id ORDER BY d.path, a.line"
    )
