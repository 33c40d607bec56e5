"""Reads and writes of documents, chunks and the change log.

Every chunk insert and delete appends to ``changes`` in the same transaction,
so derived indexes can always catch up from the store alone.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from clawkb.fastinit import fast_init
from clawkb.store import db
from clawkb.types import Anchor, Chunk


def content_hash(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def anchor_id(path: str, chunk_hash: str, occurrence: int) -> str:
    """Stable anchor: same path and same chunk text give the same id across re-indexing."""
    key = f"{path}\0{chunk_hash}\0{occurrence}".encode()
    return hashlib.blake2b(key, digest_size=8).hexdigest()


#: a chunk's column values as ``chunks`` stores them, without ``doc_id``:
#: (anchor, ordinal, text, content_hash, heading_path json, line_start, line_end,
#: page, kind, has_code, has_table, language, links json)
ChunkValues = tuple[Any, ...]
_json = json.JSONEncoder(ensure_ascii=False).encode


def chunk_values(path: str, chunks: Sequence[Chunk]) -> list[ChunkValues]:
    """Column values of ``chunks`` of the document at ``path`` (anchors numbered by
    occurrence of the same text). Pure: ingest workers call it off the writer."""
    seen: dict[str, int] = {}
    out: list[ChunkValues] = []
    for ordinal, ch in enumerate(chunks):
        h = content_hash(ch.text.encode("utf-8"))
        occ = seen.get(h, 0)
        seen[h] = occ + 1
        links = ch.links
        out.append(
            (
                anchor_id(path, h, occ),
                ordinal,
                ch.text,
                h,
                _json(list(ch.heading_path)) if ch.heading_path else "[]",
                ch.line_start,
                ch.line_end,
                ch.page,
                ch.kind,
                int(ch.has_code),
                int(ch.has_table),
                ch.language,
                _json([[lk.target, lk.text, lk.kind] for lk in links]) if links else "[]",
            )
        )
    return out


@dataclass(frozen=True, slots=True)
class DocRow:
    id: int
    path: str
    root: str
    content_hash: str
    size: int
    mtime_ns: int
    title: str
    error: str | None
    parser: str = ""
    #: what produced the stored chunks (None: stored before versions were recorded)
    parser_version: str | None = None
    chunker_version: str | None = None


#: The document columns a :class:`DocRow` is built from, in order.
_DOC_COLS = (
    "id, path, root, content_hash, size, mtime_ns, title, error, parser, parser_version,"
    " chunker_version"
)


@fast_init  # built for every search hit
@dataclass(frozen=True, slots=True)
class ChunkRow:
    id: int
    doc_id: int
    path: str
    title: str
    anchor: str
    ordinal: int
    text: str
    heading_path: tuple[str, ...]
    line_start: int
    line_end: int
    page: int | None
    kind: str
    language: str | None
    metadata: dict[str, Any]
    trust: str | None = None  # tier (clawkb.knowledge); memory records are "memory"
    domain: str | None = None

    def to_anchor(self) -> Anchor:
        # positional (id, path, line_start, line_end, heading_path, page): made for every hit
        return Anchor(
            self.anchor, self.path, self.line_start, self.line_end, self.heading_path, self.page
        )


_BASE_COLS = (
    "c.id, c.doc_id, d.path, d.title, c.anchor, c.ordinal, c.text, c.heading_path,"
    " c.line_start, c.line_end, c.page, c.kind, c.language, d.metadata"
)
#: live reads add the document's trust tier and domain (clawkb.knowledge)
_CHUNK_COLS = (
    _BASE_COLS
    + ", COALESCE(d.trust, CASE WHEN d.path LIKE 'memory://%' THEN 'memory' END), d.domain"
)


@lru_cache(maxsize=8192)
def _heading_path(raw: str) -> tuple[str, ...]:
    """A stored heading path (JSON list); the same few recur across a document's chunks."""
    return tuple(json.loads(raw))


def _metadata(raw: str) -> dict[str, Any]:
    return {} if raw == "{}" else json.loads(raw)  # most documents have none


