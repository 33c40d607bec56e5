"""Group parser slices into size-bounded chunks, structure first.

Rules, in order of importance:

* Slices are never merged across a change of heading path (or page): a chunk
  belongs to one section, so its heading prefix is true for all of it. The one
  exception: a section holding only its heading (and maybe its parents'
  headings) is glued to the subsection it introduces, whose path extends it.
* Within a section, consecutive slices are packed up to ``max_tokens``.
* A slice too big for one chunk is cut into pieces along its own structure:
  code by lines; a table by rows, with the header (and separator) row
  repeated in every piece; lists by lines then sentences; prose by
  paragraphs, then lines, then sentences (``. ! ?`` and ``。！？；``), and only
  as a last resort by characters. Consecutive pieces of one slice overlap by
  about ``overlap`` of the budget: trailing sentences/lines of a piece are
  repeated at the start of the next one (tables repeat the header instead).
* A small lead-in (below ``min_tokens``, typically a heading slice) that would
  stand alone before a long slice is glued onto that slice's first piece.

Pieces are exact substrings of the slice text, so their line spans are exact
as long as the slice keeps one text line per source line (the built-in
parsers do); otherwise spans are clamped to the slice's span.

Token counts are estimates without a tokenizer model: a CJK character is 0.7
token, a Latin word 1.3 tokens (more for long identifiers, ~4 chars a token),
punctuation half a token; 350 tokens is therefore about 500 CJK characters.
Internally weights are integers in tenths of a token so that the packing
arithmetic is exact: a chunk packed within budget always re-estimates within
budget.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from itertools import pairwise

from clawkb.errors import ConfigError
from clawkb.text.estimate import CJK as _CJK
from clawkb.text.estimate import weight as _weight
from clawkb.types import Chunk, Link, Slice

_TOKEN = re.compile(rf"([{_CJK}])|([^\W{_CJK}]+)|([^\w\s])")
_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n\s*")
_LINE_BREAK = re.compile(r"\n")
_SENTENCE_END = re.compile(r"[。！？；…!?;]+[\"'”’」』）)\]]*[ \t]*|\.[\"'”’)\]]*(?=\s|$)[ \t]*")
_TABLE_SEP = re.compile(r"^ {0,3}\|?[ \t]*:?-+:?[ \t]*(?:\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*$")
_DOMINANT_SHARE = 0.8

#: Recorded with every stored document. Bump it when a change to these rules
#: gives different chunks for the same slices: `clawkb index` then re-chunks
#: documents stored under another version even when their files did not change.
#: 2: heading-only sections glued to the subsection they introduce; table row
#: spans kept inside the slice.
CHUNKER_VERSION = "2"


@dataclass(frozen=True, slots=True)
class ChunkConfig:
    """Chunk size budget; defaults ~350 tokens, 15% overlap."""

    max_tokens: int = 350
    overlap: float = 0.15
    min_tokens: int = 40
    #: Tables whose header line satisfies this are cut one row per piece, the
    #: header repeated (register maps, pin tables: a query finds the row).
    row_tables: Callable[[str], bool] | None = None

    def __post_init__(self) -> None:
        if self.max_tokens < 1:
            raise ConfigError(f"max_tokens must be at least 1, got {self.max_tokens}")
        if not 0.0 <= self.overlap < 0.5:
            raise ConfigError(f"overlap must be in [0, 0.5), got {self.overlap}")
        if self.min_tokens < 0:
            raise ConfigError(f"min_tokens must not be negative, got {self.min_tokens}")


def _token_weight(m: re.Match[str]) -> int:
    if m.group(1):
        return 7
    if m.group(2):
        return max(13, (len(m.group(2)) * 5 + 1) // 2)
    return 5


@dataclass(frozen=True, slots=True)
class _Unit:
    """A whole slice or one piece of a long slice, ready to be packed."""

    text: str
    line_start: int
    line_end: int
    kind: str
    weight: int
    language: str | None = None
    links: tuple[Link, ...] = ()


def chunk_slices(slices: Sequence[Slice], config: ChunkConfig | None = None) -> list[Chunk]:
    """Turn a document's slices (in document order) into chunks."""
    cfg = config or ChunkConfig()
    chunks: list[Chunk] = []
    for section in _sections(slices):
        chunks.extend(_chunk_section(section, cfg))
    return chunks


