"""Replay the store's change log into Milvus: idempotent, resumable, batched.

The ingesting machine keeps its SQLite store as the truth. For each Milvus
target the store's ``meta`` holds a cursor, ``changes_hold:milvus:<target>``:
the last change sequence applied there. It also holds the change log back
from pruning (:meth:`Repository.prune_changes` keeps everything past the
lowest hold), so the lexical index and Milvus replay the same log at their
own pace. One step: embed chunks that lack a vector (local embedder, once),
then per batch of changes delete the removed chunk ids and upsert the added
chunks that still exist, then advance the cursor. A step killed anywhere is
simply replayed (deletes by id and upserts by anchor are idempotent). When
the log was pruned past the cursor (the backend was configured after
indexing), a full reconcile compares chunk ids instead. When the collection
records another row-text version for this KB's rows (or none: rows written
before it was kept), every row of this KB is rewritten and the version recorded
(:data:`clawkb.backends.milvus_schema.ROW_TEXT_VERSION`).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from clawkb.backends.milvus_filters import quote
from clawkb.backends.milvus_rows import build_rows
from clawkb.backends.milvus_schema import (
    NO_MODEL,
    ROW_TEXT_PREFIX,
    ROW_TEXT_VERSION,
    UNKNOWN_ROW_TEXT,
    client,
    open_collection,
    row_text_versions,
    set_row_text,
)
from clawkb.backends.settings import MilvusSettings
from clawkb.store import db

if TYPE_CHECKING:
    from clawkb.kb import KnowledgeBase

HOLD_PREFIX = "changes_hold:milvus:"
SOURCE_KEY = "kb_id"

Progress = Callable[[int, int], None]


@dataclass
class SyncReport:
    applied: int = 0  # changes replayed
    upserted: int = 0
    deleted: int = 0
    embedded: int = 0
    full: bool = False
    #: every row of this KB rewritten: the collection had another row-text version
    rebuilt: bool = False
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "seconds": round(self.seconds, 3)}


def source_id(kb: KnowledgeBase) -> str:
    """This KB's id in shared collections (made once, kept in the store)."""
    value = db.get_meta(kb.conn, SOURCE_KEY)
    if value is None:
        value = uuid.uuid4().hex[:16]
        with db.transaction(kb.conn):
            db.set_meta(kb.conn, SOURCE_KEY, value)
    return value


def cursor(kb: KnowledgeBase, s: MilvusSettings) -> int | None:
    raw = db.get_meta(kb.conn, HOLD_PREFIX + s.key)
    return None if raw is None else int(raw)


def _set_cursor(kb: KnowledgeBase, s: MilvusSettings, seq: int) -> None:
    with db.transaction(kb.conn):
        db.set_meta(kb.conn, HOLD_PREFIX + s.key, str(seq))


def model_of(kb: KnowledgeBase, s: MilvusSettings) -> tuple[str, int, Any]:
    """(model key, dim, embedder) of the KB's configured embedder; none when not dense."""
    if not s.dense:
        return NO_MODEL, 0, None
    from clawkb.embed.run import kb_embedder
    from clawkb.embed.vectors import model_key

    emb = kb_embedder(kb)
    sig = emb.signature()
    return model_key(sig), int(sig["dim"]), emb


def sync_milvus(
    kb: KnowledgeBase, s: MilvusSettings, *, full: bool = False, progress: Progress | None = None
) -> SyncReport:
    """Bring the collection up to date with the store (the caller holds the write lock)."""
    t0 = time.perf_counter()
    rep = SyncReport()
    mkey, dim, emb = model_of(kb, s)
    sig = json.dumps(emb.signature(), sort_keys=True) if emb is not None else ""
    src = source_id(kb)
    props = open_collection(
        s, dim=dim, model=mkey, create=True, k1=kb.config.k1, b=kb.config.field_b[1],
        signature=sig, source=src,
    )  # fmt: skip
    rebuild = props.get(ROW_TEXT_PREFIX + src) != ROW_TEXT_VERSION
    if emb is not None:
        from clawkb.embed.vectors import embed_pending

        rep.embedded = embed_pending(kb.conn, emb).embedded
    vec_key = mkey if emb is not None else None
    pos = cursor(kb, s)
    if full or rebuild or pos is None or pos < kb.repo.pruned_upto():
        start = kb.repo.max_seq()
        _set_cursor(kb, s, -1)  # "compare pending": holds the whole log; a kill repeats it
        _reconcile(kb, s, src, vec_key, rep, progress, rewrite=rebuild)
        if rebuild:
            record_row_text(s, src, props)
            rep.rebuilt = True
        pos = start
        _set_cursor(kb, s, pos)
        rep.full = True
    total = kb.repo.max_seq() - pos
    while True:
        changes = kb.repo.changes_since(pos, s.batch)
        if not changes:
            break
        added: dict[int, bool] = {}
        deleted: list[int] = []
        for _, op, cid in changes:
            if op == "add":
                added[cid] = True
            else:
                added.pop(cid, None)
                deleted.append(cid)
        rep.deleted += _delete_ids(s, src, deleted)
        rep.upserted += _upsert(kb, s, src, sorted(added), vec_key)
        pos = changes[-1][0]
        _set_cursor(kb, s, pos)
        rep.applied += len(changes)
        if progress:
            progress(min(rep.applied, total), total)
        if s.throttle_ms > 0:
            time.sleep(s.throttle_ms / 1000)
    if rep.upserted or rep.deleted:
        # Seal what was written: Milvus searches unsealed (growing) segments by brute
        # force, measured 25x slower on Milvus Lite at 1.8k rows.
        client(s).flush(s.collection)
    kb.repo.prune_changes(min(pos, kb.lexical.applied_seq))
    rep.seconds = time.perf_counter() - t0
    return rep


