"""Headings from the PDF outline (bookmarks), when the document has one.

The outline is the author's own table of contents, so it beats guessing from
font sizes. Each entry names a title, a depth and a target page; on that page
the line that spells the title becomes the heading (a title set over two lines
is matched across both). An entry whose title is not found on its page still
opens its section at that point of the page walk, so the heading path stays
right for the text that follows: such entries open at the top of their page.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

from clawkb.parsers.pdf_layout import Line

if TYPE_CHECKING:
    from pypdfium2 import PdfDocument

#: Outline entries read at most (a broken file could loop).
MAX_ENTRIES = 5000

Heading = tuple[int, str]


def _key(text: str) -> str:
    return "".join(text.split()).casefold()


class _Dest(Protocol):
    def get_index(self) -> int | None: ...


@runtime_checkable
class _Bookmark(Protocol):
    """An outline entry as pypdfium2 5.x gives it (``PdfBookmark``)."""

    def get_title(self) -> str | None: ...
    def get_dest(self) -> _Dest | None: ...


class _OutlineTuple(Protocol):
    """An outline entry as pypdfium2 4.x gives it (a named tuple)."""

    title: str | None
    page_index: int | None


def _title_and_page(item: _Bookmark | _OutlineTuple) -> tuple[str, int | None]:
    """Title and 0-based target page of an outline item (pypdfium2 5.x or 4.x API)."""
    if isinstance(item, _Bookmark):  # has get_title (and get_dest)
        dest = item.get_dest()
        index = dest.get_index() if dest is not None else None
        raw_title = item.get_title()
    else:
        index, raw_title = item.page_index, item.title
    return " ".join((raw_title or "").split()), index


class OutlineHeadings:
    """Outline entries per page, matched against page lines in order."""

    def __init__(self, by_page: dict[int, list[Heading]]) -> None:
        self.by_page = by_page
        self.pending: list[Heading] = []
        self.partial: tuple[str, str] | None = None  # (title key, matched so far)

    @classmethod
    def from_document(cls, doc: PdfDocument, pages: list[list[Line]]) -> OutlineHeadings | None:
        """The document's outline, or ``None`` when it has no usable one."""
        by_page: dict[int, list[Heading]] = {}
        try:
            for n, item in enumerate(doc.get_toc(max_depth=8)):
                if n >= MAX_ENTRIES:
                    break
                title, page = _title_and_page(item)
                if title and page is not None and 0 <= page < len(pages):
                    by_page.setdefault(page, []).append((item.level + 1, title))
        except Exception:  # a damaged outline is no reason to lose the text
            return None
        return cls(by_page) if by_page else None

    def start_page(self, index: int, lines: list[Line]) -> list[Heading]:
        """Prepare page ``index``; returns the entries not spelled on it (open them now)."""
        keys = [_key(line.text) for line in lines]
        found: list[Heading] = []
        missing: list[Heading] = []
        for level, title in self.by_page.get(index, []):
            want = _key(title)
            hit = any(k == want or (len(k) >= 4 and want.startswith(k)) for k in keys if k)
            (found if hit else missing).append((level, title))
        self.pending = found
        self.partial = None
        return missing

    def match(self, text: str) -> list[Heading] | None:
        """Headings that ``text`` opens, in order; ``[]`` for the second line of a
        two-line title; ``None`` when the line is not a heading.

        Entries listed before the matched one whose line was already used up
        are opened too, just before it.
        """
        key = _key(text)
        if not key:
            return None
        if self.partial is not None:
            title, done = self.partial
            if title.startswith(done + key):
                done += key
                self.partial = None if done == title else (title, done)
                return []
            self.partial = None
        for k, (_level, title) in enumerate(self.pending):
            want = _key(title)
            if key == want or (len(key) >= 4 and want.startswith(key)):
                opened = self.pending[: k + 1]
                self.pending = self.pending[k + 1 :]
                if key != want:
                    self.partial = (want, key)
                return opened
        return None
