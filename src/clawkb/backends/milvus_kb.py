"""The KnowledgeBase's side of the Milvus backend: sync, status, narrowed search.

Search itself is the one pipeline over :class:`clawkb.backends.milvus_source.MilvusSource`
(``KnowledgeBase.source`` asks :class:`MilvusBackend` for it); :func:`kb_search` runs it
with the Milvus-only narrowing (namespace, datasheets) that ``kb.search`` does not offer.
The facade imports no backend: :class:`MilvusBackend` is the ``milvus`` entry point of
the ``clawkb.backends`` plugin group.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from clawkb.backends.milvus_schema import NO_MODEL
from clawkb.backends.milvus_source import MilvusSource, collection_props, forget
from clawkb.backends.settings import MilvusSettings, backend_settings
from clawkb.retrieve.result import SearchResult

if TYPE_CHECKING:
    from pathlib import Path

    from clawkb.backends.milvus_sync import Progress, SyncReport
    from clawkb.ingest.pipeline import IndexReport
    from clawkb.kb import KnowledgeBase
    from clawkb.retrieve.filters import Filters
    from clawkb.retrieve.source import Source


def kb_backend(kb: KnowledgeBase) -> MilvusSettings | None:
    """The KB's configured backend (None = local)."""
    src = kb.source
    return src.settings if isinstance(src, MilvusSource) else None


def kb_search(
    kb: KnowledgeBase,
    s: MilvusSettings,
    query: str,
    *,
    limit: int = 10,
    path_globs: Sequence[str] = (),
    explain: bool = False,
    include_memory: bool = False,
    boards: Sequence[str] = (),
    board_only: bool = False,
    mode: str | None = None,
    filters: Filters | None = None,
    namespace: str | None = None,
    datasheets_only: bool = False,
    options: dict[str, Any] | None = None,
) -> SearchResult:
    """The pipeline on collection ``s``, narrowed on the Milvus side by ``namespace``,
    board-only ``boards`` and ``datasheets_only``; without the knowledge stages."""
    from clawkb.knowledge.search import OFF
    from clawkb.retrieve.query import Query

    src = MilvusSource(
        kb, s, namespace=namespace, boards=tuple(boards) if board_only else (),
        datasheets_only=datasheets_only,
    )  # fmt: skip
    extra = kb.board_fields(boards, False) if boards and not board_only else {}
    q = Query.make(
        query, limit=limit, mode=mode, filters=filters, path_globs=tuple(path_globs),
        options=options, explain=explain, include_memory=include_memory, knowledge=OFF,
        **extra,
    )  # fmt: skip
    return kb.run_prepared(q, source=src)


def sync_kb(
    kb: KnowledgeBase, *, full: bool = False, progress: Progress | None = None
) -> SyncReport:
    """`clawkb sync`: catch the lexical index up, then replay the log into Milvus."""
    from clawkb.backends.milvus_sync import sync_milvus
    from clawkb.errors import ConfigError

    s = kb_backend(kb)
    if s is None:
        raise ConfigError(
            f"{kb.home / 'config.yaml'}: no Milvus backend configured"
            " (set backend: {kind: milvus, uri: ...})"
        )
    kb.ensure_fresh()
    with kb.writer():
        rep = sync_milvus(kb, s, full=full, progress=progress)
    forget(s)
    return rep


def after_write(kb: KnowledgeBase, report: IndexReport) -> IndexReport:
    """Called by ``KnowledgeBase.index`` with the write lock held: push to Milvus.

    The store stays the truth: when Milvus cannot be reached the run still
    succeeds and says so; `clawkb sync` (or the next index run) catches up.
    """
    from clawkb.backends.milvus_sync import sync_milvus
    from clawkb.errors import ClawkbError

    s = kb_backend(kb)
    if s is not None and s.auto_sync:
        try:
            sync_milvus(kb, s)
        except ClawkbError as exc:
            report.warnings.append((s.uri, f"milvus sync: {exc}; run `clawkb sync` to retry"))
        forget(s)
    return report


def backend_status(kb: KnowledgeBase) -> dict[str, Any]:
    s = kb_backend(kb)
    if s is None:
        return {"kind": "local"}
    from clawkb.backends.milvus_sync import sync_status

    return sync_status(kb, s)


class MilvusBackend:
    """The Milvus backend as the :class:`~clawkb.kb.KnowledgeBase` facade sees it: the
    ``milvus`` entry point of ``clawkb.backends``, looked up by the ``kind`` of the
    ``backend:`` setting (the facade imports no backend; a backend builds on it)."""

    @staticmethod
    def source(kb: KnowledgeBase) -> Source:
        """The KB's candidate source: its Milvus collection (``backend:`` read and
        checked by :func:`backend_settings`), or the local one for ``kind: local``."""
        settings = backend_settings(kb.config.backend, kb.home)
        if settings is None:
            from clawkb.retrieve.source import LocalSource

            return LocalSource(kb)
        return MilvusSource(kb, settings)

    after_write = staticmethod(after_write)
    status = staticmethod(backend_status)

    @staticmethod
    def open_remote(home: Path) -> KnowledgeBase:
        """A folder with only ``remote.yaml``: a KB whose source is Milvus (no store)."""
        from clawkb.backends.remote import RemoteKnowledgeBase

        return RemoteKnowledgeBase.open_remote(home)


__all__ = [
    "NO_MODEL",
    "MilvusBackend",
    "after_write",
    "backend_settings",
    "backend_status",
    "collection_props",
    "forget",
    "kb_backend",
    "kb_search",
    "sync_kb",
]