def _delete_ids(s: MilvusSettings, src: str, ids: list[int]) -> int:
    for i in range(0, len(ids), 1000):
        part = ids[i : i + 1000]
        client(s).delete(s.collection, filter=f'source == "{src}" and chunk_id in {part}')
    return len(ids)


def _upsert(
    kb: KnowledgeBase, s: MilvusSettings, src: str, ids: list[int], vec_key: str | None
) -> int:
    n = 0
    for i in range(0, len(ids), s.batch):
        rows = build_rows(kb.conn, src, ids[i : i + s.batch], vec_key)
        if rows:
            client(s).upsert(s.collection, rows)
            n += len(rows)
    return n


def remote_chunk_ids(s: MilvusSettings, src: str) -> set[int]:
    """Every chunk id this KB has in the collection."""
    it = client(s).query_iterator(
        s.collection, batch_size=2000, filter=f'source == "{src}"', output_fields=["chunk_id"]
    )
    out: set[int] = set()
    try:
        while True:
            page = it.next()
            if not page:
                break
            out.update(int(r["chunk_id"]) for r in page)
    finally:
        it.close()
    return out


def record_row_text(s: MilvusSettings, src: str, props: dict[str, str]) -> None:
    """Every row of ``src`` was just written: record this row-text version for it. In a
    collection that kept no version (rows written before it was kept), the other
    sources' rows are marked unknown, so searches ask for them to be rewritten too."""
    versions = {src: ROW_TEXT_VERSION}
    if "clawkb.rowtext" not in props and not row_text_versions(props):
        versions.update(dict.fromkeys(other_sources(s, src), UNKNOWN_ROW_TEXT))
    set_row_text(s, versions)


def other_sources(s: MilvusSettings, src: str) -> list[str]:
    """The sources other than ``src`` with rows in the collection (one query per source)."""
    found: list[str] = []
    while True:
        expr = f"source != {quote(src)}" + "".join(f" and source != {quote(o)}" for o in found)
        rows = client(s).query(s.collection, filter=expr, output_fields=["source"], limit=1)
        if not rows:
            return found
        found.append(str(rows[0]["source"]))


def _reconcile(
    kb: KnowledgeBase,
    s: MilvusSettings,
    src: str,
    vec_key: str | None,
    rep: SyncReport,
    progress: Progress | None,
    *,
    rewrite: bool = False,
) -> None:
    """Delete the rows of chunks the store no longer has, then upsert the chunks the
    collection lacks (with ``rewrite``: every chunk, so every row gets today's text)."""
    have = remote_chunk_ids(s, src)
    local = kb.repo.all_chunk_ids()
    rep.deleted += _delete_ids(s, src, sorted(have - set(local)))
    todo = local if rewrite else [i for i in local if i not in have]
    for i in range(0, len(todo), s.batch):
        rep.upserted += _upsert(kb, s, src, todo[i : i + s.batch], vec_key)
        if progress:
            progress(min(i + s.batch, len(todo)), len(todo))


def sync_status(kb: KnowledgeBase, s: MilvusSettings) -> dict[str, Any]:
    """The ``backend`` block of ``clawkb status``: where, and how far behind."""
    pos = cursor(kb, s)
    head = kb.repo.max_seq()
    lag = head if pos is None else kb.repo.pending_after(pos)
    return {
        **s.describe(),
        "applied_seq": pos,
        "store_seq": head,
        "lag_changes": lag,
        "synced": pos is not None and lag == 0,
    }
