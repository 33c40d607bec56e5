"""Compute and keep chunk vectors in the store: batched, resumable, content-hash cached.

A run embeds every chunk that has no vector for the active embedder yet. Each
batch commits on its own, so a killed run keeps what it finished and the next
run starts where it stopped. Vectors are keyed by the content hash of the text
that is embedded (title, section path and chunk text), so re-indexing a file
whose text did not change never embeds it again. The embedder's signature
(model, dim, prefix scheme, normalisation) is recorded in ``meta``; asking for
another model is a clear error naming ``clawkb reindex --vectors``.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any

import numpy as np

from clawkb.embed.base import Embedder
from clawkb.errors import IndexError_
from clawkb.store import db, vectors_repo
from clawkb.store.repo import content_hash
from clawkb.store.vectors_repo import (
    SIGNATURE_KEY,
    VERSION_KEY,
    data_version,
    model_key,
    stored_signature,
)

__all__ = [
    "BATCH",
    "SIGNATURE_KEY",
    "VERSION_KEY",
    "EmbedReport",
    "Progress",
    "bump_version",
    "check_signature",
    "clear_vectors",
    "data_version",
    "embed_pending",
    "embed_text",
    "model_key",
    "pending_chunk_ids",
    "stored_signature",
]

#: Texts sent to the embedder per committed batch.
BATCH = 64

Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class EmbedReport:
    model: str
    embedded: int  # texts sent to the model
    reused: int  # chunks whose text already had a vector
    total: int  # chunks with a vector after the run
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "seconds": round(self.seconds, 3)}


def check_signature(conn: sqlite3.Connection, signature: dict[str, Any]) -> None:
    """Refuse to mix models: the stored vectors must come from ``signature``'s model."""
    check_stored(stored_signature(conn), signature)


def check_stored(stored: dict[str, Any] | None, signature: dict[str, Any]) -> None:
    """:func:`check_signature` on a stored signature already read."""
    if stored is not None and model_key(stored) != model_key(signature):
        raise IndexError_(
            f"the knowledge base's vectors were made by {model_key(stored)!r} but the configured"
            f" embedder is {model_key(signature)!r}; run `clawkb reindex --vectors` to re-embed"
            " with the configured model (or set embedding.model back)"
        )


def embed_text(title: str, heading_json: str, text: str) -> str:
    """What the model sees for a chunk: where it sits, then what it says."""
    heading = [h for h in json.loads(heading_json) if h and h != title]
    head = " > ".join([title, *heading] if title else heading)
    return f"{head}\n{text}" if head else text


def bump_version(conn: sqlite3.Connection) -> None:
    """Mark the vectors changed (dense search copies and caches reload)."""
    db.set_meta(conn, VERSION_KEY, str(data_version(conn) + 1))


def clear_vectors(conn: sqlite3.Connection) -> None:
    """Forget every vector and the recorded model (`clawkb reindex --vectors`)."""
    with db.transaction(conn):
        vectors_repo.delete_all(conn, SIGNATURE_KEY)
        bump_version(conn)


def pending_chunk_ids(conn: sqlite3.Connection, mkey: str) -> list[int]:
    return vectors_repo.pending_chunk_ids(conn, mkey)


def embed_pending(
    conn: sqlite3.Connection,
    embedder: Embedder,
    *,
    batch: int = BATCH,
    progress: Progress | None = None,
    clock: Callable[[], float] | None = None,
    commit_lock: Callable[[], AbstractContextManager[object]] | None = None,
) -> EmbedReport:
    """Embed every chunk without a vector for ``embedder``; commit batch by batch.

    ``commit_lock`` (the KB write lock) is held only around each short
    commit, never while the model runs, so other writers interleave.
    """
    import time

    now = clock or time.perf_counter
    started = now()
    signature = embedder.signature()
    check_signature(conn, signature)
    mkey = model_key(signature)
    lock = commit_lock or nullcontext
    with lock(), db.transaction(conn):
        check_signature(conn, signature)  # again: another run may have started meanwhile
        db.set_meta(conn, SIGNATURE_KEY, json.dumps(signature, sort_keys=True))
        vectors_repo.drop_deleted_chunks(conn, mkey)
        bump_version(conn)
    todo = pending_chunk_ids(conn, mkey)
    embedded = reused = 0
    for start in range(0, len(todo), batch):
        e, r = _embed_batch(conn, embedder, mkey, todo[start : start + batch], lock)
        embedded += e
        reused += r
        if progress:
            progress(min(start + batch, len(todo)), len(todo))
    with lock():
        _sweep_orphans(conn, mkey)
    total = vectors_repo.count(conn, mkey)
    return EmbedReport(mkey, embedded, reused, total, now() - started)


def _embed_batch(
    conn: sqlite3.Connection,
    embedder: Embedder,
    mkey: str,
    ids: Sequence[int],
    lock: Callable[[], AbstractContextManager[object]],
) -> tuple[int, int]:
    rows = vectors_repo.embed_inputs(conn, ids)
    keyed = [(cid, embed_text(t, h, x)) for cid, t, h, x in rows]
    keys = {cid: content_hash(text.encode("utf-8")) for cid, text in keyed}
    have = vectors_repo.existing_keys(conn, mkey, sorted(set(keys.values())))
    new: dict[str, str] = {}
    for cid, text in keyed:
        if keys[cid] not in have:
            new.setdefault(keys[cid], text)
    vecs = embedder.embed_documents(list(new.values())) if new else np.zeros((0, 0))
    if len(vecs) != len(new):
        raise IndexError_(f"embedder {mkey!r} returned {len(vecs)} vectors for {len(new)} texts")
    with lock(), db.transaction(conn):
        vectors_repo.save(
            conn,
            mkey,
            ((k, np.asarray(v, "<f4").tobytes()) for k, v in zip(new, vecs, strict=True)),
            keys.items(),
        )
        bump_version(conn)
    return len(new), len(keys) - sum(1 for k in keys.values() if k in new)


def _sweep_orphans(conn: sqlite3.Connection, mkey: str) -> None:
    """Drop vectors no chunk uses any more (their text was edited or deleted)."""
    with db.transaction(conn):
        vectors_repo.sweep_orphans(conn, mkey)
