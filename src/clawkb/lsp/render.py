"""Hits as editor Markdown: hover cards and the results document of the code action.

Each passage starts with a ``file:line`` link (a ``file://`` URI with a
``#L<line>`` fragment, which VS Code, Neovim and Helix open at the line), its
section path and its anchor, then the snippet as a quote. Paths are shown
relative to the workspace root when they lie under it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

if TYPE_CHECKING:
    from clawkb.store.repo import ChunkRow
    from clawkb.types import Hit

#: characters of a snippet shown per passage
SNIPPET_CHARS = 320
#: the kinds of cursor target, as hover headers name them
KIND_NAMES = {"comment": "comment", "string": "string", "identifier": "identifier"}


def file_uri(path: str) -> str:
    return Path(path).resolve().as_uri() if os.path.isabs(path) else quote(path)


def shown_path(path: str, root: Path | None) -> str:
    """``path`` relative to the workspace root when under it, else as stored."""
    if root is not None and os.path.isabs(path):
        try:
            return Path(path).resolve().relative_to(root).as_posix()
        except ValueError:
            pass
    return path


def _escape(text: str) -> str:
    """Markdown-inert text for one quoted line (no HTML, no links, no emphasis)."""
    out = text.replace("\\", "\\\\")
    for ch in "`*_[]<>#|":
        out = out.replace(ch, "\\" + ch)
    return " ".join(out.split())


def passage(hit: Hit, n: int, root: Path | None) -> str:
    """One hit: ``**n.** [file:line](uri#Lline) · § section · #anchor`` and its snippet."""
    a = hit.anchor
    where = f"{shown_path(a.path, root)}:{a.line_start}"
    link = f"[{_escape(where)}]({file_uri(a.path)}#L{a.line_start})"
    page = f" p.{a.page}" if a.page is not None else ""
    section = " > ".join(a.heading_path) or hit.title
    head = f"**{n}.** {link}{page}"
    if section:
        head += f" · § {_escape(section)}"
    head += f" · `#{a.id}`"
    snippet = (hit.snippet or hit.text)[:SNIPPET_CHARS]
    return f"{head}\n\n> {_escape(snippet)}"


def hover_markdown(query: str, kind: str, hits: list[Any], root: Path | None) -> str:
    """The hover card for a search made from the cursor's ``kind`` of text."""
    shown = query if len(query) <= 60 else query[:57] + "…"
    title = f"**clawkb** · {KIND_NAMES.get(kind, kind)} `{shown.replace('`', ' ')}`"
    if not hits:
        return f"{title}\n\nno passage in the knowledge base"
    parts = [passage(h, i, root) for i, h in enumerate(hits, 1)]
    return title + "\n\n" + "\n\n---\n\n".join(parts)


def chunk_markdown(row: ChunkRow, root: Path | None) -> str:
    """A chunk named by a ``clawkb:ANCHOR`` reference."""
    where = f"{shown_path(row.path, root)}:{row.line_start}-{row.line_end}"
    link = f"[{_escape(where)}]({file_uri(row.path)}#L{row.line_start})"
    section = " > ".join(row.heading_path) or row.title
    head = f"**clawkb** `#{row.anchor}` · {link}" + (f" · § {_escape(section)}" if section else "")
    return f"{head}\n\n```\n{row.text.replace('```', '` ` `')}\n```"


def results_document(query: str, hits: list[Any], root: Path | None) -> str:
    """The Markdown document the code action opens: every hit with its passage."""
    lines = [f"# clawkb: {' '.join(query.split())}", ""]
    if not hits:
        lines.append("No passage in the knowledge base.")
    for i, h in enumerate(hits, 1):
        lines += [passage(h, i, root), ""]
    return "\n".join(lines)
