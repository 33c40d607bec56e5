"""Text lines of a PDF page, with the font facts that make headings visible.

pdfium (through pypdfium2) gives the page text in content-stream order with a
line break after every visual line, and per-character font size, weight and
name. Asking for those facts per *character* costs several C calls each, so a
line is sampled at three characters (first, middle, last non-blank): enough to
tell a 14 pt bold heading from 10 pt body text at a fraction of the cost.

Coordinates are PDF points with the origin at the bottom-left, as pdfium
reports them; ``top``/``bottom`` of a line are the extremes of its sampled
characters.
"""

from __future__ import annotations

import ctypes
import re
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING

try:
    import pypdfium2.raw as pdfium_c
except ImportError:  # no `pdf` extra: PdfParser.parse names it before anything here runs
    pdfium_c = None

if TYPE_CHECKING:
    from pypdfium2 import PdfTextPage

#: Control characters pdfium may leave in text (0x02 marks a soft hyphen).
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\ufffe\uffff]")
_BOLD_NAME = re.compile(r"bold|black|heavy|semibold|demi", re.I)
_FORCE_BOLD_FLAG = 1 << 18  # PDF font descriptor flag "ForceBold"
_DIGITS = re.compile(r"\d+")
_SPACES = re.compile(r"\s+")
_PAGE_NUMBER = re.compile(
    r"^(?:page|p\.|第)?\s*[-–—]?\s*\d{1,4}\s*(?:/\s*\d{1,4}|of\s+\d{1,4}|页)?\s*[-–—]?\s*$",
    re.I,
)
#: A CJK character or full-width mark: no space is written between two of them.
WIDE = re.compile(r"[\u2e80-\u9fff\uf900-\ufaff\u3000-\u303f\uff00-\uffef]")
#: A table or figure caption: "表 3-1 寄存器列表", "Table 4.2: Pins", "图 2", "Figure 7", "表".
CAPTION = re.compile(
    r"^\s*(?:(?:表|图|table|figure|fig\.)\s*[A-Z]?\d+(?:[.\-–]\d+)*(?:\s|[:：.]|$)"
    r"|[表图]\s*(?:[:：]|$))",  # a bare "表" or "表：…" too
    re.I,
)


@dataclass(frozen=True, slots=True)
class Line:
    """One visual line of a page."""

    text: str
    size: float  # font size in points (median of the sampled characters)
    bold: bool
    top: float
    bottom: float
    x0: float
    baseline: float  # y of the first character's origin
    x1: float = 0.0  # right edge of the last character


#: A pdfium line taller than this many font sizes mixes text from several
#: visual lines (Chromium's print header and footer on later pages).
_MIXED_LINE = 2.5


def page_lines(textpage: PdfTextPage) -> list[Line]:
    """The non-blank lines of a pdfium text page, in content-stream order.

    pdfium usually breaks the text at visual lines, but on some pages (the
    print header and footer Chromium draws on every page after the first) it
    puts one glyph per line or joins glyphs from the top and the bottom of the
    page. Such lines are repaired: a line spanning several baselines is split
    by baseline, and glyph fragments on one baseline are joined again
    (:func:`_join_fragments`), so a running header reads the same on every
    page and is recognised as one.
    """
    text = textpage.get_text_range()
    lines: list[Line] = []
    offset = 0
    for raw in text.split("\n"):
        start, end = offset, offset + len(raw)
        offset = end + 1
        body = _CONTROL.sub(lambda m: "-" if m.group() == "\x02" else "", raw.rstrip("\r"))
        if not body.strip():
            continue
        first = start + (len(raw) - len(raw.lstrip()))
        last = start + len(raw.rstrip()) - 1
        line = _measure(textpage, body.strip(), first, last)
        whole = raw.rstrip("\r")
        if line.top - line.bottom > _MIXED_LINE * max(line.size, 1.0) and body == whole:
            lines.extend(_split_by_baseline(textpage, whole, start))
        else:
            lines.append(line)
    return _join_fragments(lines)


