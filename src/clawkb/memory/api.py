"""The :class:`Memory` object: store, recall, forget and list agent memories.

A memory is a row in ``memories`` *and* a document ``memory://<ns>/<id>``
indexed through the normal ingest path, so it gets chunks, anchors and BM25F
terms like any note, and is searchable as soon as :meth:`Memory.store`
returns. The row holds what the index does not: namespace, tags, importance,
timestamps and expiry. Plain search hides memory documents (see
:data:`clawkb.retrieve.pipeline.MEMORY_PREFIX`); recall searches them.

Writes take the KB write lock and first purge expired memories, so an
expired memory is gone from the index after the next write and is never
returned by a read in between (reads filter on ``expires_at``).
"""

from __future__ import annotations

import builtins
import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from clawkb.errors import ConfigError, NotFoundError
from clawkb.ingest.pipeline import Ingestor, TextRecord
from clawkb.ingest.sync import sync_lexical
from clawkb.memory.model import (
    DEFAULT_IMPORTANCE,
    DEFAULT_NAMESPACE,
    MemoryRecord,
    RecallResult,
    StoreResult,
    Weighting,
    check_importance,
    check_namespace,
    check_tags,
    check_text,
    memory_id,
    memory_path,
    parse_ttl,
)
from clawkb.store import memory_repo as table
from clawkb.store.repo import content_hash

if TYPE_CHECKING:
    from clawkb.kb import KnowledgeBase

_HEX = re.compile(r"^[0-9a-f]{4,16}$")


@dataclass(frozen=True, slots=True)
class ForgetResult:
    """The memories removed (or, with ``dry_run``, the ones that would be)."""

    records: list[MemoryRecord]
    dry_run: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            "count": len(self.records),
            "forgotten": [r.to_dict() for r in self.records],
        }


