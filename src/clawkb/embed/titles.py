"""Section titles and their vectors in the KB's own model (the title channel's index).

Built by ``clawkb embed`` (and after each write that embeds new chunks) and
read by :mod:`clawkb.retrieve.titles`; see that module for what the channel
does with them. Kept in ``index/titles-<model>.npz``: only titles not seen
before are embedded when the KB changes.
"""

from __future__ import annotations

import json
import os
import threading
import weakref
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from clawkb.store.sections_repo import chunk_headings

if TYPE_CHECKING:
    from clawkb.embed.base import Embedder
    from clawkb.kb import KnowledgeBase

__all__ = ["Sections", "sections", "title_index"]

#: Titles embedded per model call.
BATCH = 64


@dataclass(frozen=True)
class Sections:
    """Distinct titles and, per title, the first passage of each section it heads."""

    titles: list[str]
    starts: list[np.ndarray]


def sections(rows: Sequence[tuple[int, int, str, str]]) -> Sections:
    """Group ``(chunk id, doc id, title, heading path JSON)`` rows (reading order) into sections.

    A section is a run of passages of one document with the same heading
    path; its title is the path's last entry. Passages without a heading path
    (plain text, a record indexed with only a document title) head no section
    and are left out: a document title alone summarises a whole text, and a
    question matches it as often as a title query does (on cranfield, whose
    passages are abstracts under their paper's title, listing those titles
    cost held-out nDCG@10).
    """
    by_title: dict[str, list[int]] = {}
    last: tuple[int, str] | None = None
    for cid, doc, _title, raw in rows:
        if (doc, raw) == last:
            continue
        last = (doc, raw)
        try:
            path = json.loads(raw)
        except ValueError:
            path = []
        name = " ".join(str(path[-1]).split()) if path else ""

        if name:
            by_title.setdefault(name, []).append(cid)
    titles = list(by_title)
    return Sections(titles, [np.asarray(by_title[t], np.int64) for t in titles])


#: Forget stale titles (no longer a section of the KB) when they are more than this
#: share of the kept ones and more than STALE_MIN of them: bounded memory and file,
#: while a title that comes back soon (a file rewritten, then reverted) is rarely
#: embedded twice.
STALE_SHARE = 0.25
STALE_MIN = 64


class _Vectors:
    """Title → vector for one KB and model, on disk and in memory."""

    def __init__(self, path: Path, mkey: str) -> None:
        self.path, self.mkey = path, mkey
        self.known: dict[str, np.ndarray] = {}
        try:
            with np.load(path, allow_pickle=False) as f:
                if str(f["model"]) == mkey:
                    self.known = dict(zip(f["titles"].tolist(), f["vecs"], strict=True))
        except (OSError, KeyError, ValueError, EOFError, zipfile.BadZipFile):
            self.known = {}  # none yet, or damaged: embedded again (and saved whole)

    def matrix(self, titles: list[str], embedder: Embedder) -> np.ndarray:
        """The vectors of ``titles`` (distinct), embedding the ones not known yet. Titles
        no longer in the KB are forgotten (here and in the file) once they make up
        more than :data:`STALE_SHARE` of what is kept: a KB whose files are renamed,
        deleted or rewritten under new headings would otherwise keep every title it
        ever had, and every view of a server loads them all again after each write."""
        missing = [t for t in titles if t not in self.known]
        for i in range(0, len(missing), BATCH):
            part = missing[i : i + BATCH]
            vecs = np.asarray(embedder.embed_documents(part), np.float32)
            self.known.update(zip(part, vecs, strict=True))
        stale = len(self.known) - len(titles)
        if stale > STALE_MIN and stale > STALE_SHARE * len(self.known):
            self.known = {t: self.known[t] for t in titles}
            self._save()
        elif missing:
            self._save()
        if not titles:
            return np.zeros((0, 1), np.float32)
        return np.stack([self.known[t] for t in titles]).astype(np.float32)

    def _save(self) -> None:
        # a temporary name of this thread's own: views on several threads (and the
        # writer) save at once, and a shared one let a half-written file be published
        tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}-{threading.get_ident()}.tmp.npz")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            titles = list(self.known)
            np.savez(
                tmp,
                model=np.asarray(self.mkey),
                titles=np.asarray(titles, dtype=str),
                vecs=np.stack([self.known[t] for t in titles]).astype(np.float32),
            )
            os.replace(tmp, self.path)
        except OSError:  # a read-only KB: the titles are embedded again next time
            tmp.unlink(missing_ok=True)


_VECTORS: weakref.WeakKeyDictionary[Any, _Vectors] = weakref.WeakKeyDictionary()


def _file(home: Path, mkey: str) -> Path:
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in mkey)
    return home / "index" / f"titles-{safe}.npz"


def title_index(kb: KnowledgeBase, embedder: Embedder, mkey: str) -> tuple[Sections, np.ndarray]:
    """The KB's sections and their title vectors (embedding new titles first)."""

    def compute() -> tuple[Sections, np.ndarray]:
        sec = sections(chunk_headings(kb.conn))
        vec = _VECTORS.get(kb)
        if vec is None or vec.mkey != mkey:
            vec = _VECTORS[kb] = _Vectors(_file(kb.home, mkey), mkey)
        return sec, vec.matrix(sec.titles, embedder)

    got: tuple[Sections, np.ndarray] = kb.memo.get(f"titles:{mkey}", compute)
    return got
