"""Slices of one PDF page: paragraphs, headings and tables in page order.

The document-level pass (:mod:`clawkb.parsers.pdf`) has already measured the
lines of every page and fixed the heading scale; a :class:`PageWriter` walks
one page's lines, turns heading lines into heading slices (updating the
heading path shared across pages), groups the other lines into paragraphs and
puts each ruled table where its first line was. Line numbers count lines of
the page text as emitted, so spans are exact within the page.

A table that ends a page and goes on overleaf is found by position
(:meth:`PageWriter._continues`), so it gets its header row back on every
page however many it spans; table text that strayed out of pdfplumber's box
is never a heading (:func:`beside_tables`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from clawkb.parsers.pdf_layout import HeadingScale, Line
from clawkb.parsers.pdf_outline import OutlineHeadings
from clawkb.parsers.pdf_tables import MIN_RULING_PATHS, Table, continue_header
from clawkb.parsers.pdf_tables import to_markdown as table_markdown
from clawkb.types import Slice

#: Share of the page height at its top and bottom where a continued table
#: starts and the table it continues ends (margins plus a running header).
CONTINUE_MARGIN = 0.2
#: The outer strips of the page where browsers and word processors print
#: running headers and footers (body text with a 1-inch margin starts below).
MARGIN = 0.05
BULLETS = re.compile(r"^\s*(?:[•●▪◦\-–*]|\(?\d{1,2}[.)])\s+")


@dataclass
class PageInfo:
    """What the first pass learns about one page."""

    lines: list[Line]
    height: float
    paths: int
    images: int
    ocr_text: str | None = None


@dataclass(frozen=True, slots=True)
class OpenTable:
    """A table that ended a page (or reached its bottom): it may go on overleaf."""

    header: tuple[str, ...]
    x0: float
    x1: float
    page: int  # 0-based


@dataclass
class DocState:
    """The walk over pages: heading stack, output and what to tell the user."""

    stack: list[tuple[int, str]] = field(default_factory=list)
    slices: list[Slice] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    needs_ocr: list[int] = field(default_factory=list)
    ocr_pages: list[int] = field(default_factory=list)
    #: The last table of the previous page, while it may continue on this one.
    open_table: OpenTable | None = None
    ocr_skipped: bool = False

    @property
    def heading_path(self) -> tuple[str, ...]:
        return tuple(text for _, text in self.stack)

    def push_heading(self, level: int, text: str) -> None:
        while self.stack and self.stack[-1][0] >= level:
            self.stack.pop()
        self.stack.append((level, text))


class PageWriter:
    """Turns one page's lines (and tables, and OCR text) into slices."""

    def __init__(
        self,
        state: DocState,
        table_at: dict[int, tuple[int, Table]],
        index: int,
        page: PageInfo,
        lines: list[Line],
        scale: HeadingScale,
        outline: OutlineHeadings | None,
    ) -> None:
        self.state = state
        self.table_at = table_at
        self.index = index
        self.page = page
        self.lines = lines
        self.scale = scale
        self.outline = outline
        self.next_line = 1  # line number within the page text
        self.blocks = 0  # slices emitted for this page
        self.paragraph: list[Line] = []
        self.last_heading: Line | None = None
        self.last_heading_level: int | None = None
        self.content_lines = 0  # lines emitted on this page outside the page margins
        self.tables = 0  # tables emitted on this page
        self.closing_table: OpenTable | None = None  # this page's table reaching its bottom
        self._last_table: OpenTable | None = None
        self.beside = beside_tables(lines, page.height, table_at) if table_at else set()

    def write(self) -> None:
        if self.outline is not None:
            for level, title in self.outline.start_page(self.index, self.lines):
                self.state.push_heading(level, title)
        table_at = self.table_at
        done_tables: set[int] = set()
        ended_with_table = False
        for i, line in enumerate(self.lines):
            spot = table_at.get(i)
            if spot is None:
                ended_with_table = False
                # a piece of a table row cut by the page break (above this page's
                # table) is no content that could stop the table continuing
                if not in_margins(line, self.page.height) and i not in self.beside:
                    self.content_lines += 1
                self._line(line, i in self.beside)
            elif spot[0] not in done_tables:
                done_tables.add(spot[0])
                self._flush()
                self._table(spot[1])
                ended_with_table = True
        self._flush()
        if self.page.ocr_text:
            self._ocr_text(self.page.ocr_text)
            ended_with_table = False
        # A table that ends the page's content, or whose last row reaches the
        # page's bottom (furniture the running-line rule missed may follow it),
        # stays open for the next page.
        self.state.open_table = self.closing_table
        if ended_with_table and self.closing_table is None and self.tables:
            self.state.open_table = self._last_table

    # -- blocks -----------------------------------------------------------
    def _line(self, line: Line, in_table: bool = False) -> None:
        headings = None if in_table and self.outline is None else self._headings(line)
        if headings is None:
            self.last_heading_level, self.last_heading = None, None
            if self.paragraph and breaks(self.paragraph[-1], line):
                self._flush()
            self.paragraph.append(line)
            return
        self._flush()
        if not headings:  # second line of an outline title already emitted whole
            self._extend_heading(None)
            return
        for level, text in headings[:-1]:
            self.state.push_heading(level, text)
        level, text = headings[-1]
        if self.outline is None and self._continues_heading(level, line):
            self._extend_heading(text)  # a heading set over two lines
            return
        self.state.push_heading(level, text)
        self._emit(text, "text")
        self.last_heading_level, self.last_heading = level, line

    def _continues_heading(self, level: int, line: Line) -> bool:
        prev = self.last_heading
        if prev is None or level != self.last_heading_level or prev.size != line.size:
            return False
        return 0 < prev.baseline - line.baseline < 1.45 * line.size

    def _headings(self, line: Line) -> list[tuple[int, str]] | None:
        if self.outline is not None:
            return self.outline.match(line.text)
        level = self.scale.level(line)
        return None if level is None else [(level, line.text)]

    def _extend_heading(self, more: str | None) -> None:
        """Let the last heading slice cover one more line (and its text, if given)."""
        last = self.state.slices[-1]
        text = last.text
        if more is not None:
            level, text = self.state.stack.pop()
            text = f"{text} {more}"
            self.state.stack.append((level, text))
        self.state.slices[-1] = Slice(
            text, last.line_start, last.line_end + 1, self.state.heading_path, page=last.page
        )
        self.next_line += 1

    def _flush(self) -> None:
        if self.paragraph:
            kind = "list" if BULLETS.match(self.paragraph[0].text) else "text"
            self._emit("\n".join(ln.text for ln in self.paragraph), kind)
            self.paragraph = []

    def _table(self, table: Table) -> None:
        rows = table.rows
        if self.tables == 0 and self._continues(table):
            assert self.state.open_table is not None
            rows = continue_header(self.state.open_table.header, rows)
        self._emit(table_markdown(rows), "table")
        self.tables += 1
        self._last_table = OpenTable(rows[0], table.x0, table.x1, self.index)
        reaches_bottom = table.bottom >= self.page.height * (1 - CONTINUE_MARGIN)
        self.closing_table = self._last_table if reaches_bottom else None
        self.last_heading_level, self.last_heading = None, None

    def _continues(self, table: Table) -> bool:
        """Whether ``table`` goes on with the previous page's last table.

        That table must have ended its page (or reached its bottom), this one
        must come first on this page (before any slice, or with nothing above
        it but lines in the page's outer 5 % strips, so page furniture
        the running-line rule missed does not matter, and pieces of a row the
        page break cut, :func:`beside_tables`) and start near the top,
        with as many columns, in the same column of the page.
        """
        prev = self.state.open_table
        if prev is None or prev.page != self.index - 1 or len(prev.header) != table.columns:
            return False
        first = self.blocks == 0 or (
            self.content_lines == 0 and table.top <= self.page.height * CONTINUE_MARGIN
        )
        # the same column of the page: most of the narrower one lies under the other
        # (a layout engine that fits widths per page, like reportlab, shifts the edges)
        overlap = min(prev.x1, table.x1) - max(prev.x0, table.x0)
        return first and overlap >= 0.8 * min(prev.x1 - prev.x0, table.x1 - table.x0)

    def _ocr_text(self, text: str) -> None:
        for block in text.split("\n\n"):
            if block.strip():
                self._emit(block.strip("\n"), "text")

    def _emit(self, text: str, kind: str) -> None:
        n = text.count("\n") + 1
        self.state.slices.append(
            Slice(
                text,
                self.next_line,
                self.next_line + n - 1,
                self.state.heading_path,
                kind=kind,
                page=self.index + 1,
            )
        )
        self.next_line += n
        self.blocks += 1