def _sections(slices: Sequence[Slice]) -> Iterator[list[Slice]]:
    """Sections to chunk: :func:`_runs`, with heading-only stubs glued forward.

    A run that holds only headings ("## Verify" followed directly by
    "### Linux") is not a passage of its own: it is put in front of the next
    run when that run is a subsection of it on the same page, so the chunk
    starts at the stub's heading line and says what it introduces. The chunk
    takes the subsection's heading path, which begins with the stub's.
    """
    stub: list[Slice] = []
    for run in _runs(slices):
        if stub and not _introduces(stub[-1], run[0]):
            yield stub
            stub = []
        if all(_is_heading(sl) for sl in run):
            stub.extend(run)
            continue
        yield stub + run if stub else run
        stub = []
    if stub:
        yield stub


def started_sections(text: str, heading_path: tuple[str, ...]) -> int:
    """How many sections the chunk starts: 1, or more for a glued heading-only section.

    The chunker glues a section that holds only its heading to the subsection it
    introduces; that chunk's path is the subsection's and its text begins with
    the heading lines of every section it starts, one paragraph each
    ("Setup\n\nLinux\n\n…" under ``(…, "Setup", "Linux")`` starts 2).
    """
    n = len(heading_path)
    if n < 2:
        return 1
    cut = text.find("\n")
    first = (text if cut < 0 else text[:cut]).strip()
    if first == heading_path[-1] or first not in heading_path[:-1]:
        return 1
    j = n - 2
    while heading_path[j] != first:
        j -= 1
    lead = [p.strip() for p in text.split("\n\n", n - j)[: n - j]]
    return n - j if lead == list(heading_path[j:]) else 1


def _runs(slices: Sequence[Slice]) -> Iterator[list[Slice]]:
    """Runs of consecutive non-blank slices sharing heading path and page."""
    run: list[Slice] = []
    for sl in slices:
        if not sl.text.strip():
            continue
        if run and (sl.heading_path, sl.page) != (run[0].heading_path, run[0].page):
            yield run
            run = []
        run.append(sl)
    if run:
        yield run


def _is_heading(sl: Slice) -> bool:
    """A heading slice: the parsers emit a heading as text equal to its path's end."""
    return sl.kind == "text" and bool(sl.heading_path) and sl.text.strip() == sl.heading_path[-1]


def _introduces(heading: Slice, nxt: Slice) -> bool:
    """Whether ``nxt`` lies in a subsection of ``heading``'s section, on the same page."""
    n = len(heading.heading_path)
    return (
        nxt.page == heading.page
        and len(nxt.heading_path) > n
        and nxt.heading_path[:n] == heading.heading_path
    )


def _chunk_section(section: list[Slice], cfg: ChunkConfig) -> list[Chunk]:
    budget = cfg.max_tokens * 10
    # the last slice's path: a glued heading stub's path is a prefix of it
    path, page = section[-1].heading_path, section[-1].page
    out: list[Chunk] = []
    pack: list[_Unit] = []
    used = 0
    for sl in section:
        units = [_whole(sl)]
        if sl.kind == "table" and cfg.row_tables and cfg.row_tables(units[0].text.split("\n")[0]):
            units = _split_table(sl, 0) or units
        elif units[0].weight > budget:
            lead = budget - used if pack and used < cfg.min_tokens * 10 else budget
            units = _split(sl, cfg, lead, units[0].weight)
        for k, unit in enumerate(units):
            # k > 0: pieces of one slice never share a chunk (they overlap)
            if pack and (k > 0 or used + unit.weight > budget):
                out.append(_make_chunk(pack, path, page))
                pack, used = [], 0
            pack.append(unit)
            used += unit.weight
    if pack:
        out.append(_make_chunk(pack, path, page))
    return out


def _whole(sl: Slice) -> _Unit:
    text = sl.text.strip("\n")
    return _Unit(text, sl.line_start, sl.line_end, sl.kind, _weight(text), sl.language, sl.links)


