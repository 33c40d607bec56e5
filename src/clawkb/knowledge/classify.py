"""Which trust tier and domain a document belongs to.

Tier, first that applies: front matter ``trust:``; a ``sources:`` rule (path
glob → tier, first match wins); a datasheet (the hardware flag) is
``official``; a file under ``<kb>/learned/`` is ``learned``; a memory record is
``memory``; else ``knowledge.default_trust``. Domain: front matter ``domain:``,
else the first ``domains:`` entry with a matching glob, else none.

Globs match the path relative to the folder it was indexed under, relative to
the KB's parent folder, or absolute; ``*`` crosses folders, a leading ``**/``
may match nothing.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any

from clawkb.knowledge import TIERS
from clawkb.store import knowledge_repo

if TYPE_CHECKING:
    import sqlite3

    from clawkb.config import Config

LEARNED_DIR = "learned"


def path_forms(path: str, root: str, base: str) -> list[str]:
    """The spellings of ``path`` a glob may be written against."""
    forms = [path]
    for folder in (root, base):
        prefix = folder.rstrip("/") + "/"
        if folder and path.startswith(prefix):
            forms.append(path[len(prefix) :])
    return forms


def glob_match(pattern: str, forms: list[str]) -> bool:
    pats = [pattern.strip().rstrip("/") or pattern]
    if pats[0].startswith("**/"):
        pats.append(pats[0][3:])
    if not any(ch in pats[0] for ch in "*?["):
        pats.append(pats[0] + "/*")  # a plain folder name covers what is below it
    return any(fnmatch.fnmatchcase(f, p) for f in forms for p in pats)


def _front(metadata: dict[str, Any], key: str) -> str | None:
    value = metadata.get(key)
    return str(value).strip().casefold() if isinstance(value, str) and value.strip() else None


class Classifier:
    """Tier and domain rules of one KB's configuration."""

    def __init__(self, config: Config, home: str) -> None:
        self.sources = dict(config.sources)
        self.domains = {k: tuple(v) for k, v in config.domains.items()}
        self.default = config.knowledge.default_trust
        self.home = home.rstrip("/")
        self.base = str(PurePosixPath(self.home).parent)

    @property
    def fingerprint(self) -> str:
        """Changes whenever a rule changes (documents are then classified again)."""
        data = json.dumps([self.sources, self.domains, self.default], sort_keys=True)
        return hashlib.blake2b(data.encode(), digest_size=8).hexdigest()

    def trust(self, path: str, root: str, metadata: dict[str, Any], board: str | None) -> str:
        front = _front(metadata, "trust")
        if front in TIERS:
            return front
        forms = path_forms(path, root, self.base)
        for pattern, tier in self.sources.items():
            if glob_match(pattern, forms):
                return tier
        if board is not None:
            return "official"
        if path.startswith("memory://"):
            return "memory"
        if path.startswith(f"{self.home}/{LEARNED_DIR}/"):
            return "learned"
        return self.default

    def domain(self, path: str, root: str, metadata: dict[str, Any]) -> str | None:
        front = _front(metadata, "domain")
        if front:
            return front
        if path.startswith(f"{self.home}/{LEARNED_DIR}/"):
            part = path[len(self.home) + len(LEARNED_DIR) + 2 :].split("/", 1)
            if len(part) == 2 and part[0] != "general":
                return part[0]
        forms = path_forms(path, root, self.base)
        for name, globs in self.domains.items():
            if any(glob_match(g, forms) for g in globs):
                return name
        return None

    def apply(self, conn: sqlite3.Connection, doc_id: int) -> None:
        row = knowledge_repo.classify_row(conn, doc_id)
        if row:
            self._update(conn, doc_id, *row)

    def apply_all(self, conn: sqlite3.Connection) -> int:
        """Classify every document again (the caller holds a transaction)."""
        rows = knowledge_repo.classify_rows(conn)
        for doc_id, path, root, meta, board in rows:
            self._update(conn, doc_id, path, root, meta, board)
        return len(rows)

    def _update(
        self,
        conn: sqlite3.Connection,
        doc_id: int,
        path: str,
        root: str,
        meta: str,
        board: str | None,
    ) -> None:
        try:
            metadata = json.loads(meta or "{}")
        except ValueError:
            metadata = {}
        metadata = metadata if isinstance(metadata, dict) else {}
        trust = self.trust(path, root, metadata, board)
        knowledge_repo.set_trust_domain(conn, doc_id, trust, self.domain(path, root, metadata))
