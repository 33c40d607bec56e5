"""Rows of ``vectors`` and ``chunk_vectors``: the SQL behind the dense embedder.

Callers own transactions (``db.transaction``) and the write lock; these
functions only read and write rows.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any

from clawkb.store import db

#: ``meta`` keys: the embedder signature the stored vectors were made with, and a
#: counter bumped on every committed vector batch.
SIGNATURE_KEY = "dense_signature"
VERSION_KEY = "dense_version"
#: bumped when every vector is dropped (``reindex --vectors``): a search copy made
#: before that is rebuilt in full, never updated row by row
EPOCH_KEY = "dense_epoch"


def model_key(signature: dict[str, Any]) -> str:
    """The key vectors are stored under: model, dimension, prefix scheme, normalisation,
    and the model's document layout when it has one (e5-small's windows, from layout 2)."""
    norm = "norm" if signature.get("normalized") else "raw"
    key = f"{signature['model']}|{signature['dim']}|{signature['prefix']}|{norm}"
    layout = signature.get("layout")
    return f"{key}|layout{layout}" if layout is not None else key


def stored_signature(conn: sqlite3.Connection) -> dict[str, Any] | None:
    """The signature of the embedder the stored vectors came from (None: no vectors)."""
    raw = db.get_meta(conn, SIGNATURE_KEY)
    if not raw:
        return None
    sig: dict[str, Any] = json.loads(raw)
    return sig


def data_version(conn: sqlite3.Connection) -> int:
    """Bumped on every committed vector batch: part of the search cache's stamp."""
    return int(db.get_meta(conn, VERSION_KEY) or 0)


def epoch(conn: sqlite3.Connection) -> int:
    """How many times every vector was dropped (see :data:`EPOCH_KEY`)."""
    return int(db.get_meta(conn, EPOCH_KEY) or 0)


def delete_all(conn: sqlite3.Connection, signature_key: str) -> None:
    """Forget every vector and the recorded embedder signature."""
    conn.execute("DELETE FROM chunk_vectors")
    conn.execute("DELETE FROM vectors")
    conn.execute("DELETE FROM meta WHERE key = ?", (signature_key,))
    db.set_meta(conn, EPOCH_KEY, str(epoch(conn) + 1))


def drop_deleted_chunks(conn: sqlite3.Connection, mkey: str) -> None:
    """Drop ``mkey``'s chunk links whose chunk no longer exists."""
    conn.execute(
        "DELETE FROM chunk_vectors WHERE model = ? AND chunk_id NOT IN (SELECT id FROM chunks)",
        (mkey,),
    )


def pending_chunk_ids(conn: sqlite3.Connection, mkey: str) -> list[int]:
    """Chunks without a vector for ``mkey``, in id order."""
    rows = conn.execute(
        "SELECT c.id FROM chunks c LEFT JOIN chunk_vectors cv"
        " ON cv.model = ? AND cv.chunk_id = c.id WHERE cv.chunk_id IS NULL ORDER BY c.id",
        (mkey,),
    )
    return [r[0] for r in rows]


def count(conn: sqlite3.Connection, mkey: str) -> int:
    """Chunks that have a vector for ``mkey``."""
    row = conn.execute("SELECT COUNT(*) FROM chunk_vectors WHERE model = ?", (mkey,)).fetchone()
    return int(row[0])


def embed_inputs(conn: sqlite3.Connection, ids: Sequence[int]) -> list[tuple[int, str, str, str]]:
    """``(chunk id, document title, heading_path json, text)`` of the given chunks."""
    marks = ",".join("?" * len(ids))
    rows = conn.execute(
        "SELECT c.id, d.title, c.heading_path, c.text FROM chunks c"
        f" JOIN documents d ON d.id = c.doc_id WHERE c.id IN ({marks})",
        list(ids),
    ).fetchall()
    return [(int(r[0]), r[1], r[2], r[3]) for r in rows]


def existing_keys(conn: sqlite3.Connection, mkey: str, keys: list[str]) -> set[str]:
    """The subset of ``keys`` that already has a vector for ``mkey``."""
    out: set[str] = set()
    for i in range(0, len(keys), 900):
        part = keys[i : i + 900]
        q = f"SELECT key FROM vectors WHERE model = ? AND key IN ({','.join('?' * len(part))})"
        out.update(r[0] for r in conn.execute(q, [mkey, *part]))
    return out


