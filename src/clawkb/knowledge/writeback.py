"""Knowledge write-back: an agent records what it learned as a Markdown note.

A note is a plain file a human can read and edit, under
``<kb>/learned/<domain>/<slug>.md``, with front matter saying who wrote it,
when, for which task, with what outcome and which passages (anchors) it
relied on. It is indexed at once with tier ``learned``. A note whose text is
a near duplicate of an existing learned note (token-set Jaccard ≥
``knowledge.duplicate_threshold``) updates that note instead, and the old
text and provenance go to its ``history:`` list.

With ``knowledge.writeback: pending`` (or ``pending=True``) an agent's note
waits in ``<kb>/learned-pending/`` (not searchable) until ``approve``.
``approve`` makes a note tier ``team``; ``reject`` moves it to
``<kb>/learned-rejected/`` and out of the index.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from clawkb.errors import ConfigError, NotFoundError
from clawkb.knowledge.classify import LEARNED_DIR
from clawkb.knowledge.similar import most_similar

if TYPE_CHECKING:
    from clawkb.kb import KnowledgeBase

PENDING_DIR = "learned-pending"
REJECTED_DIR = "learned-rejected"
_SLUG = re.compile(r"[^\w\-]+")
_NAME = re.compile(r"^[\w\-]+$")


@dataclass
class Note:
    path: Path
    meta: dict[str, Any]
    body: str

    @property
    def status(self) -> str:
        return str(self.meta.get("status", "active"))

    def to_dict(self, home: Path) -> dict[str, Any]:
        return {
            "id": note_id(self.path, home),
            "path": self.path.as_posix(),
            "status": self.status,
            "trust": self.meta.get("trust"),
            "domain": self.meta.get("domain"),
            "title": self.meta.get("title", ""),
            "agent": self.meta.get("agent"),
            "created": self.meta.get("created"),
            "updated": self.meta.get("updated"),
            "task": self.meta.get("task"),
            "outcome": self.meta.get("outcome"),
            "anchors": list(self.meta.get("anchors") or ()),
            "history": list(self.meta.get("history") or ()),
            "text": self.body,
        }


@dataclass
class LearnResult:
    note: Note
    created: bool
    similarity: float = 0.0
    indexed: bool = False
    warnings: list[str] = field(default_factory=list)

    def to_dict(self, home: Path) -> dict[str, Any]:
        return {
            "created": self.created,
            "updated_existing": not self.created,
            "similarity": round(self.similarity, 3),
            "indexed": self.indexed,
            **self.note.to_dict(home),
        }


def note_id(path: Path, home: Path) -> str:
    """``<domain>/<slug>`` — how the CLI names a note."""
    return f"{path.parent.name}/{path.stem}"


def read_note(path: Path) -> Note:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise NotFoundError(f"{path}: cannot read note ({exc.strerror or exc})") from None
    meta: dict[str, Any] = {}
    body = text
    if text.startswith("---\n"):
        head, sep, rest = text[4:].partition("\n---\n")
        if sep:
            loaded = yaml.safe_load(head)
            meta = loaded if isinstance(loaded, dict) else {}
            body = rest
    return Note(path, meta, body.strip("\n"))


def write_note(note: Note) -> None:
    head = yaml.safe_dump(note.meta, allow_unicode=True, sort_keys=False, width=100)
    note.path.parent.mkdir(parents=True, exist_ok=True)
    tmp = note.path.with_suffix(".md.tmp")
    tmp.write_text(f"---\n{head}---\n\n{note.body.strip()}\n", encoding="utf-8")
    tmp.replace(note.path)


def _folder(kb: KnowledgeBase, status: str) -> Path:
    return kb.home / {"pending": PENDING_DIR, "rejected": REJECTED_DIR}.get(status, LEARNED_DIR)


def notes(kb: KnowledgeBase, status: str | None = None) -> list[Note]:
    """Learned notes (``status``: active, approved, pending, rejected; None = all but rejected)."""
    folders = [PENDING_DIR, LEARNED_DIR] if status is None else []
    if status == "pending":
        folders = [PENDING_DIR]
    elif status == "rejected":
        folders = [REJECTED_DIR]
    elif status in ("active", "approved"):
        folders = [LEARNED_DIR]
    out = []
    for name in folders:
        for path in sorted((kb.home / name).glob("*/*.md")):
            note = read_note(path)
            if status in (None, note.status) or (status == "rejected" and name == REJECTED_DIR):
                out.append(note)
    return out


def find(kb: KnowledgeBase, ref: str) -> Note:
    """A note by id (``domain/slug``), unique slug prefix, or path."""
    candidate = Path(ref)
    if candidate.suffix == ".md" and candidate.is_file():
        return read_note(candidate.resolve())
    matches = [
        n
        for n in notes(kb)
        if note_id(n.path, kb.home) == ref
        or (
            n.path.stem.startswith(ref.rsplit("/", 1)[-1])
            and (("/" not in ref) or n.path.parent.name == ref.split("/", 1)[0])
        )
    ]
    if not matches:
        raise NotFoundError(f"no learned note {ref!r} (see `clawkb learned list`)")
    if len(matches) > 1:
        names = ", ".join(note_id(n.path, kb.home) for n in matches[:5])
        raise NotFoundError(f"{ref!r} names several notes: {names}")
    return matches[0]


def _now() -> str:
    return dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat()


def _slug(text: str) -> str:
    words = _SLUG.sub("-", text.strip().casefold()).strip("-")
    return words[:60].rstrip("-") or "note"


def learn(
    kb: KnowledgeBase,
    text: str,
    *,
    title: str | None = None,
    domain: str | None = None,
    agent: str = "agent",
    task: str = "",
    outcome: str = "",
    anchors: list[str] | tuple[str, ...] = (),
    pending: bool | None = None,
) -> LearnResult:
    """Record ``text`` as a learned note (or update its near duplicate); index it."""
    text = text.strip()
    if not text:
        raise ConfigError("learn: the note text is empty")
    domain = (domain or "general").strip().casefold()
    if not _NAME.match(domain):
        raise ConfigError(f"learn: domain {domain!r} must be letters, digits, '-' or '_'")
    if pending is None:
        pending = kb.config.knowledge.writeback == "pending"
    status = "pending" if pending else "active"
    now = _now()
    threshold = kb.config.knowledge.duplicate_threshold
    existing = {n.path.as_posix(): n for n in notes(kb)}
    key, sim = most_similar(text, ((k, n.body) for k, n in existing.items()))
    if key is not None and sim >= threshold:
        note = existing[key]
        entry = {k: note.meta.get(k) for k in ("agent", "updated", "task", "outcome")}
        entry["text"] = note.body
        note.meta["history"] = [*(note.meta.get("history") or []), entry]
        note.meta.update(
            agent=agent,
            updated=now,
            task=task or None,
            outcome=outcome or None,
            anchors=sorted({*(note.meta.get("anchors") or ()), *anchors}),
        )
        note.body = text
        write_note(note)
        return LearnResult(note, False, sim, _index(kb, note))
    title = (title or text.splitlines()[0]).strip()[:120]
    path = _folder(kb, status) / domain / f"{_slug(title)}.md"
    n = 2
    while path.exists():
        path = path.with_name(f"{_slug(title)}-{n}.md")
        n += 1
    meta: dict[str, Any] = {
        "title": title,
        "trust": "learned",
        "status": status,
        "domain": None if domain == "general" else domain,
        "agent": agent,
        "created": now,
        "updated": now,
        "task": task or None,
        "outcome": outcome or None,
        "anchors": list(dict.fromkeys(anchors)),
        "history": [],
    }
    note = Note(path, meta, text)
    write_note(note)
    return LearnResult(note, True, sim, _index(kb, note))


def _index(kb: KnowledgeBase, note: Note) -> bool:
    if note.path.is_relative_to(kb.home / LEARNED_DIR):
        kb.index([note.path])
        return True
    return False


def _drop(kb: KnowledgeBase, path: Path) -> None:
    doc = kb.repo.document(path.as_posix())
    if doc is None:
        return
    with kb.writer():
        from clawkb.ingest.sync import sync_lexical

        with kb.repo.transaction():
            kb.repo.remove_document(doc)
        sync_lexical(kb.repo, kb.lexical, kb.config.index_batch_chunks)


def approve(kb: KnowledgeBase, ref: str, reviewer: str = "") -> Note:
    """Tier ``team``: the note was reviewed; a pending note becomes searchable."""
    note = find(kb, ref)
    if note.status == "rejected" or note.path.is_relative_to(kb.home / REJECTED_DIR):
        raise ConfigError(f"{note_id(note.path, kb.home)}: rejected; learn it again instead")
    note.meta.update(trust="team", status="approved", approved=_now())
    if reviewer:
        note.meta["approved_by"] = reviewer
    target = kb.home / LEARNED_DIR / note.path.parent.name / note.path.name
    old = note.path
    note.path = target
    write_note(note)
    if old != target:
        old.unlink()
    _index(kb, note)
    return note


def reject(kb: KnowledgeBase, ref: str, reason: str = "") -> Note:
    """Out of the index, kept for the record in ``learned-rejected/``."""
    note = find(kb, ref)
    old = note.path
    note.meta.update(status="rejected", rejected=_now(), reason=reason or None)
    note.path = kb.home / REJECTED_DIR / old.parent.name / old.name
    write_note(note)
    old.unlink()
    _drop(kb, old)
    if not any(old.parent.iterdir()):
        old.parent.rmdir()
    return note
