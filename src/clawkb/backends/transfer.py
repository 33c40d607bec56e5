"""Move a knowledge base between backends without re-embedding.

``export_kb`` copies every chunk with its stored vector to a Milvus
collection (``milvus://host:port/collection``, or a Milvus Lite file) or to a
folder (``manifest.json`` + ``chunks.jsonl`` + ``vectors.npy``).
``import_kb`` reads either back into a local store: documents, chunks (same
anchors, since anchors derive from path and text) and vectors under the
recorded embedder signature. A model, dimension, schema or tokenizer that
differs from the target's is a clear error, as locally.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from clawkb.backends.milvus_rows import build_rows
from clawkb.backends.milvus_schema import (
    HIT_FIELDS,
    NO_MODEL,
    SCHEMA_VERSION,
    client,
    collection_properties,
    open_collection,
)
from clawkb.backends.milvus_sync import _delete_ids, record_row_text, remote_chunk_ids, source_id
from clawkb.backends.settings import MilvusSettings
from clawkb.embed import vectors
from clawkb.errors import ConfigError, IndexError_
from clawkb.store import db, replica_repo, vectors_repo
from clawkb.store.repo import content_hash
from clawkb.text import TOKENIZER_VERSION
from clawkb.types import Chunk

if TYPE_CHECKING:
    from clawkb.kb import KnowledgeBase

MANIFEST = "manifest.json"
CHUNKS = "chunks.jsonl"
VECTORS = "vectors.npy"
_DOC_FIELDS = ("path", "rel_path", "title", "doc_type", "board", "datasheet", "mtime", "meta")


@dataclass
class TransferReport:
    target: str
    chunks: int = 0
    documents: int = 0
    model: str = NO_MODEL

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def target_settings(target: str, collection: str | None, home: Path) -> MilvusSettings | None:
    """A Milvus target from ``milvus://...`` or a ``*.db`` Lite file; None for a folder."""
    from clawkb.backends.settings import milvus_settings

    if target.startswith("milvus://") or target.endswith(".db"):
        data: dict[str, Any] = {"uri": target}
        if collection:
            data["collection"] = collection
        return milvus_settings(data, None, target)
    return None


def _kb_model(kb: KnowledgeBase) -> tuple[str, dict[str, Any] | None]:
    sig = vectors.stored_signature(kb.conn)
    return (vectors.model_key(sig), sig) if sig else (NO_MODEL, None)


def _missing_vectors(kb: KnowledgeBase, mkey: str) -> int:
    return len(vectors.pending_chunk_ids(kb.conn, mkey))


def export_kb(kb: KnowledgeBase, target: str, *, collection: str | None = None) -> TransferReport:
    mkey, sig = _kb_model(kb)
    if sig is not None and (n := _missing_vectors(kb, mkey)):
        raise IndexError_(
            f"{n} chunks have no vector for {mkey!r} yet: run `clawkb embed` before exporting"
        )
    kb.ensure_fresh()
    s = target_settings(target, collection, kb.home)
    if s is None:
        return _export_dir(kb, Path(target), mkey, sig)
    dim = int(sig["dim"]) if sig else 0
    sig_json = json.dumps(sig, sort_keys=True) if sig else ""
    src = source_id(kb)
    props = open_collection(s, dim=dim, model=mkey, create=True, signature=sig_json, source=src)
    ids = kb.repo.all_chunk_ids()
    _delete_ids(s, src, sorted(remote_chunk_ids(s, src) - set(ids)))
    rep = TransferReport(f"{s.uri}/{s.collection}", model=mkey)
    for i in range(0, len(ids), s.batch):
        rows = build_rows(kb.conn, src, ids[i : i + s.batch], mkey if sig else None)
        client(s).upsert(s.collection, rows)
        rep.chunks += len(rows)
    client(s).flush(s.collection)
    record_row_text(s, src, props)  # every row of this KB was just written
    rep.documents = kb.repo.counts()["documents"]
    return rep


def _export_dir(
    kb: KnowledgeBase, folder: Path, mkey: str, sig: dict[str, Any] | None
) -> TransferReport:
    if folder.exists() and any(folder.iterdir()):
        raise ConfigError(f"{folder}: export folder must be new or empty")
    folder.mkdir(parents=True, exist_ok=True)
    src = source_id(kb)
    ids = kb.repo.all_chunk_ids()
    vecs: list[np.ndarray] = []
    with open(folder / CHUNKS, "w", encoding="utf-8") as fh:
        for i in range(0, len(ids), 1000):
            for row in build_rows(kb.conn, src, ids[i : i + 1000], mkey if sig else None):
                row.pop("terms")
                if "dense" in row:
                    vecs.append(np.asarray(row.pop("dense"), np.float32))
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    dim = int(sig["dim"]) if sig else 0
    np.save(folder / VECTORS, np.stack(vecs) if vecs else np.zeros((0, dim), np.float32))
    manifest = {
        "format": "clawkb-export",
        "schema": SCHEMA_VERSION,
        "tokenizer": TOKENIZER_VERSION,
        "model": mkey,
        "signature": sig,
        "chunks": len(ids),
    }
    (folder / MANIFEST).write_text(json.dumps(manifest, indent=2), encoding="utf-8")
    return TransferReport(str(folder), len(ids), kb.repo.counts()["documents"], mkey)