def _make_chunk(units: list[_Unit], path: tuple[str, ...], page: int | None) -> Chunk:
    if len(units) == 1:  # the common case, without the set and dict work below
        u = units[0]
        code = u.kind == "code"
        return Chunk(
            text=u.text,
            line_start=u.line_start,
            line_end=u.line_end,
            heading_path=path,
            kind=u.kind,
            has_code=code,
            has_table=u.kind == "table",
            language=u.language if code and u.language else None,
            page=page,
            links=tuple(dict.fromkeys(u.links)) if u.links else (),
        )
    kinds = {u.kind for u in units}
    languages = {u.language for u in units if u.kind == "code" and u.language}
    links = tuple(dict.fromkeys(link for u in units for link in u.links))
    return Chunk(
        text="\n\n".join(u.text for u in units),
        line_start=min(u.line_start for u in units),
        line_end=max(u.line_end for u in units),
        heading_path=path,
        kind=_dominant_kind(units),
        has_code="code" in kinds,
        has_table="table" in kinds,
        language=languages.pop() if len(languages) == 1 else None,
        page=page,
        links=links,
    )


def _dominant_kind(units: list[_Unit]) -> str:
    """The kind holding most of the text, or "mixed" when none clearly does."""
    sizes: dict[str, int] = {}
    for u in units:
        sizes[u.kind] = sizes.get(u.kind, 0) + len(u.text)
    kind, size = max(sizes.items(), key=lambda item: item[1])
    total = sum(sizes.values())
    return kind if len(sizes) == 1 or size >= _DOMINANT_SHARE * total else "mixed"


# -- splitting one over-long slice -------------------------------------------

_Splitter = Callable[[str, int, int], list[int]]


def _split(sl: Slice, cfg: ChunkConfig, first_budget: int, whole_weight: int) -> list[_Unit]:
    """Cut an over-long slice into pieces of at most the budget (atoms excepted)."""
    budget = cfg.max_tokens * 10
    if sl.kind == "table":
        pieces = _split_table(sl, budget)
        if pieces:
            return pieces
    levels: tuple[_Splitter, ...]
    if sl.kind in ("code", "table"):
        levels = (_cuts(_LINE_BREAK),)
    elif sl.kind == "list":
        levels = (_cuts(_LINE_BREAK), _cuts(_SENTENCE_END))
    else:
        levels = (_cuts(_PARAGRAPH_BREAK), _cuts(_LINE_BREAK), _cuts(_SENTENCE_END))
    text = sl.text
    segments = _segments(text, 0, len(text), levels, budget, whole_weight)
    weights = [w for _, _, w in segments]
    overlap = int(budget * cfg.overlap)
    newlines = [m.start() for m in _LINE_BREAK.finditer(text)]
    units = []
    for first, last in _pack(weights, budget, first_budget, overlap):
        weight = sum(weights[first : last + 1])  # an upper bound of the piece's weight
        unit = _piece(sl, segments[first][0], segments[last][1], newlines, weight)
        if unit is not None:
            units.append(unit)
    return units


def _cuts(pattern: re.Pattern[str]) -> _Splitter:
    def cut(text: str, lo: int, hi: int) -> list[int]:
        return [m.end() for m in pattern.finditer(text, lo, hi) if lo < m.end() < hi]

    return cut


def _segments(
    text: str,
    lo: int,
    hi: int,
    levels: tuple[_Splitter, ...],
    budget: int,
    weight: int | None = None,
) -> list[tuple[int, int, int]]:
    """Partition ``text[lo:hi]`` into ``(start, end, weight)`` ranges within budget.

    Coarsest cuts first; a level that finds no cut passes the known weight on,
    so a huge unbroken line is weighed once, not once per level.
    """
    if weight is None:
        weight = _weight(text, lo, hi)
    if weight <= budget:
        return [(lo, hi, weight)]
    if not levels:
        return [(a, b, _weight(text, a, b)) for a, b in _hard_split(text, lo, hi, budget)]
    cuts = levels[0](text, lo, hi)
    if not cuts:
        return _segments(text, lo, hi, levels[1:], budget, weight)
    out: list[tuple[int, int, int]] = []
    for a, b in pairwise([lo, *cuts, hi]):
        out.extend(_segments(text, a, b, levels[1:], budget))
    return out