def _split_by_baseline(textpage: PdfTextPage, raw: str, start: int) -> list[Line]:
    """Cut a pdfium line where its glyphs jump to another baseline."""
    out: list[Line] = []
    x, y = ctypes.c_double(0), ctypes.c_double(0)
    group_start, group_y = None, 0.0
    for k, ch in enumerate([*raw, None]):
        if ch is not None:
            pdfium_c.FPDFText_GetCharOrigin(textpage, start + k, ctypes.byref(x), ctypes.byref(y))
            size = max(pdfium_c.FPDFText_GetFontSize(textpage, start + k), 1.0)
            if group_start is None:
                group_start, group_y = k, y.value
                continue
            if ch.isspace() or abs(y.value - group_y) <= 0.5 * size:
                continue
        if group_start is not None:
            part = raw[group_start:k]
            if part.strip():
                lead = len(part) - len(part.lstrip())
                a = start + group_start + lead
                out.append(_measure(textpage, part.strip(), a, a + len(part.strip()) - 1))
        group_start, group_y = k, y.value
    return out


def _join_fragments(lines: list[Line]) -> list[Line]:
    """Join consecutive pieces of one visual line: same baseline and size, the
    second to the right of the first, and either touching (a word cut in two)
    or one of them a glyph or two (pdfium's one-glyph-per-line output). Two
    longer lines side by side (columns, a label and its value) stay apart."""
    out: list[Line] = []
    for line in lines:
        prev = out[-1] if out else None
        if prev is not None and prev.x1 > 0 and line.x1 > 0:
            size = max(prev.size, line.size, 1.0)
            gap = line.x0 - prev.x1
            if (
                abs(prev.baseline - line.baseline) <= 0.25 * size
                and abs(prev.size - line.size) <= 0.6
                and gap >= -0.5 * size
                and (gap <= 0.5 * size or min(len(prev.text), len(line.text)) <= 2)
            ):
                sep = "" if gap < 0.15 * size else " "
                out[-1] = Line(
                    prev.text + sep + line.text,
                    prev.size,
                    prev.bold and line.bold,
                    max(prev.top, line.top),
                    min(prev.bottom, line.bottom),
                    min(prev.x0, line.x0),
                    prev.baseline,
                    max(prev.x1, line.x1),
                )
                continue
        out.append(line)
    return out


