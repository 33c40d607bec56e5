"""The source viewer's data: a document's lines around an anchor, or its page's passages.

Reads the file as indexed (same decoding as ingest); a file that changed or
vanished since is reported, and the stored chunk text is still returned.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clawkb.retrieve.hits import anchor_dict

if TYPE_CHECKING:
    from clawkb.kb import KnowledgeBase
    from clawkb.store.repo import ChunkRow

#: Larger files are shown as the stored chunks only (the viewer stays light).
MAX_VIEW_BYTES = 8 << 20


def source_view(kb: KnowledgeBase, row: ChunkRow, context: int) -> dict[str, Any]:
    a = row.to_anchor()
    before, after = kb.neighbours(row, 1, 1)
    out: dict[str, Any] = {
        **anchor_dict(a),
        "kind": "lines",
        "text": row.text,
        "previous": before[0].anchor if before else None,
        "next": after[0].anchor if after else None,
        "lines": [],
        "total_lines": 0,
        "note": "",
    }
    if a.page is not None:
        out["kind"] = "page"
        out["passages"] = _page_passages(kb, row, a.page)
        return out
    lines, note = _file_lines(a.path, kb.config.follow_symlinks == "outside")
    out["note"] = note
    if lines:
        first = max(1, a.line_start - context)
        last = min(len(lines), a.line_end + context)
        out["lines"] = [{"n": n, "text": lines[n - 1]} for n in range(first, last + 1)]
        out["total_lines"] = len(lines)
    return out


def _page_passages(kb: KnowledgeBase, row: ChunkRow, page: int) -> list[dict[str, Any]]:
    """Every stored chunk of the same page, in order, the anchor's own marked."""
    before, after = kb.neighbours(row, 200, 200)
    return [
        {"anchor": r.anchor, "text": r.text, "current": r.id == row.id}
        for r in (*before, row, *after)
        if r.to_anchor().page == page
    ]


def _file_lines(path: str, hardlinks: bool = False) -> tuple[list[str], str]:
    """The file's lines now; a file with several hard links is not read (one of its other
    names may be outside the served folders) unless ``follow_symlinks: outside``."""
    if path.startswith("memory://"):
        return [], "an agent memory: no file"
    p = Path(path)
    try:
        if not p.is_file():
            return [], "the file is no longer there; showing the indexed text"
        with p.open("rb") as fh:  # checked on the open file: no swap between check and read
            st = os.fstat(fh.fileno())
            if st.st_size > MAX_VIEW_BYTES:
                return [], "the file is too large to show; showing the indexed text"
            if st.st_nlink > 1 and not hardlinks:
                return [], "the file has other hard links; showing the indexed text"
            data = fh.read(MAX_VIEW_BYTES + 1)
    except OSError as exc:
        return [], f"cannot read the file ({exc.strerror}); showing the indexed text"
    from clawkb.errors import ClawkbError
    from clawkb.parsers.compressed import readable_bytes
    from clawkb.text.decode import decode_text, looks_binary

    try:
        data = readable_bytes(path, data)  # citations count the decompressed lines
    except ClawkbError:
        return [], "cannot decompress the file; showing the indexed text"
    if looks_binary(data):
        return [], "not a text file; showing the indexed text"
    try:
        text, _ = decode_text(data, path)
    except ClawkbError:
        return [], "cannot decode the file; showing the indexed text"
    return text.split("\n"), ""