def _chunk_row(r: Sequence[Any]) -> ChunkRow:
    # positional, in ChunkRow's field order: keyword calls cost more than the SQL read
    return ChunkRow(
        r[0],  # id
        r[1],  # doc_id
        r[2],  # path
        r[3],  # title
        r[4],  # anchor
        r[5],  # ordinal
        r[6],  # text
        _heading_path(r[7]),
        r[8],  # line_start
        r[9],  # line_end
        r[10],  # page
        r[11],  # kind
        r[12],  # language
        _metadata(r[13]),
        r[14] if len(r) > 14 else None,  # trust (retired rows keep no tier)
        r[15] if len(r) > 15 else None,  # domain
    )


_RETIRED_COLS = (
    "id, doc_id, path, title, anchor, ordinal, text, heading_path,"
    " line_start, line_end, page, kind, language, metadata"
)


class Repository:
    """Thin typed access to the store; callers own transactions (:meth:`transaction`)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def transaction(self) -> AbstractContextManager[sqlite3.Connection]:
        """``with repo.transaction():`` — BEGIN IMMEDIATE, commit, rollback on any exception."""
        return db.transaction(self.conn)

    def read_snapshot(self) -> AbstractContextManager[sqlite3.Connection]:
        """``with repo.read_snapshot():`` — reads inside see one committed state."""
        return db.read_snapshot(self.conn)

    # -- documents --------------------------------------------------------
    def documents_by_paths(self, paths: Sequence[str]) -> dict[str, DocRow]:
        """The stored documents among ``paths`` (one query per 900 paths)."""
        out: dict[str, DocRow] = {}
        for i in range(0, len(paths), 900):
            part = list(paths[i : i + 900])
            q = f"SELECT {_DOC_COLS} FROM documents WHERE path IN ({','.join('?' * len(part))})"
            out.update((r[1], DocRow(*r)) for r in self.conn.execute(q, part))
        return out

    def document(self, path: str) -> DocRow | None:
        r = self.conn.execute(
            f"SELECT {_DOC_COLS} FROM documents WHERE path = ?",
            (path,),
        ).fetchone()
        return DocRow(*r) if r else None

    def documents_under(self, root: str) -> dict[str, DocRow]:
        """Documents indexed under ``root`` or any folder below it (whatever root they had)."""
        prefix = root.rstrip("/") + "/"
        rows = self.conn.execute(
            f"SELECT {_DOC_COLS} FROM documents WHERE root = ? OR substr(path, 1, ?) = ?",
            (root, len(prefix), prefix),
        )
        return {r[1]: DocRow(*r) for r in rows}

    def upsert_document(
        self,
        *,
        path: str,
        root: str,
        digest: str,
        size: int,
        mtime_ns: int,
        parser: str,
        title: str,
        encoding: str | None,
        metadata: dict[str, Any] | None = None,
        meta_json: str | None = None,
        new: bool = False,
        versions: tuple[str | None, str | None] = (None, None),
    ) -> int:
        """Insert or update by path; ``meta_json`` is ``metadata`` already encoded,
        ``new`` says the caller knows no row has this path (saves a lookup),
        ``versions`` is (parser version, chunker version) of the chunks stored."""
        meta = (
            meta_json
            if meta_json is not None
            else json.dumps(metadata or {}, ensure_ascii=False, default=str)
        )
        row = (
            None
            if new
            else self.conn.execute("SELECT id FROM documents WHERE path = ?", (path,)).fetchone()
        )
        # the columns after path, in the order of both statements
        values = (root, digest, size, mtime_ns, parser, title, encoding, meta, time.time())
        if row:
            self.conn.execute(
                "UPDATE documents SET root=?, content_hash=?, size=?, mtime_ns=?, parser=?,"
                " title=?, encoding=?, metadata=?, indexed_at=?, parser_version=?,"
                " chunker_version=?, error=NULL WHERE id=?",
                (*values, *versions, row[0]),
            )
            return int(row[0])
        cur = self.conn.execute(
            "INSERT INTO documents (path, root, content_hash, size, mtime_ns, parser, title,"
            " encoding, metadata, indexed_at, parser_version, chunker_version)"
            " VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
            (path, *values, *versions),
        )
        return int(cur.lastrowid or 0)

    def insert_documents(self, rows: Sequence[tuple[Any, ...]]) -> list[int]:
        """Insert new documents in one statement; return their ids in order.

        Each row: (path, root, content_hash, size, mtime_ns, parser, title,
        encoding, metadata json, parser version, chunker version). No row may
        have a path that is stored already.
        """
        if not rows:
            return []
        now = time.time()
        top = self.conn.execute("SELECT COALESCE(MAX(id), 0) FROM documents").fetchone()[0]
        self.conn.executemany(
            "INSERT INTO documents (path, root, content_hash, size, mtime_ns, parser, title,"
            " encoding, metadata, parser_version, chunker_version, indexed_at)"
            " VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
            [(*r, now) for r in rows],
        )
        # SQLite gives each new row max(id) + 1 while that fits (we hold the write
        # transaction); check it, and look the ids up by path if it did not hold.
        if self.conn.execute("SELECT MAX(id) FROM documents").fetchone()[0] == top + len(rows):
            return list(range(top + 1, top + len(rows) + 1))
        ids: dict[str, int] = {}
        for i in range(0, len(rows), 900):
            part = [r[0] for r in rows[i : i + 900]]
            q = f"SELECT path, id FROM documents WHERE path IN ({','.join('?' * len(part))})"
            ids.update(self.conn.execute(q, part))
        return [ids[r[0]] for r in rows]

    def touch_document(self, doc_id: int, size: int, mtime_ns: int) -> None:
        self.conn.execute(
            "UPDATE documents SET size=?, mtime_ns=?, error=NULL WHERE id=?",
            (size, mtime_ns, doc_id),
        )

    def mark_error(self, path: str, reason: str) -> None:
        self.conn.execute("UPDATE documents SET error=? WHERE path=?", (reason, path))

    def remove_document(self, doc: DocRow) -> None:
        self.delete_chunks(doc.id)
        self.conn.execute("DELETE FROM documents WHERE id = ?", (doc.id,))
        self.conn.execute(
            "INSERT INTO tombstones (path, content_hash, removed_at) VALUES (?,?,?)",
            (doc.path, doc.content_hash, time.time()),
        )

    # -- chunks -----------------------------------------------------------
    def delete_chunks(self, doc_id: int) -> int:
        """Delete a document's chunks, logging each; the rows move to ``retired_chunks``.

        A reader still searching an index generation that holds these chunk
        ids finds them there (the old version) until that generation is no
        longer in use (:meth:`purge_retired`).
        """
        ids = [r[0] for r in self.conn.execute("SELECT id FROM chunks WHERE doc_id=?", (doc_id,))]
        if ids:
            self.conn.executemany(
                "INSERT INTO changes (op, chunk_id) VALUES ('del', ?)", ((i,) for i in ids)
            )
            seq = int(self.conn.execute("SELECT MAX(seq) FROM changes").fetchone()[0])
            self.conn.execute(
                f"INSERT OR REPLACE INTO retired_chunks (retired_seq, root, {_RETIRED_COLS})"
                f" SELECT ?, d.root, {_BASE_COLS} FROM chunks c JOIN documents d ON d.id = c.doc_id"
                " WHERE c.doc_id = ?",
                (seq, doc_id),
            )
            self.conn.execute("DELETE FROM chunks WHERE doc_id=?", (doc_id,))
        return len(ids)

    def retired_by_ids(self, ids: Sequence[int]) -> dict[int, ChunkRow]:
        """Deleted chunks still kept for readers of an older index generation."""
        out: dict[int, ChunkRow] = {}
        for i in range(0, len(ids), 500):
            part = list(ids[i : i + 500])
            q = f"SELECT {_RETIRED_COLS} FROM retired_chunks WHERE id IN ({','.join('?' * len(part))})"
            for r in self.conn.execute(q, part):
                out[r[0]] = _chunk_row(r)
        return out

    def purge_retired(self, upto_seq: int) -> int:
        """Forget retired chunks deleted at or before ``upto_seq`` (no reader needs them)."""
        cur = self.conn.execute("DELETE FROM retired_chunks WHERE retired_seq <= ?", (upto_seq,))
        return cur.rowcount

    def insert_chunks(self, doc_id: int, path: str, chunks: Sequence[Chunk]) -> int:
        return self.insert_chunk_values([(doc_id, chunk_values(path, chunks))])

    def insert_chunk_values(self, docs: Sequence[tuple[int, Sequence[ChunkValues]]]) -> int:
        """Insert prepared chunk rows of several documents and log each as an add.

        Two statements for the whole batch: one ``executemany`` for the rows,
        one ``INSERT … SELECT`` for the log (ids are AUTOINCREMENT, so the new
        rows are exactly those above the largest id seen before).
        """
        rows = [(doc_id, *v) for doc_id, values in docs for v in values]
        if not rows:
            return 0
        before = self.conn.execute(
            "SELECT COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'chunks'), 0)"
        ).fetchone()[0]
        self.conn.executemany(
            "INSERT INTO chunks (doc_id, anchor, ordinal, text, content_hash, heading_path,"
            " line_start, line_end, page, kind, has_code, has_table, language, links)"
            " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            rows,
        )
        self.conn.execute(
            "INSERT INTO changes (op, chunk_id) SELECT 'add', id FROM chunks WHERE id > ? ORDER BY id",
            (before,),
        )
        return len(rows)

    def chunks_by_ids(self, ids: Iterable[int]) -> dict[int, ChunkRow]:
        ids = list(ids)
        out: dict[int, ChunkRow] = {}
        for i in range(0, len(ids), 500):
            part = ids[i : i + 500]
            q = f"SELECT {_CHUNK_COLS} FROM chunks c JOIN documents d ON d.id = c.doc_id WHERE c.id IN ({','.join('?' * len(part))})"
            for r in self.conn.execute(q, part):
                out[r[0]] = _chunk_row(r)
        if len(out) < len(ids):
            # Chunks deleted since the reader's index generation was built:
            # the reader sees their old version, never a hole.
            out.update(self.retired_by_ids([i for i in ids if i not in out]))
        return out

    def chunk_by_anchor(self, anchor: str) -> ChunkRow | None:
        if not anchor:
            return None
        # A range on the UNIQUE anchor index (LIKE would scan every chunk and read
        # `_`/`%` in an anchor as wildcards).
        r = self.conn.execute(
            f"SELECT {_CHUNK_COLS} FROM chunks c JOIN documents d ON d.id = c.doc_id"
            " WHERE c.anchor >= ? AND c.anchor < ? ORDER BY c.anchor = ? DESC LIMIT 2",
            (anchor, _prefix_end(anchor), anchor),
        ).fetchall()
        if len(r) == 1 or (r and r[0][4] == anchor):
            return _chunk_row(r[0])
        return None

    def anchors_with_prefix(self, prefix: str, limit: int) -> list[tuple[str, str, int]]:
        """(anchor, path, line_start) of up to ``limit`` chunks whose anchor starts with ``prefix``."""
        rows = self.conn.execute(
            "SELECT c.anchor, d.path, c.line_start FROM chunks c JOIN documents d"
            " ON d.id = c.doc_id WHERE c.anchor >= ? AND c.anchor < ? ORDER BY c.anchor LIMIT ?",
            (prefix, _prefix_end(prefix), limit),
        )
        return [(r[0], r[1], int(r[2])) for r in rows]

    def chunks_of_doc(self, doc_id: int) -> list[ChunkRow]:
        rows = self.conn.execute(
            f"SELECT {_CHUNK_COLS} FROM chunks c JOIN documents d ON d.id = c.doc_id"
            " WHERE c.doc_id = ? ORDER BY c.ordinal",
            (doc_id,),
        )
        return [_chunk_row(r) for r in rows]

    def chunk_ids_under_path(self, prefix: str) -> list[int]:
        """Ids of the chunks (live or retired) whose document path starts with ``prefix``."""
        end = _prefix_end(prefix)
        rows = self.conn.execute(
            "SELECT c.id FROM documents d JOIN chunks c ON c.doc_id = d.id"
            " WHERE d.path >= ? AND d.path < ?"
            " UNION ALL SELECT id FROM retired_chunks WHERE path >= ? AND path < ?",
            (prefix, end, prefix, end),
        )
        return [r[0] for r in rows]

    # -- search-path queries (retrieve/, answer/) ---------------------------
    def chunks_by_anchors(self, anchors: Sequence[str]) -> dict[str, ChunkRow]:
        """Exact-anchor lookup (the UNIQUE index, unlike :meth:`chunk_by_anchor`'s prefix)."""
        out: dict[str, ChunkRow] = {}
        anchors = list(anchors)
        for i in range(0, len(anchors), 500):
            part = anchors[i : i + 500]
            q = (
                f"SELECT {_CHUNK_COLS} FROM chunks c JOIN documents d ON d.id = c.doc_id"
                f" WHERE c.anchor IN ({','.join('?' * len(part))})"
            )
            for r in self.conn.execute(q, part):
                out[r[4]] = _chunk_row(r)
        return out

    def chunk_mtimes(self, ids: Sequence[int]) -> dict[int, float]:
        """Chunk id -> its file's modification time (epoch seconds)."""
        out: dict[int, float] = {}
        for i in range(0, len(ids), 900):
            part = list(ids[i : i + 900])
            q = (
                "SELECT c.id, d.mtime_ns FROM chunks c JOIN documents d ON d.id = c.doc_id"
                f" WHERE c.id IN ({','.join('?' * len(part))})"
            )
            for cid, mtime_ns in self.conn.execute(q, part):
                out[cid] = (mtime_ns or 0) / 1e9
        return out

    def chunk_ids_filtered(
        self,
        *,
        path_globs: Sequence[str] = (),
        doc_types: Sequence[str] = (),
        metadata: Sequence[tuple[str, str | None]] = (),
        since_ns: int | None = None,
        until_ns: int | None = None,
    ) -> list[int]:
        """Sorted chunk ids passing every filter: path glob (absolute or relative to
        the root), parser name or extension, metadata key (=value), file mtime range."""
        where: list[str] = []
        params: list[object] = []
        if path_globs:
            ors = " OR ".join(
                "d.path GLOB ? OR substr(d.path, length(d.root) + 2) GLOB ?" for _ in path_globs
            )
            where.append(f"({ors})")
            for g in path_globs:
                params += [g, g]
        if doc_types:
            parts = []
            for t in doc_types:
                t = t.lower().lstrip(".")
                parts.append("(d.parser = ? OR lower(d.path) LIKE ?)")
                params += [t, f"%.{t}"]
            where.append("(" + " OR ".join(parts) + ")")
        for key, value in metadata:
            path = "$." + '"' + key.replace('"', "") + '"'
            if value is None:
                where.append("json_extract(d.metadata, ?) IS NOT NULL")
                params.append(path)
            else:
                where.append("CAST(json_extract(d.metadata, ?) AS TEXT) = ?")
                params += [path, value]
        if since_ns is not None:
            where.append("d.mtime_ns >= ?")
            params.append(since_ns)
        if until_ns is not None:
            where.append("d.mtime_ns <= ?")
            params.append(until_ns)
        q = "SELECT c.id FROM chunks c JOIN documents d ON d.id = c.doc_id"
        if where:
            q += " WHERE " + " AND ".join(where)
        ids = [r[0] for r in self.conn.execute(q + " ORDER BY c.id", params)]
        if path_globs and not (metadata or since_ns is not None or until_ns is not None):
            # Retired chunks count too: a reader of an older index generation filters
            # the chunks that generation holds (their rows keep path and root only).
            ids = sorted(set(ids).union(self._retired_ids(path_globs, doc_types)))
        return ids

    def _retired_ids(self, path_globs: Sequence[str], doc_types: Sequence[str]) -> list[int]:
        where = [
            " OR ".join("path GLOB ? OR substr(path, length(root) + 2) GLOB ?" for _ in path_globs)
        ]
        params: list[object] = [g for g in path_globs for _ in (0, 1)]
        if doc_types:
            where.append(" OR ".join("lower(path) LIKE ?" for _ in doc_types))
            params += [f"%.{t.lower().lstrip('.')}" for t in doc_types]
        q = "SELECT id FROM retired_chunks WHERE " + " AND ".join(f"({w})" for w in where)
        return [r[0] for r in self.conn.execute(q, params)]

    # -- change log -------------------------------------------------------
    def max_seq(self) -> int:
        """The latest change sequence, even when the log has been pruned empty."""
        r = self.conn.execute("SELECT MAX(seq) FROM changes").fetchone()
        return max(int(r[0] or 0), self.pruned_upto())

    def pending_after(self, seq: int) -> int:
        """How many logged changes come after ``seq``."""
        return int(
            self.conn.execute("SELECT COUNT(*) FROM changes WHERE seq > ?", (seq,)).fetchone()[0]
        )

    def changes_since(self, seq: int, limit: int) -> list[tuple[int, str, int]]:
        return self.conn.execute(
            "SELECT seq, op, chunk_id FROM changes WHERE seq > ? ORDER BY seq LIMIT ?", (seq, limit)
        ).fetchall()

    def prune_changes(self, upto: int) -> None:
        """Drop applied log rows; remember how far, so a lagging index knows to rebuild.

        A ``changes_hold:<name>`` meta row (a replica's cursor, e.g. a Milvus
        sync) keeps every change past it until that replica has applied it.
        """
        hold = self.conn.execute(
            "SELECT MIN(CAST(value AS INTEGER)) FROM meta WHERE key LIKE 'changes_hold:%'"
        ).fetchone()[0]
        if hold is not None:
            upto = min(upto, int(hold))
        if upto <= self.pruned_upto():
            return
        self.conn.execute("DELETE FROM changes WHERE seq <= ?", (upto,))
        self.conn.execute(
            "INSERT OR REPLACE INTO meta (key, value) VALUES ('changes_pruned_upto', ?)",
            (str(upto),),
        )

    def pruned_upto(self) -> int:
        r = self.conn.execute("SELECT value FROM meta WHERE key = 'changes_pruned_upto'").fetchone()
        return int(r[0]) if r else 0

    def index_rows(self, ids: Sequence[int]) -> Iterator[tuple[int, str, str, str, str]]:
        """(chunk id, doc title, heading_path json, kind, text) for the lexical indexer."""
        for i in range(0, len(ids), 900):
            part = ids[i : i + 900]
            q = (
                "SELECT c.id, d.title, c.heading_path, c.kind, c.text FROM chunks c"
                f" JOIN documents d ON d.id = c.doc_id WHERE c.id IN ({','.join('?' * len(part))})"
                " ORDER BY c.id"
            )
            yield from self.conn.execute(q, part)

    def all_chunk_ids(self) -> list[int]:
        return [r[0] for r in self.conn.execute("SELECT id FROM chunks ORDER BY id")]

    def chunk_count(self) -> int:
        return int(self.conn.execute("SELECT COUNT(*) FROM chunks").fetchone()[0])

    def counts(self) -> dict[str, int]:
        def one(q: str) -> int:
            return int(self.conn.execute(q).fetchone()[0])

        return {
            "documents": one("SELECT COUNT(*) FROM documents"),
            "chunks": one("SELECT COUNT(*) FROM chunks"),
            "failed": one("SELECT COUNT(*) FROM documents WHERE error IS NOT NULL"),
            "tombstones": one("SELECT COUNT(*) FROM tombstones"),
            "pending_changes": one("SELECT COUNT(*) FROM changes"),
        }


def _prefix_end(prefix: str) -> str:
    """The smallest string above every string that starts with ``prefix``."""
    if not prefix:
        return "\U0010ffff"
    return prefix[:-1] + chr(ord(prefix[-1]) + 1)
