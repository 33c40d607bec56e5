"""The note link graph: ``[[wiki links]]``, ``[text](other.md#heading)`` and
``see also`` lines as edges between documents, stored per source document.

Targets are stored as written (normalised): a Markdown link as the absolute
path it points to, a wiki link or a see-also name as the note name, casefolded.
They are resolved when read, so a link to a note indexed later, renamed or
deleted is found (or reported broken) without touching the linking note.
"""

from __future__ import annotations

import posixpath
import re
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from urllib.parse import unquote

from clawkb.store import links_repo
from clawkb.types import JSON, Link, ParsedDocument

_SEE_ALSO = re.compile(
    r"^\s*(?:see also|related|另见|参见|参看|相关(?:笔记|文档)?)\s*[:：]\s*(.+)", re.I | re.S
)
_NAME_SPLIT = re.compile(r"\s*[,，;；、]\s*")
_SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*:", re.I)
_SLUG_DROP = re.compile(r"[^\w\- ]+")
#: How a ``:ref:`` target is stored: this prefix, then the label casefolded.
REF_PREFIX = "ref:"


@dataclass(frozen=True, slots=True)
class Edge:
    kind: str  # wiki | markdown | see_also
    target: str
    fragment: str
    text: str
    line: int


def note_name(text: str) -> str:
    """How a wiki target or a note's file stem is compared: casefolded, no extension."""
    name = text.strip().replace("\\", "/").rsplit("/", 1)[-1]
    if name.lower().endswith((".md", ".markdown", ".txt")):
        name = name.rsplit(".", 1)[0]
    return " ".join(name.split()).casefold()


def slug(heading: str) -> str:
    """A heading as a link fragment compares (GitHub style, any script kept)."""
    return _SLUG_DROP.sub("", heading.strip().casefold()).replace(" ", "-")


def _edge(link: Link, path: str, line: int, kind: str | None) -> Edge | None:
    target = link.target.strip()
    if link.kind == "ref":  # reStructuredText :ref:`label`: resolved through the labels
        return Edge(kind or "ref", REF_PREFIX + target.casefold(), "", link.text, line)
    if link.kind == "wiki":
        name, _, frag = target.partition("#")
        name = name or path  # [[#Heading]]: this note
        resolved = path if name == path else note_name(name)
        return Edge(kind or "wiki", resolved, frag.strip(), link.text, line)
    if _SCHEME.match(target) or target.startswith("//"):
        return None  # web links are not part of the note graph
    raw, _, frag = target.partition("#")
    raw = unquote(raw.split("?", 1)[0])
    resolved = posixpath.normpath(posixpath.join(posixpath.dirname(path), raw)) if raw else path
    return Edge(kind or "markdown", resolved, unquote(frag).strip(), link.text, line)


def extract(path: str, parsed: ParsedDocument) -> list[Edge]:
    """Every edge of one parsed document, in order."""
    out: list[Edge] = []
    for sl in parsed.slices:
        see = _SEE_ALSO.match(sl.text)
        kind = "see_also" if see else None
        for link in sl.links:
            edge = _edge(link, path, sl.line_start, kind)
            if edge:
                out.append(edge)
        if see and not sl.links:
            names = [n.strip(" .。[]") for n in _NAME_SPLIT.split(see.group(1).strip())]
            out.extend(Edge("see_also", note_name(n), "", n, sl.line_start) for n in names if n)
    return out


def store(conn: sqlite3.Connection, doc_id: int, edges: Sequence[Edge]) -> None:
    """Replace the edges of ``doc_id`` (inside the caller's transaction)."""
    spans = links_repo.chunk_spans(conn, doc_id)
    rows: list[links_repo.LinkInsert] = []
    for e in edges:
        chunk = next((cid for cid, a, b in spans if a <= e.line <= b), None)
        rows.append((doc_id, chunk, e.kind, e.target, e.fragment, e.text, e.line))
    links_repo.replace(conn, doc_id, rows)


class Resolver:
    """Maps stored targets to document ids (built once per read)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.by_path: dict[str, int] = {}
        self.by_name: dict[str, list[int]] = {}
        self.paths: dict[int, str] = {}
        for doc_id, path, title in links_repo.document_names(conn):
            self.by_path[path] = doc_id
            self.paths[doc_id] = path
            for name in {note_name(path), note_name(title or "")}:
                if name:
                    self.by_name.setdefault(name, []).append(doc_id)
        for doc_id, label in links_repo.rst_labels(conn):
            self.by_name.setdefault(REF_PREFIX + str(label).casefold(), []).append(doc_id)
        self._conn = conn
        self._headings: dict[int, set[str]] = {}

    def target(self, target: str) -> int | None:
        if target in self.by_path:
            return self.by_path[target]
        if target.startswith("/"):
            return None
        ids = self.by_name.get(target)
        if not ids and "/" in target:
            ids = self.by_name.get(note_name(target))
        return ids[0] if ids else None

    def has_heading(self, doc_id: int, fragment: str) -> bool:
        if doc_id not in self._headings:
            found: set[str] = set()
            import json

            for hp in links_repo.heading_paths(self._conn, doc_id):
                found.update(slug(h) for h in json.loads(hp))
            self._headings[doc_id] = found
        return slug(fragment) in self._headings[doc_id]


@dataclass(frozen=True, slots=True)
class LinkRow:
    source: str
    target: str  # as resolved (a path) or as written when broken
    kind: str
    fragment: str
    text: str
    line: int
    broken: str = ""  # "" | "missing note" | "missing heading"

    def to_dict(self) -> dict[str, JSON]:
        return {
            "source": self.source,
            "target": self.target,
            "kind": self.kind,
            "fragment": self.fragment,
            "text": self.text,
            "line": self.line,
            "broken": self.broken or None,
        }


def all_links(conn: sqlite3.Connection, resolver: Resolver | None = None) -> list[LinkRow]:
    """Every stored link, resolved, with why it is broken when it is."""
    res = resolver or Resolver(conn)
    out = []
    for doc_id, kind, target, frag, text, line in links_repo.all_rows(conn):
        source = res.paths.get(doc_id, "")
        tid = res.target(target)
        broken = ""
        if tid is None:
            broken = "missing note"
        elif frag and not res.has_heading(tid, frag):
            broken = "missing heading"
        shown = res.paths[tid] if tid is not None else target
        out.append(LinkRow(source, shown, kind, frag, text, line, broken))
    return out


def neighbours(conn: sqlite3.Connection, doc_ids: Iterable[int]) -> dict[int, set[int]]:
    """Undirected adjacency of the given documents (self links left out)."""
    res = Resolver(conn)
    adj: dict[int, set[int]] = {}
    for row in all_links(conn, res):
        a, b = res.by_path.get(row.source), res.by_path.get(row.target)
        if a is None or b is None or a == b:
            continue
        adj.setdefault(a, set()).add(b)
        adj.setdefault(b, set()).add(a)
    wanted = set(doc_ids)
    return {k: v for k, v in adj.items() if not wanted or k in wanted}
