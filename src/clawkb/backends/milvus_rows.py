"""Store chunks → Milvus rows (fields of :mod:`clawkb.backends.milvus_schema`)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Any

import numpy as np

from clawkb.backends.milvus_schema import TITLE_REPEAT
from clawkb.backends.surrogate import surrogate_text
from clawkb.errors import IndexError_
from clawkb.ingest.sync import doc_fields
from clawkb.store import replica_repo, vectors_repo

MEMORY_PREFIX = "memory://"
_TEXT_BYTES = 65000


def namespace_of(path: str) -> str:
    """The memory namespace of ``memory://<ns>/<id>`` documents, "" for files."""
    if not path.startswith(MEMORY_PREFIX):
        return ""
    return path[len(MEMORY_PREFIX) :].partition("/")[0] or "default"


def lexical_terms(chunk_id: int, title: str, heading_json: str, kind: str, text: str) -> str:
    """clawkb's tokens of a chunk as surrogate words: the title field's tokens
    :data:`~clawkb.backends.milvus_schema.TITLE_REPEAT` times (the local BM25F title
    weight), then the body or code tokens. Change it and bump
    :data:`~clawkb.backends.milvus_schema.ROW_TEXT_VERSION`."""
    f = doc_fields(chunk_id, title, heading_json, kind, text)
    return surrogate_text([*(f.title * TITLE_REPEAT), *f.body, *f.code])


def _cut(text: str, limit: int = _TEXT_BYTES) -> str:
    raw = text.encode("utf-8")
    return text if len(raw) <= limit else raw[:limit].decode("utf-8", "ignore")


def vectors_for(conn: sqlite3.Connection, mkey: str, ids: Sequence[int]) -> dict[int, np.ndarray]:
    return {cid: np.frombuffer(vec, "<f4") for cid, vec in vectors_repo.vectors_of(conn, mkey, ids)}


def build_rows(
    conn: sqlite3.Connection, source: str, ids: Sequence[int], mkey: str | None
) -> list[dict[str, Any]]:
    """Milvus rows for the chunks ``ids`` still in the store (deleted ones are skipped)."""
    if not ids:
        return []
    rows = replica_repo.export_rows(conn, ids)
    vecs = vectors_for(conn, mkey, [r[0] for r in rows]) if mkey else {}
    out = []
    for r in rows:
        (cid, anchor, ordinal, text, heading, ls, le, page, kind, lang) = r[:10]
        path, root, title, parser, board, mtime_ns, meta, trust, domain = r[10:19]
        rel = path[len(root) + 1 :] if root and path.startswith(root.rstrip("/") + "/") else path
        row: dict[str, Any] = {
            "anchor": anchor,
            "source": source,
            "chunk_id": cid,
            "path": _cut(path, 4096),
            "rel_path": _cut(rel, 4096),
            "title": _cut(title or "", 2000),
            "heading": _cut(heading, 8000),
            "ordinal": ordinal,
            "line_start": ls,
            "line_end": le,
            "page": -1 if page is None else page,
            "kind": _cut(kind or "text", 32),
            "language": _cut(lang or "", 64),
            "doc_type": _cut(parser or "", 64),
            "board": _cut(board or "", 256),
            "datasheet": board is not None,
            "namespace": _cut(namespace_of(path), 256),
            "trust": _cut(trust or "", 64),
            "domain": _cut(domain or "", 256),
            "mtime": mtime_ns / 1e9,
            "meta": json.loads(meta or "{}"),
            "text": _cut(text),
            "terms": lexical_terms(cid, title or "", heading, kind, text),
        }
        if mkey:
            vec = vecs.get(cid)
            if vec is None:
                raise IndexError_(f"chunk {anchor} of {path} has no vector for {mkey!r} yet")
            row["dense"] = vec.tolist()
        out.append(row)
    return out
