"""KB-level dense operations: embed pending chunks, re-embed, report status."""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

from clawkb.embed import vectors
from clawkb.embed.base import Embedder, get_embedder, options_for_vectors

if TYPE_CHECKING:
    from clawkb.kb import KnowledgeBase


#: Each open KB's embedder, built once from its ``embedding:`` section (weak: a closed
#: and released KB takes its model with it).
_EMBEDDERS: weakref.WeakKeyDictionary[KnowledgeBase, Embedder] = weakref.WeakKeyDictionary()


def kb_embedder(kb: KnowledgeBase) -> Embedder:
    """The KB's embedder: the one set by :func:`set_kb_embedder`, else its configured model."""
    embedder = _EMBEDDERS.get(kb)
    if embedder is None:
        section = kb.config.embedding
        stored = vectors.stored_signature(kb.conn)
        options = options_for_vectors(section.model, section.options, stored)
        embedder = _EMBEDDERS[kb] = get_embedder(section.model, options)
    return embedder


def set_kb_embedder(kb: KnowledgeBase, embedder: Embedder) -> None:
    """Use ``embedder`` for this KB from now on (searches and embed runs)."""
    _EMBEDDERS[kb] = embedder


def embed_kb(
    kb: KnowledgeBase,
    *,
    embedder: Embedder | None = None,
    progress: vectors.Progress | None = None,
    batch: int = vectors.BATCH,
) -> vectors.EmbedReport:
    """Embed every chunk that has no vector yet (resumable; holds the write lock)."""
    if embedder is not None:
        set_kb_embedder(kb, embedder)
    kb.ensure_fresh()  # the lexical side first, so chunk rows are current
    # One embed run at a time; the KB write lock only around each batch commit,
    # so `index`, `memory store` and other writers interleave with a long run.
    with kb.job_lock("embed"):
        report = vectors.embed_pending(
            kb.conn, kb_embedder(kb), batch=batch, progress=progress, commit_lock=kb.write_lock
        )
        embed_titles(kb)
        return report


def embed_titles(kb: KnowledgeBase) -> None:
    """Embed the section titles the title channel compares queries with, now rather
    than at the next search (:mod:`clawkb.retrieve.titles`; only new titles cost)."""
    from clawkb.embed.titles import title_index

    embedder = kb_embedder(kb)
    kb.memo.check()  # the vectors just written moved the store's stamp
    title_index(kb, embedder, vectors.model_key(embedder.signature()))


def embed_new(
    kb: KnowledgeBase, *, progress: vectors.Progress | None = None, wait: float = 0.0
) -> dict[str, Any] | None:
    """After a write (``index``, ``learn``, ``memory store``): embed the new chunks when
    the KB already has vectors, so they are searchable in every channel at once.

    None when the KB has no vectors (nothing to keep in step). Never raises for an
    embedding problem: the write is done and the chunks rank by the lexical channel
    until ``clawkb embed`` runs (:mod:`clawkb.retrieve.unembedded`); the returned
    ``error`` says why they are still pending (another ``embed`` running, a model
    that cannot load, a different configured model).
    """
    from clawkb.errors import ClawkbError

    sig = vectors.stored_signature(kb.conn)
    if sig is None:
        return None
    try:
        embedder = kb_embedder(kb)
        if vectors.model_key(embedder.signature()) != vectors.model_key(sig):
            raise ClawkbError(
                "the configured embedding model differs from the stored vectors'"
                " (`clawkb reindex --vectors` re-embeds)"
            )
        with kb.job_lock("embed", wait=wait):
            report = vectors.embed_pending(
                kb.conn, embedder, progress=progress, commit_lock=kb.write_lock
            )
            embed_titles(kb)
    except (ClawkbError, ImportError, OSError) as exc:
        return {"embedded": 0, "pending": pending_count(kb), "error": str(exc)}
    return {"embedded": report.embedded + report.reused, "pending": 0, "error": None}


def pending_count(kb: KnowledgeBase) -> int:
    """Chunks without a vector for the stored model (0 when the KB has no vectors)."""
    sig = vectors.stored_signature(kb.conn)
    if sig is None:
        return 0
    return len(vectors.pending_chunk_ids(kb.conn, vectors.model_key(sig)))


def reembed_kb(
    kb: KnowledgeBase, *, embedder: Embedder | None = None, progress: vectors.Progress | None = None
) -> vectors.EmbedReport:
    """Drop every stored vector and the recorded model, then embed all chunks again
    (with the configured model's current layout, not the one the old vectors had)."""
    with kb.writer():
        vectors.clear_vectors(kb.conn)
    if embedder is None:
        _EMBEDDERS.pop(kb, None)
    return embed_kb(kb, embedder=embedder, progress=progress)


def dense_status(kb: KnowledgeBase) -> dict[str, Any] | None:
    """The ``dense`` block of ``clawkb status`` (None when no vectors were ever made)."""
    sig = vectors.stored_signature(kb.conn)
    if sig is None:
        return None
    from clawkb.config.retrieval import from_config
    from clawkb.index.dense import DenseIndex

    threshold = from_config(kb.config).ann_threshold
    index = DenseIndex(kb.home / "index" / "dense", kb.conn, sig, ann_threshold=threshold)
    chunks = kb.repo.chunk_count()
    return {"signature": sig, "chunks": chunks, **index.status(), "pending": pending_count(kb)}