def save(
    conn: sqlite3.Connection,
    mkey: str,
    vectors: Iterable[tuple[str, bytes]],
    chunk_keys: Iterable[tuple[int, str]],
) -> None:
    """Store ``(key, float32 bytes)`` vectors and ``(chunk id, key)`` links for ``mkey``."""
    conn.executemany(
        "INSERT OR REPLACE INTO vectors (model, key, vec) VALUES (?,?,?)",
        ((mkey, k, blob) for k, blob in vectors),
    )
    conn.executemany(
        "INSERT OR REPLACE INTO chunk_vectors (model, chunk_id, key) VALUES (?,?,?)",
        ((mkey, cid, k) for cid, k in chunk_keys),
    )


def sweep_orphans(conn: sqlite3.Connection, mkey: str) -> None:
    """Drop ``mkey``'s vectors that no chunk uses any more."""
    conn.execute(
        "DELETE FROM vectors WHERE model = ? AND key NOT IN"
        " (SELECT key FROM chunk_vectors WHERE model = ?)",
        (mkey, mkey),
    )


def matrix_rows(conn: sqlite3.Connection, mkey: str) -> list[tuple[int, bytes]]:
    """``(chunk id, float32 bytes)`` of every live chunk's ``mkey`` vector, by chunk id."""
    rows = conn.execute(
        "SELECT cv.chunk_id, v.vec FROM chunk_vectors cv"
        " JOIN vectors v ON v.model = cv.model AND v.key = cv.key"
        " JOIN chunks c ON c.id = cv.chunk_id WHERE cv.model = ? ORDER BY cv.chunk_id",
        (mkey,),
    ).fetchall()
    return [(int(r[0]), r[1]) for r in rows]


def linked_ids(conn: sqlite3.Connection, mkey: str) -> list[int]:
    """Live chunks linked to an ``mkey`` vector, by id: :func:`matrix_rows`' ids without
    reading a vector (a link to a missing vector, which only damage leaves, included)."""
    rows = conn.execute(
        "SELECT cv.chunk_id FROM chunk_vectors cv JOIN chunks c ON c.id = cv.chunk_id"
        " WHERE cv.model = ? ORDER BY cv.chunk_id",
        (mkey,),
    )
    return [r[0] for r in rows]


def health_counts(conn: sqlite3.Connection, mkey: str) -> tuple[int, int, int]:
    """``(orphan links, links to a missing vector, unused vectors)`` for ``mkey``."""

    def one(q: str) -> int:
        return int(conn.execute(q, (mkey,) * q.count("?")).fetchone()[0])

    orphans = one(
        "SELECT COUNT(*) FROM chunk_vectors WHERE model = ? AND chunk_id NOT IN (SELECT id FROM chunks)"
    )
    dangling = one(
        "SELECT COUNT(*) FROM chunk_vectors cv WHERE cv.model = ? AND NOT EXISTS"
        " (SELECT 1 FROM vectors v WHERE v.model = cv.model AND v.key = cv.key)"
    )
    unused = one(
        "SELECT COUNT(*) FROM vectors WHERE model = ? AND key NOT IN"
        " (SELECT key FROM chunk_vectors WHERE model = ?)"
    )
    return orphans, dangling, unused


def drop_stray(conn: sqlite3.Connection, mkey: str) -> None:
    """Drop ``mkey``'s links to deleted chunks or missing vectors, then unused vectors."""
    conn.execute(
        "DELETE FROM chunk_vectors WHERE model = ? AND (chunk_id NOT IN (SELECT id FROM chunks)"
        " OR key NOT IN (SELECT key FROM vectors WHERE model = ?))",
        (mkey, mkey),
    )
    sweep_orphans(conn, mkey)


def vectors_of(conn: sqlite3.Connection, mkey: str, ids: Sequence[int]) -> list[tuple[int, bytes]]:
    """``(chunk id, float32 bytes)`` of the given chunks' ``mkey`` vectors (any number
    of ids: asked 900 at a time)."""
    out: list[tuple[int, bytes]] = []
    for i in range(0, len(ids), 900):
        part = [int(c) for c in ids[i : i + 900]]
        marks = ",".join("?" * len(part))
        rows = conn.execute(
            "SELECT cv.chunk_id, v.vec FROM chunk_vectors cv JOIN vectors v"
            " ON v.model = cv.model AND v.key = cv.key"
            f" WHERE cv.model = ? AND cv.chunk_id IN ({marks})",
            [mkey, *part],
        ).fetchall()
        out.extend((r[0], r[1]) for r in rows)
    return out