# -- import -------------------------------------------------------------------
def _read_dir(folder: Path) -> tuple[dict[str, Any], Iterator[tuple[dict[str, Any], Any]]]:
    mpath = folder / MANIFEST
    if not mpath.is_file():
        raise ConfigError(f"{folder}: not a clawkb export (no {MANIFEST})")
    try:
        manifest = json.loads(mpath.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{mpath}: invalid JSON ({exc})") from exc
    if manifest.get("format") != "clawkb-export" or manifest.get("schema") != SCHEMA_VERSION:
        raise IndexError_(
            f"{mpath}: export schema {manifest.get('schema')!r}, this clawkb reads {SCHEMA_VERSION!r}"
        )
    vecs = np.load(folder / VECTORS) if manifest.get("signature") else None

    def rows() -> Iterator[tuple[dict[str, Any], Any]]:
        with open(folder / CHUNKS, encoding="utf-8") as fh:
            for n, line in enumerate(fh):
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise ConfigError(f"{folder / CHUNKS}:{n + 1}: invalid JSON ({exc})") from exc
                yield row, (vecs[n] if vecs is not None else None)

    return manifest, rows()


def _read_milvus(s: MilvusSettings) -> tuple[dict[str, Any], Iterator[tuple[dict[str, Any], Any]]]:
    open_collection(s, row_text=False)  # the search text is not copied: any version reads
    props = collection_properties(s)
    sig = json.loads(props["clawkb.signature"]) if props.get("clawkb.signature") else None
    manifest = {
        "schema": props.get("clawkb.schema"),
        "tokenizer": props.get("clawkb.tokenizer"),
        "model": props.get("clawkb.model", NO_MODEL),
        "signature": sig,
    }
    fields = [*HIT_FIELDS, "meta"] + (["dense"] if sig else [])

    def rows() -> Iterator[tuple[dict[str, Any], Any]]:
        it = client(s).query_iterator(
            s.collection, batch_size=1000, filter="", output_fields=fields
        )
        try:
            while page := it.next():
                for r in page:
                    r = dict(r)
                    vec = np.asarray(r.pop("dense"), np.float32) if sig else None
                    yield r, vec
        finally:
            it.close()

    return manifest, rows()


def import_kb(kb: KnowledgeBase, source: str, *, collection: str | None = None) -> TransferReport:
    """Copy an export folder or a Milvus collection into this local KB (write lock held)."""
    s = target_settings(source, collection, kb.home)
    manifest, rows = _read_milvus(s) if s is not None else _read_dir(Path(source))
    if manifest.get("tokenizer") != TOKENIZER_VERSION:
        raise IndexError_(
            f"{source}: tokens of tokenizer {manifest.get('tokenizer')!r}; this clawkb uses"
            f" {TOKENIZER_VERSION!r} (import re-tokenizes text, but refuses to mix versions)"
        )
    sig = manifest.get("signature")
    if sig:
        vectors.check_signature(kb.conn, sig)
    by_doc: dict[str, list[tuple[dict[str, Any], Any]]] = {}
    for row, vec in rows:
        by_doc.setdefault(row["path"], []).append((row, vec))
    rep = TransferReport(source, model=manifest.get("model", NO_MODEL))
    with kb.writer():
        with db.transaction(kb.conn):
            if sig:
                db.set_meta(kb.conn, vectors.SIGNATURE_KEY, json.dumps(sig, sort_keys=True))
            for path, items in by_doc.items():
                rep.chunks += _import_doc(kb, path, items, vectors.model_key(sig) if sig else None)
                rep.documents += 1
            if sig:
                vectors.bump_version(kb.conn)
        from clawkb.ingest.sync import sync_lexical

        sync_lexical(kb.repo, kb.lexical, kb.config.index_batch_chunks)
    return rep


def _import_doc(
    kb: KnowledgeBase, path: str, items: list[tuple[dict[str, Any], Any]], mkey: str | None
) -> int:
    items.sort(key=lambda it: it[0]["ordinal"])
    first = items[0][0]
    rel = first.get("rel_path") or path
    root = path[: -len(rel) - 1] if rel != path and path.endswith("/" + rel) else ""
    body = "\n".join(r["text"] for r, _ in items).encode("utf-8")
    doc_id = kb.repo.upsert_document(
        path=path,
        root=root,
        digest=content_hash(body),
        size=len(body),
        mtime_ns=int(float(first.get("mtime", 0.0)) * 1e9),
        parser=first.get("doc_type", ""),
        title=first.get("title", ""),
        encoding=None,
        metadata=first.get("meta") or {},
    )
    if first.get("datasheet"):
        replica_repo.set_board(kb.conn, doc_id, first["board"])
    kb.repo.delete_chunks(doc_id)
    chunks = [
        Chunk(
            text=r["text"],
            line_start=int(r["line_start"]),
            line_end=int(r["line_end"]),
            heading_path=tuple(json.loads(r.get("heading") or "[]")),
            kind=r.get("kind", "text"),
            has_code=r.get("kind") == "code",
            has_table=r.get("kind") == "table",
            language=r.get("language") or None,
            page=None if int(r.get("page", -1)) < 0 else int(r["page"]),
        )
        for r, _ in items
    ]
    kb.repo.insert_chunks(doc_id, path, chunks)
    if mkey:
        ids = replica_repo.chunk_ids_of_doc(kb.conn, doc_id)
        for cid, (r, vec) in zip(ids, items, strict=True):
            key = content_hash(
                vectors.embed_text(
                    first.get("title", ""), r.get("heading") or "[]", r["text"]
                ).encode("utf-8")
            )
            blob = np.asarray(vec, "<f4").tobytes()
            vectors_repo.save(kb.conn, mkey, [(key, blob)], [(cid, key)])
    return len(chunks)
