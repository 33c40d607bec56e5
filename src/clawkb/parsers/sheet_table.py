"""Turn one sheet (a grid of cell strings with row numbers) into table slices.

Shared by the XLSX and CSV parsers. The decisions that matter for search:

* **Anchors a human can open**: each slice covers a block of rows and its
  heading path is ``(sheet, "Sheet!A12:F30")``; ``line_start``/``line_end``
  are the first/last *row numbers*, so a hit's location reads
  ``bom.xlsx:12-30`` under the heading ``BOM > BOM!A12:F30``.
* **The header row is repeated**: every block starts with the detected
  header (pipe-table form, so the chunker also repeats it if it ever has to
  cut a block further). Rows above the header (a title, notes) become a
  plain text slice.
* **Merged cells**: the top-left value is copied into every covered cell, so
  a merged "Power" group label is found on each row it spans.
* **Blocks fit a chunk**: rows are grouped up to :data:`BLOCK_TOKENS`
  (below the default chunk budget) so one block is one chunk.

Header detection: among the first :data:`HEADER_SCAN` non-empty rows, the
first one with at least two cells, all of them non-numeric text, filling at
least half of the table width and followed by another row. Without one, the
column letters serve as the header.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from clawkb.text.estimate import estimate_tokens
from clawkb.types import Slice

BLOCK_TOKENS = 260
MAX_BLOCK_ROWS = 200
HEADER_SCAN = 10
_NUMBER = re.compile(r"^[-+]?(?:\d[\d,_]*\.?\d*|\.\d+)(?:[eE][-+]?\d+)?%?$")
_REF = re.compile(r"^([A-Z]{1,3})(\d+)$")


@dataclass(frozen=True, slots=True)
class MergedRange:
    """Inclusive 1-based bounds of a merged cell range."""

    min_row: int
    min_col: int
    max_row: int
    max_col: int


def col_letter(index: int) -> str:
    """1 -> "A", 27 -> "AA"."""
    out = ""
    while index > 0:
        index, rem = divmod(index - 1, 26)
        out = chr(65 + rem) + out
    return out


def parse_range(ref: str) -> MergedRange | None:
    """``"B3:C4"`` -> bounds; ``None`` for anything that is not an A1 range."""
    parts = ref.upper().split(":")
    bounds = []
    for part in parts[:2]:
        m = _REF.match(part.replace("$", ""))
        if m is None:
            return None
        col = 0
        for ch in m.group(1):
            col = col * 26 + ord(ch) - 64
        bounds.append((int(m.group(2)), col))
    (r1, c1), (r2, c2) = bounds[0], bounds[-1]
    return MergedRange(min(r1, r2), min(c1, c2), max(r1, r2), max(c1, c2))


def propagate_merged(
    rows: dict[int, list[str]], merged: Iterable[MergedRange], max_cells: int
) -> None:
    """Copy each merged range's top-left value into every cell it covers (in place)."""
    budget = max_cells
    for rng in merged:
        value = _cell(rows, rng.min_row, rng.min_col)
        if not value:
            continue
        area = (rng.max_row - rng.min_row + 1) * (rng.max_col - rng.min_col + 1)
        budget -= area
        if budget < 0:
            return  # a hostile sheet merging whole columns: keep what we have
        for r in range(rng.min_row, rng.max_row + 1):
            row = rows.setdefault(r, [])
            if len(row) < rng.max_col:
                row.extend([""] * (rng.max_col - len(row)))
            for c in range(rng.min_col, rng.max_col + 1):
                row[c - 1] = value


def sheet_slices(sheet: str, rows: dict[int, list[str]]) -> tuple[list[Slice], dict[str, object]]:
    """Slices for one sheet plus a metadata summary (header row, ranges)."""
    numbered = sorted((r, _trim(cells)) for r, cells in rows.items())
    numbered = [(r, cells) for r, cells in numbered if any(cells)]
    if not numbered:
        return [], {"name": sheet, "rows": 0, "columns": 0, "header_row": None}
    width = max(len(cells) for _, cells in numbered)
    first_col = min(next(i for i, v in enumerate(c) if v) for _, c in numbered)
    numbered = [(r, [*c[first_col:], *[""] * (width - len(c))]) for r, c in numbered]
    width -= first_col
    h = _header_index(numbered, width)
    slices: list[Slice] = []
    if h is None:
        header = [col_letter(first_col + i + 1) for i in range(width)]
        body = numbered
    else:
        header = [v or col_letter(first_col + i + 1) for i, v in enumerate(numbered[h][1])]
        preamble = numbered[:h]
        if preamble:
            text = "\n".join(" ".join(v for v in cells if v) for _, cells in preamble)
            slices.append(Slice(text, preamble[0][0], preamble[-1][0], (sheet,)))
        body = numbered[h + 1 :]
        if not body:
            body = [numbered[h]]
    head_text = _row_line(header) + "\n|" + " --- |" * width
    last_col = col_letter(first_col + width)
    for block in _blocks(body, estimate_tokens(head_text)):
        r1, r2 = block[0][0], block[-1][0]
        ref = f"{_quote(sheet)}!{col_letter(first_col + 1)}{r1}:{last_col}{r2}"
        text = head_text + "\n" + "\n".join(_row_line(cells) for _, cells in block)
        slices.append(Slice(text, r1, r2, (sheet, ref), kind="table"))
    meta = {
        "name": sheet,
        "rows": len(numbered),
        "columns": width,
        "header_row": numbered[h][0] if h is not None else None,
        "header": header,
        "range": f"{col_letter(first_col + 1)}{numbered[0][0]}:{last_col}{numbered[-1][0]}",
    }
    return slices, meta


def _blocks(
    body: Sequence[tuple[int, list[str]]], head_tokens: int
) -> list[list[tuple[int, list[str]]]]:
    blocks: list[list[tuple[int, list[str]]]] = []
    used = BLOCK_TOKENS  # forces a new block for the first row
    for row in body:
        cost = _row_tokens(_row_line(row[1]))
        if blocks and used + cost <= BLOCK_TOKENS and len(blocks[-1]) < MAX_BLOCK_ROWS:
            blocks[-1].append(row)
            used += cost
        else:
            blocks.append([row])
            used = head_tokens + cost
    return blocks


def _row_tokens(line: str) -> int:
    """A fast upper-bound token estimate for a table row (the exact one is ~10x slower).

    ASCII rows of cells between " | " separators stay under 0.5 token a
    character by the chunker's own weights; other text under 1 a character.
    """
    return (len(line) + 1) // 2 if line.isascii() else len(line)


def _header_index(rows: Sequence[tuple[int, list[str]]], width: int) -> int | None:
    for i, (_, cells) in enumerate(rows[:HEADER_SCAN]):
        filled = [v for v in cells if v]
        if i + 1 >= len(rows):
            return None
        if (
            len(filled) >= 2
            and 2 * len(filled) >= width
            and not any(_NUMBER.match(v) for v in filled)
        ):
            return i
    return None


def _row_line(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _trim(cells: list[str]) -> list[str]:
    end = len(cells)
    while end and not cells[end - 1]:
        end -= 1
    return cells[:end]


def _cell(rows: dict[int, list[str]], r: int, c: int) -> str:
    row = rows.get(r)
    return row[c - 1] if row is not None and c - 1 < len(row) else ""


def _quote(sheet: str) -> str:
    """Quote sheet names with spaces or punctuation the way spreadsheet formulas do."""
    if re.fullmatch(r"[\w.]+", sheet):
        return sheet
    return "'" + sheet.replace("'", "''") + "'"