def table_positions(
    lines: list[Line], page: PageInfo, find_tables: Callable[[int], list[Table]], index: int
) -> dict[int, tuple[int, Table]]:
    """Line index -> (table number, table) for the lines of page ``index`` inside a ruled table."""
    if page.paths < MIN_RULING_PATHS or not lines:
        return {}
    tables = find_tables(index)
    where: dict[int, tuple[int, Table]] = {}
    for i, line in enumerate(lines):
        middle = page.height - (line.top + line.bottom) / 2  # to top-down coordinates
        for k, t in enumerate(tables):
            if t.top - 1 <= middle <= t.bottom + 1 and t.x0 - 1 <= line.x0 <= t.x1 + 1:
                where[i] = (k, t)
                break
    return where


def beside_tables(
    lines: list[Line], height: float, where: dict[int, tuple[int, Table]]
) -> set[int]:
    """Lines outside every table box that are pieces of a table all the same.

    A cell's text can stray out of the box pdfplumber found: a row cut by the
    page break, the wrapped end of a cell ("控制寄存" / "器"). Such a line
    starts inside a table's column range but right of its left edge (a
    heading above a table starts at the edge), or is a glyph or two, and lies
    within two of its lines above or below the box or of another such piece
    (a cell wrapped over many lines chains to the box). It is never a heading.
    """
    tables = {k: t for k, t in where.values()}.values()
    out: set[int] = set()
    # a span (top, bottom, top-down) per table that grows by each piece found, so
    # the lines of a cell wrapped over many lines chain to the box one by one
    spans = {id(t): (t.top, t.bottom) for t in tables}
    grown = True
    while grown:
        grown = False
        for i, line in enumerate(lines):
            if i in where or i in out:
                continue
            top, bottom = height - line.top, height - line.bottom  # top-down, like pdfplumber
            reach = 2 * max(line.size, 1.0)
            for t in tables:
                inside = t.x0 + 0.5 * line.size < line.x0 < t.x1 or (
                    len(line.text.strip()) <= 2 and t.x0 - 1 <= line.x0 < t.x1
                )
                lo, hi = spans[id(t)]
                if inside and bottom >= lo - reach and top <= hi + reach:
                    out.add(i)
                    spans[id(t)] = (min(lo, top), max(hi, bottom))
                    grown = True
                    break
    return out


def in_margins(line: Line, height: float) -> bool:
    """Whether ``line`` touches the page's outer strips (:data:`MARGIN`), where
    print headers and footers live: no content that counts for layout."""
    return line.bottom <= MARGIN * height or line.top >= (1 - MARGIN) * height


def breaks(previous: Line, line: Line) -> bool:
    """Whether ``line`` starts a new paragraph after ``previous``."""
    if abs(previous.size - line.size) > 0.6 or previous.bold != line.bold:
        return True
    pitch = previous.baseline - line.baseline  # single spacing is about 1.2 x size
    if pitch > 1.45 * line.size or pitch < -0.5 * line.size:
        return True  # a blank gap, or a jump back up (next column)
    return bool(BULLETS.match(line.text))
