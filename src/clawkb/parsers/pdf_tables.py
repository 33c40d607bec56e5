"""Ruled tables of a PDF page, as Markdown pipe tables.

pdfium has no table finder, and pdfplumber's (built on pdfminer) is good but
costs tens of milliseconds per page. So pdfplumber looks only at pages that
draw enough vector paths to be a ruled table: on a typical datasheet most
pages are prose and never pay for it.

A table becomes one Markdown pipe table (header row, separator, one line per
row). The chunker recognises that shape and repeats the header and separator
in every piece when it cuts a long table, so every chunk holding rows says
what the columns are. A table continued on the next page without its header
gets the previous page's header (see :func:`continue_header`; which table
continues which is decided by position in :mod:`pdf_page`), however many
pages it runs over.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from clawkb.parsers.pdf_layout import WIDE as _WIDE

if TYPE_CHECKING:
    from pdfplumber.page import Page

#: A page needs at least this many path objects before we look for tables.
MIN_RULING_PATHS = 4


@dataclass(frozen=True, slots=True)
class Table:
    """Rows of cell strings plus the table's box in pdfplumber's top-down points."""

    rows: tuple[tuple[str, ...], ...]
    x0: float
    top: float
    x1: float
    bottom: float

    @property
    def columns(self) -> int:
        return len(self.rows[0]) if self.rows else 0


def find_tables(plumber_page: Page) -> list[Table]:
    """Tables with at least two rows and two columns, top to bottom."""
    found = []
    for t in plumber_page.find_tables():
        rows = tuple(tuple(cell_text(c) for c in row) for row in t.extract())
        rows = tuple(r for r in rows if any(r))
        if len(rows) >= 2 and max(len(r) for r in rows) >= 2:
            x0, top, x1, bottom = t.bbox
            found.append(Table(_square(rows), x0, top, x1, bottom))
    return sorted(found, key=lambda t: (t.top, t.x0))


def to_markdown(rows: tuple[tuple[str, ...], ...]) -> str:
    """A pipe table: the first row is the header."""
    header, *body = rows
    lines = [_row(header), "| " + " | ".join("---" for _ in header) + " |"]
    lines.extend(_row(r) for r in body)
    return "\n".join(lines)


def continue_header(
    previous: tuple[str, ...] | None, rows: tuple[tuple[str, ...], ...]
) -> tuple[tuple[str, ...], ...]:
    """Prefix ``previous`` (the header of a table that ended the last page) when
    ``rows`` looks like its continuation: same column count, different first row."""
    if previous is None or len(previous) != len(rows[0]) or rows[0] == previous:
        return rows
    return (previous, *rows)


def cell_text(value: object) -> str:
    """One line of cell text. A cell wrapped over lines is rejoined with a space,
    except between two CJK characters or full-width marks, where a space would be
    new text ("控制寄存\n器" is "控制寄存器", not "控制寄存 器")."""
    if value is None:
        return ""
    out = ""
    for part in str(value).split("\n"):
        part = " ".join(part.split())
        if not part:
            continue
        if out and not (_WIDE.match(out[-1]) and _WIDE.match(part[0])):
            out += " "
        out += part
    return out


def _square(rows: tuple[tuple[str, ...], ...]) -> tuple[tuple[str, ...], ...]:
    width = max(len(r) for r in rows)
    return tuple(r + ("",) * (width - len(r)) for r in rows)


def _row(cells: tuple[str, ...]) -> str:
    return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"
