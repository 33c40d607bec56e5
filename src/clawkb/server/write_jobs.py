"""The API's write jobs as module-level functions, so :class:`~.writer_process.Remote`
can send them to the writer process by name; each returns what the endpoint
answers (plain data that pickles)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from clawkb.ingest.pipeline import IndexReport
from clawkb.kb import KnowledgeBase


def index_paths(kb: KnowledgeBase, paths: list[str]) -> IndexReport:
    return kb.index([Path(p) for p in paths], wait=60)


def memory_store(
    kb: KnowledgeBase,
    text: str,
    namespace: str,
    tags: list[str],
    importance: float | None,
    ttl: str | float | None,
) -> dict[str, Any]:
    stored = kb.memory.store(text, namespace=namespace, tags=tags, importance=importance, ttl=ttl)
    return stored.to_dict()


def memory_forget(
    kb: KnowledgeBase,
    ids: list[str],
    tags: list[str],
    query: str | None,
    namespace: str | None,
    dry_run: bool,
) -> dict[str, Any]:
    gone = kb.memory.forget(ids, tags=tags, query=query, namespace=namespace, dry_run=dry_run)
    return gone.to_dict()


def set_pin(kb: KnowledgeBase, board: str, alias: str, pin: str) -> dict[str, Any]:
    from clawkb.hardware import set_pin as teach

    return teach(kb, board, alias, pin).to_dict()


def repair_index(kb: KnowledgeBase, suspect: str | None = None) -> list[str]:
    return kb.repair_index(suspect=suspect)
