"""KB-level dense operations: embed pending chunks, re-embed, report status."""

from __future__ import annotations

from typing import Any

from clawkb.embed import vectors
from clawkb.embed.base import Embedder


def kb_embedder(kb: Any) -> Embedder:
    from clawkb.retrieve.pipeline import retriever_for

    return retriever_for(kb).embedder


def embed_kb(
    kb: Any,
    *,
    embedder: Embedder | None = None,
    progress: vectors.Progress | None = None,
    batch: int = vectors.BATCH,
) -> vectors.EmbedReport:
    """Embed every chunk that has no vector yet (resumable; holds the write lock)."""
    from clawkb.retrieve.pipeline import retriever_for

    r = retriever_for(kb)
    if embedder is not None:
        r.set_embedder(embedder)
    kb.ensure_fresh()  # the lexical side first, so chunk rows are current
    # One embed run at a time; the KB write lock only around each batch commit,
    # so `index`, `memory store` and other writers interleave with a long run.
    with kb.job_lock("embed"):
        return vectors.embed_pending(
            kb.conn, r.embedder, batch=batch, progress=progress, commit_lock=kb.write_lock
        )


def reembed_kb(
    kb: Any, *, embedder: Embedder | None = None, progress: vectors.Progress | None = None
) -> vectors.EmbedReport:
    """Drop every stored vector and the recorded model, then embed all chunks again."""
    with kb.writer():
        vectors.clear_vectors(kb.conn)
    return embed_kb(kb, embedder=embedder, progress=progress)


def dense_status(kb: Any) -> dict[str, Any] | None:
    """The ``dense`` block of ``clawkb status`` (None when no vectors were ever made)."""
    sig = vectors.stored_signature(kb.conn)
    if sig is None:
        return None
    from clawkb.index.dense import DenseIndex
    from clawkb.retrieve.settings import from_config

    settings = from_config(kb.config.extra)
    index = DenseIndex(
        kb.home / "index" / "dense", kb.conn, sig, ann_threshold=settings.ann_threshold
    )
    chunks = kb.repo.chunk_count()
    return {"signature": sig, "chunks": chunks, **index.status()}