def _measure(textpage: PdfTextPage, text: str, first: int, last: int) -> Line:
    samples = sorted({first, (first + last) // 2, last})
    sizes, bolds, tops, bottoms = [], [], [], []
    x0, x1 = float("inf"), 0.0
    for index in samples:
        sizes.append(round(pdfium_c.FPDFText_GetFontSize(textpage, index) * 2) / 2)
        bolds.append(_is_bold(textpage, index))
        left, bottom, right, top = textpage.get_charbox(index)
        tops.append(top)
        bottoms.append(bottom)
        x0 = min(x0, left)
        x1 = max(x1, right)
    x, y = ctypes.c_double(0), ctypes.c_double(0)
    pdfium_c.FPDFText_GetCharOrigin(textpage, first, ctypes.byref(x), ctypes.byref(y))
    return Line(
        text=text,
        size=sorted(sizes)[len(sizes) // 2],
        bold=all(bolds),
        top=max(tops),
        bottom=min(bottoms),
        x0=x0,
        baseline=y.value,
        x1=x1,
    )


def _is_bold(textpage: PdfTextPage, index: int) -> bool:
    weight = pdfium_c.FPDFText_GetFontWeight(textpage, index)
    if weight >= 600:
        return True
    buf = ctypes.create_string_buffer(128)
    flags = ctypes.c_int(0)
    pdfium_c.FPDFText_GetFontInfo(textpage, index, buf, len(buf), ctypes.byref(flags))
    name = buf.value.decode("latin-1", "replace")
    return bool(_BOLD_NAME.search(name)) or bool(flags.value & _FORCE_BOLD_FLAG)


def body_size(pages: list[list[Line]]) -> float:
    """The font size carrying most characters of running text: the body text size.

    Lines that read like titles (short, no closing punctuation) are left out
    when there is running text besides them: on a page that holds a title, a
    chapter heading, one sentence and a table (whose cells are not counted),
    the title's large type must not become the body size — then no heading
    would be found at all, or the sentence would be taken for one.
    """
    weights: Counter[float] = Counter()
    running: Counter[float] = Counter()
    for lines in pages:
        for line in lines:
            weights[line.size] += len(line.text)
            if not _looks_like_title(line.text):
                running[line.size] += len(line.text)
    best = running or weights
    return best.most_common(1)[0][0] if best else 10.0


def running_lines(pages: list[list[Line]], heights: list[float]) -> set[tuple[int, int]]:
    """``(page index, line index)`` of running headers/footers to drop.

    A line in the top or bottom 8 % of its page whose text, with digits
    blanked (page numbers change) and spaces ignored (:func:`furniture_key`),
    recurs on at least half the pages (and at least three; on a two-page
    document, on both) is page furniture, not
    content: indexing it would put "Datasheet Rev 3 · Page 7 of 30" in every
    chunk. A bare page number there ("7", "- 7 -", "7/30", "Page 7") is
    furniture on any document of two or more pages.
    """
    if len(pages) < 2:
        return set()
    where: dict[str, list[tuple[int, int]]] = {}
    drop: set[tuple[int, int]] = set()
    for p, (lines, height) in enumerate(zip(pages, heights, strict=True)):
        seen: set[str] = set()
        for i, line in enumerate(lines):
            if height * 0.08 < line.bottom and line.top < height * 0.92:
                continue
            if _PAGE_NUMBER.match(line.text):
                drop.add((p, i))
                continue
            key = furniture_key(line.text)
            if key not in seen:
                seen.add(key)
                where.setdefault(key, []).append((p, i))
    need = len(pages) if len(pages) < 3 else max(3, (len(pages) + 1) // 2)
    for spots in where.values():
        if len(spots) >= need:
            drop.update(spots)
    return drop


def furniture_key(text: str) -> str:
    """What a running header or footer reads the same on every page: digits
    blanked, and no spaces, because the spacing pdfium puts between glyphs
    varies with them ("11/16" can come out as "1 1/16" where "10/16" does not)."""
    return _DIGITS.sub("#", _SPACES.sub("", text.casefold()))


def cover_title(pages: list[list[Line]], body: float) -> str | None:
    """The first page's largest line, when no page sets anything larger and it
    stands well above the body size: the title on a cover or first page, which
    an outline (made from the chapter headings) usually leaves out. A title set
    over consecutive lines of that size is joined."""
    first = pages[0] if pages else []
    if not first:
        return None
    size = max(line.size for line in first)
    if size < body * 1.3 or any(line.size > size for lines in pages for line in lines):
        return None
    start = next(i for i, line in enumerate(first) if line.size == size)
    parts = []
    for line in first[start:]:
        if line.size != size:
            break
        parts.append(line.text)
    title = " ".join(parts)
    if len(title) > HeadingScale.MAX_HEADING_CHARS or CAPTION.match(title):
        return None
    return title


class HeadingScale:
    """Maps a line's font size and weight to a heading level (or none).

    Sizes clearly above the body size (by 12 % or more) found on short lines
    become levels 1, 2, 3 … from the largest down (at most four; smaller ones
    share the last level). A short bold line at body size is one level below
    the smallest size level: datasheets often set sub-sections that way.
    A line ending in a Chinese full stop ("下表列出全部寄存器。") is a
    sentence, never a heading, whatever its size: should the body size come
    out too small, the prose set in the real body size still reads as prose.
    """

    MAX_SIZE_LEVELS = 4
    MAX_HEADING_CHARS = 120

    def __init__(self, pages: list[list[Line]], body: float) -> None:
        self.body = body
        big = {
            line.size
            for lines in pages
            for line in lines
            if line.size >= body * 1.12 and self._may_head(line.text)
        }
        ordered = sorted(big, reverse=True)
        self.levels = {size: min(i + 1, self.MAX_SIZE_LEVELS) for i, size in enumerate(ordered)}
        self.bold_level = min(len(ordered), self.MAX_SIZE_LEVELS) + 1

    def _may_head(self, text: str) -> bool:
        # a caption names its table or figure, it opens no section
        return (
            len(text) <= self.MAX_HEADING_CHARS
            and not CAPTION.match(text)
            and not text.rstrip().endswith("。")
        )

    def level(self, line: Line) -> int | None:
        if not self._may_head(line.text):
            return None
        if line.size in self.levels:
            return self.levels[line.size]
        if line.bold and abs(line.size - self.body) < 0.6 and _looks_like_title(line.text):
            return self.bold_level
        return None


def _looks_like_title(text: str) -> bool:
    """Short, not ending like a sentence or a label: "3.2 Clock tree", not "Note:"."""
    stripped = text.strip()
    return 2 <= len(stripped) <= 80 and not stripped.endswith(
        (".", "。", ":", "：", ",", "，", ";")
    )
