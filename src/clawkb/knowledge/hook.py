"""The ingest hook that stores each document's trust tier, domain and links
(see :class:`clawkb.ingest.pipeline.IngestHook`). It runs after the datasheet
hook, so the datasheet flag (``documents.board``) is already set."""

from __future__ import annotations

from typing import TYPE_CHECKING

from clawkb.ingest.chunker import ChunkConfig
from clawkb.knowledge import links
from clawkb.knowledge.classify import Classifier
from clawkb.store import db
from clawkb.store.repo import Repository
from clawkb.types import ParsedDocument

if TYPE_CHECKING:
    from clawkb.kb import KnowledgeBase

RULES_KEY = "knowledge_rules"


class KnowledgeHook:
    #: ingest hooks run by order (clawkb.plugins): trust tier, domain, links after boards
    order = 20

    def __init__(self, classifier: Classifier) -> None:
        self.classifier = classifier

    @classmethod
    def for_kb(cls, kb: KnowledgeBase) -> KnowledgeHook:
        """The hook for ``kb``; when the tier or domain rules changed since the last
        run, every stored document is classified again first (no re-parse needed)."""
        hook = cls(Classifier(kb.config, kb.home.as_posix()))
        refresh(kb, hook.classifier)
        return hook

    def chunk_config(self, path: str, parsed: ParsedDocument, config: ChunkConfig) -> ChunkConfig:
        return config

    def stored(self, repo: Repository, doc_id: int, path: str, parsed: ParsedDocument) -> None:
        self.classifier.apply(repo.conn, doc_id)
        links.store(repo.conn, doc_id, links.extract(path, parsed))


def refresh(kb: KnowledgeBase, classifier: Classifier | None = None, force: bool = False) -> int:
    """Re-classify every document when the rules changed (or ``force``); returns how many."""
    classifier = classifier or Classifier(kb.config, kb.home.as_posix())
    if not force and db.get_meta(kb.conn, RULES_KEY) == classifier.fingerprint:
        return 0
    with db.transaction(kb.conn):
        n = classifier.apply_all(kb.conn)
        db.set_meta(kb.conn, RULES_KEY, classifier.fingerprint)
    return n