def _hard_split(text: str, lo: int, hi: int, budget: int) -> list[tuple[int, int]]:
    """Last resort: cut before the token that would overflow (words stay whole).

    A single word longer than the budget (a base64 blob, a minified line) is
    itself cut every ``budget / 2.5`` characters.
    """
    out: list[tuple[int, int]] = []
    start, used = lo, 0
    for m in _TOKEN.finditer(text, lo, hi):
        weight = _token_weight(m)
        if used + weight <= budget:
            used += weight
            continue
        if m.start() > start:
            out.append((start, m.start()))
        start, used = m.start(), weight
        if weight > budget and m.group(2):
            step = max(1, budget * 2 // 5)
            while m.end() - start > step:
                out.append((start, start + step))
                start += step
            used = _weight(text, start, m.end())
    if start < hi:
        out.append((start, hi))
    return out


def _pack(
    weights: list[int], budget: int, first_budget: int, overlap: int
) -> list[tuple[int, int]]:
    """Group consecutive segments into pieces; later pieces start with an overlap."""
    ranges: list[tuple[int, int]] = []
    limit = first_budget if weights and weights[0] <= first_budget else budget
    i = 0
    while i < len(weights):
        start, used = i, 0
        if ranges:
            prev_start = ranges[-1][0]
            while start - 1 > prev_start and used + weights[start - 1] <= overlap:
                start -= 1
                used += weights[start]
            if used + weights[i] > limit:
                start, used = i, 0
        j = i
        while j < len(weights) and (j == i or used + weights[j] <= limit):
            used += weights[j]
            j += 1
        ranges.append((start, j - 1))
        i, limit = j, budget
    return ranges


def _piece(sl: Slice, lo: int, hi: int, newlines: list[int], weight: int) -> _Unit | None:
    """The slice text between two offsets without blank edges, with its exact line span."""
    text = sl.text
    first_char = lo
    while first_char < hi and text[first_char].isspace():
        first_char += 1
    while hi > first_char and text[hi - 1].isspace():
        hi -= 1
    if first_char == hi:
        return None
    # keep the first line's indentation (code, nested list items)
    lo = max(lo, text.rfind("\n", lo, first_char) + 1)
    body = text[lo:hi]
    first = min(sl.line_start + bisect.bisect_left(newlines, lo), sl.line_end)
    last = min(sl.line_start + bisect.bisect_left(newlines, hi - 1), sl.line_end)
    links = tuple(link for link in sl.links if link.text and link.text in body)
    return _Unit(body, first, last, sl.kind, weight, sl.language, links)


def _split_table(sl: Slice, budget: int) -> list[_Unit]:
    """Rows packed under a repeated header; empty when there are no body rows."""
    lines = sl.text.strip("\n").split("\n")
    head_n = 2 if len(lines) > 1 and _TABLE_SEP.match(lines[1]) else 1
    header, rows = lines[:head_n], lines[head_n:]
    if not rows:
        return []
    head_w = _weight("\n".join(header))
    weights = [_weight(row) for row in rows]
    # Row k is source line line_start + head_n + k when the slice keeps one text
    # line per source line; otherwise (an HTML table written on one line) rows
    # are placed inside the slice's span, never past it, never before it.
    row_starts = [min(sl.line_start + head_n + k, sl.line_end) for k in range(len(rows))]
    units: list[_Unit] = []
    row_budget = max(budget - head_w, 0)
    for first, last in _pack(weights, row_budget, row_budget, 0):
        body = "\n".join([*header, *rows[first : last + 1]])
        line_start = sl.line_start if first == 0 else row_starts[first]
        line_end = row_starts[last]
        links = tuple(link for link in sl.links if link.text and link.text in body)
        units.append(_Unit(body, line_start, line_end, "table", _weight(body), None, links))
    return units