class Memory:
    """Long-term memory for agents in one knowledge base (``kb.memory``)."""

    def __init__(self, kb: KnowledgeBase, clock: Callable[[], float] = time.time) -> None:
        self.kb = kb
        self.clock = clock

    @property
    def weighting(self) -> Weighting:
        section = self.kb.config.memory  # validated by the settings model
        return Weighting(section.half_life_days, section.recency_floor)

    # -- writes -------------------------------------------------------------
    def store(
        self,
        text: str,
        namespace: str = DEFAULT_NAMESPACE,
        tags: Iterable[str] = (),
        importance: float | None = None,
        ttl: str | float | None = None,
    ) -> StoreResult:
        """Remember ``text``; the same text in the same namespace updates one memory.

        A repeated write keeps the creation time, refreshes ``updated_at``,
        adds its tags to the old ones, and replaces importance and expiry
        only when given. ``ttl`` is seconds or ``"30m"``/``"12h"``/``"7d"``.
        """
        ns = check_namespace(namespace)
        body = check_text(text)
        new_tags = check_tags(tags)
        imp = None if importance is None else check_importance(importance)
        ttl_s = parse_ttl(ttl)
        mid = memory_id(ns, body)
        with self.kb.writer():
            now = self.clock()
            self._purge_expired(now)
            old = table.get(self.kb.conn, mid)
            rec = MemoryRecord(
                id=mid,
                namespace=ns,
                text=body,
                tags=tuple(sorted({*new_tags, *(old.tags if old else ())})),
                importance=imp
                if imp is not None
                else (old.importance if old else DEFAULT_IMPORTANCE),
                created_at=old.created_at if old else now,
                updated_at=now,
                expires_at=now + ttl_s if ttl_s is not None else (old.expires_at if old else None),
                path=memory_path(ns, mid),
            )
            with self.kb.repo.transaction() as conn:  # the row and its document, or neither
                table.upsert(conn, rec, content_hash(body.encode("utf-8")))
                self._ingestor().index_records([_as_document(rec)], sync=False)
            sync_lexical(self.kb.repo, self.kb.lexical, self.kb.config.index_batch_chunks)
        return StoreResult(rec, created=old is None)

    def forget(
        self,
        ids: Sequence[str] = (),
        *,
        tags: Iterable[str] = (),
        query: str | None = None,
        namespace: str | None = None,
        dry_run: bool = False,
    ) -> ForgetResult:
        """Remove memories chosen by id (or unique id prefix), tag and/or query.

        Selectors combine with AND. ``query`` picks memories whose text has
        every term of the query (the same tokens search uses), so a common
        word alone does not sweep up unrelated memories. ``dry_run`` reports
        without removing. At least one of ids, tags or query is required.
        """
        tag_list = check_tags(tags)
        ns = None if namespace is None else check_namespace(namespace)
        if not ids and not tag_list and not (query or "").strip():
            raise ConfigError("forget needs at least one id, tag or query to choose memories")
        now = self.clock()
        chosen = self._select(ids, tag_list, query, ns, now)
        if dry_run or not chosen:
            return ForgetResult(chosen, dry_run)
        with self.kb.writer():
            self._purge_expired(self.clock())
            self._remove(chosen)
        return ForgetResult(chosen, dry_run)

    # -- reads --------------------------------------------------------------
    def get(self, mid: str) -> MemoryRecord:
        """A live memory by id or unique id prefix."""
        return self._resolve(mid, self.clock())

    def list(
        self, namespace: str | None = None, tags: Iterable[str] = (), limit: int | None = 50
    ) -> list[MemoryRecord]:
        """Live memories, most recently written first."""
        ns = None if namespace is None else check_namespace(namespace)
        if limit is not None and limit < 1:
            raise ConfigError(f"limit must be at least 1, got {limit}")
        return table.listing(self.kb.conn, self.clock(), ns, check_tags(tags), limit)

    def namespaces(self) -> dict[str, int]:
        """Live memory count per namespace."""
        return table.count(self.kb.conn, self.clock())

    def recall(
        self,
        query: str,
        namespace: str | None = None,
        limit: int = 5,
        *,
        tags: Iterable[str] = (),
        include_documents: bool = False,
        explain: bool = False,
    ) -> RecallResult:
        """Memories (and optionally documents) for ``query``; see :mod:`clawkb.memory.recall`."""
        from clawkb.memory.recall import recall

        ns = None if namespace is None else check_namespace(namespace)
        if limit < 1:
            raise ConfigError(f"limit must be at least 1, got {limit}")
        return recall(
            self.kb,
            query,
            namespace=ns,
            tags=check_tags(tags),
            limit=limit,
            include_documents=include_documents,
            explain=explain,
            now=self.clock(),
            weighting=self.weighting,
        )

    # -- internals ----------------------------------------------------------
    def _ingestor(self) -> Ingestor:
        kb = self.kb
        return Ingestor(kb.repo, kb.lexical, kb.config, kb.registry)

    def _resolve(self, mid: str, now: float) -> MemoryRecord:
        key = (mid or "").strip().lower()
        if not _HEX.match(key):
            raise ConfigError(f"memory id {mid!r}: expected 4-16 hex digits")
        found = table.by_prefix(self.kb.conn, key, now)
        if not found:
            raise NotFoundError(
                f"no memory with id {mid!r} (it may have been forgotten or expired)"
            )
        if len(found) > 1:
            raise ConfigError(f"memory id prefix {mid!r} is ambiguous: give more digits")
        return found[0]

    def _select(
        self,
        ids: Sequence[str],
        tags: tuple[str, ...],
        query: str | None,
        namespace: str | None,
        now: float,
    ) -> builtins.list[MemoryRecord]:
        if ids:
            pool = {r.id: r for r in (self._resolve(i, now) for i in ids)}
            chosen = [
                r
                for r in pool.values()
                if (namespace is None or r.namespace == namespace) and set(tags) <= set(r.tags)
            ]
        else:
            chosen = table.listing(self.kb.conn, now, namespace, tags, None)
        if (query or "").strip():
            from clawkb.memory.recall import containing_all_terms

            chosen = containing_all_terms(chosen, query or "")
        return chosen

    def _remove(self, records: Sequence[MemoryRecord]) -> None:
        """Delete rows and their documents in one transaction, then sync the index."""
        kb = self.kb
        with kb.repo.transaction():
            for rec in records:
                doc = kb.repo.document(rec.path)
                if doc is not None:
                    kb.repo.remove_document(doc)
                table.delete(kb.conn, rec.id)
        sync_lexical(kb.repo, kb.lexical, kb.config.index_batch_chunks)

    def _purge_expired(self, now: float) -> int:
        gone = table.expired(self.kb.conn, now)
        if gone:
            self._remove(gone)
        return len(gone)


def _as_document(rec: MemoryRecord) -> TextRecord:
    """The searchable form: tags become the title (a boosted field), so they match too."""
    return TextRecord(
        path=rec.path,
        text=rec.text,
        title=", ".join(rec.tags),
        metadata={"memory_id": rec.id, "namespace": rec.namespace},
    )


__all__ = ["ForgetResult", "Memory"]
