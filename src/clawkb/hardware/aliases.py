"""Pin aliases: "red_led is pin 13" facts parsed from datasheets and board notes.

Aliases live in sections titled ``Pin Aliases``, ``Pin Alias``, ``Pins``,
``引脚别名`` or ``引脚`` (any heading level, sub-headings included; in plain
text files a line holding just such a title starts the section). Two forms:

* table rows ``| red_led | 13 | PA5 | notes |``: the header names the alias and
  pin columns in any order (``alias``/``name``/``别名``..., ``pin``/``gpio``/
  ``引脚``...), other columns are kept as extras; header and separator rows are
  skipped. A table without a recognisable header uses columns 1 and 2.
* lines ``red_led: 13``, ``red_led = 13`` (list markers allowed, ``：`` too);
  text after the pin is kept as a note.

A pin is a number or a port-style name (``13``, ``PA5``, ``GPIO13``, ``D13``,
``GP25``, ``P0.13``, ``PB_5``); anything else is not an alias, which keeps
prose in a ``Pins`` section from turning into garbage. Aliases are normalised
to lower case with blanks and dashes as ``_`` (``Red LED`` -> ``red_led``);
Chinese aliases stay as they are (``红色LED`` -> ``红色led``).
"""

from __future__ import annotations

import re
import unicodedata
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from clawkb.store.hardware_repo import FoundAlias as FoundAlias  # the row types
from clawkb.store.hardware_repo import PinAlias as PinAlias
from clawkb.types import Slice

SECTION_TITLES = frozenset({"pin aliases", "pin alias", "pins", "引脚别名", "引脚"})
_ALIAS_HEADERS = ("alias", "别名", "name", "名称", "名字", "signal", "信号", "label", "标签")
_PIN_HEADERS = ("pin", "引脚", "管脚", "gpio", "pad")
_PIN = re.compile(r"^(?:\d{1,3}|[a-z]{1,6}[_.]?\d{1,3}(?:[._]\d{1,2})?)$", re.I)
_SEPARATOR = re.compile(r"^\s*\|?\s*:?-{2,}:?\s*(?:\|\s*:?-{2,}:?\s*)*\|?\s*$")
_KV = re.compile(
    r"^\s*(?:[-*+]\s+|\d+[.)]\s+)?(?P<alias>[^:=：|#>][^:=：|]*?)\s*[:=：]\s*(?P<rest>\S.*)$"
)
_EMPTY = frozenset({"", "-", "—", "–", "n/a", "N/A", "/"})
_DECOR = re.compile(r"^[`*_~\"']+|[`*_~\"']+$")
_BLANKS = re.compile(r"[\s\-]+")
_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3040-\u30ff\uac00-\ud7af"
_ELEMENT = re.compile(rf"[{_CJK}]|[^\W_{_CJK}]+")


@dataclass(frozen=True, slots=True)
class Conflict:
    """The same alias bound to different pins on one board."""

    board: str
    alias: str
    aliases: tuple[PinAlias, ...]

    def describe(self) -> str:
        where = "; ".join(f"pin {a.pin} at {a.path}:{a.line}" for a in self.aliases)
        return f"{self.board or 'generic'}: alias {self.alias!r} has {len(self.aliases)} pins ({where})"


def normalize_alias(text: str) -> str:
    """``" Red LED "`` -> ``"red_led"``; markdown decoration is dropped."""
    text = _DECOR.sub("", unicodedata.normalize("NFKC", text).strip()).strip()
    return _BLANKS.sub("_", text.casefold()).strip("_")


def clean_pin(text: str) -> str:
    return _DECOR.sub("", unicodedata.normalize("NFKC", text).strip()).strip()


def is_pin(text: str) -> bool:
    return bool(_PIN.match(text))


def is_section_title(title: str) -> bool:
    t = unicodedata.normalize("NFKC", title).strip().strip("#:：").strip().casefold()
    return t in SECTION_TITLES


# -- parsing ------------------------------------------------------------------


def extract_aliases(slices: Sequence[Slice]) -> list[FoundAlias]:
    """Every alias in a parsed document, in document order."""
    found: list[FoundAlias] = []
    inline = False  # inside a section opened by a bare title line (plain text files)
    for sl in slices:
        lines = [(sl.line_start + i, ln) for i, ln in enumerate(sl.text.split("\n"))]
        if any(is_section_title(h) for h in sl.heading_path):
            found += parse_alias_lines(lines, sl.heading_path)
            continue
        start = next((k for k, (_, ln) in enumerate(lines) if is_section_title(ln)), None)
        if start is not None:
            inline = True
            lines = lines[start + 1 :]
        if inline:
            got = parse_alias_lines(lines, sl.heading_path)
            inline = bool(got) or (start is not None and not lines)
            found += got
    return found


def parse_alias_lines(
    lines: Sequence[tuple[int, str]], heading_path: tuple[str, ...] = ()
) -> list[FoundAlias]:
    """Aliases in the numbered lines of an alias section (tables and key/value lines)."""
    out: list[FoundAlias] = []
    table: list[tuple[int, str]] = []
    for number, line in [*lines, (0, "")]:
        if line.strip().startswith("|"):
            table.append((number, line))
            continue
        if table:
            out += _parse_table(table, heading_path)
            table = []
        item = _parse_kv(number, line, heading_path)
        if item is not None:
            out.append(item)
    return out


def table_cells(line: str) -> list[str]:
    body = line.strip()
    body = body[1:] if body.startswith("|") else body
    body = body[:-1] if body.endswith("|") else body
    return [c.strip() for c in body.split("|")]


def _column(headers: list[str], names: tuple[str, ...], skip: int = -1) -> int | None:
    for exact in (True, False):
        for name in names:
            for i, h in enumerate(headers):
                if i != skip and (h == name if exact else name in h):
                    return i
    return None


def table_columns(header_cells: Sequence[str]) -> tuple[int, int]:
    """(alias column, pin column) named by a table header; (0, 1) when it names neither."""
    headers = [normalize_alias(c).replace("_", " ") for c in header_cells]
    alias_col = _column(headers, _ALIAS_HEADERS)
    pin_col = _column(headers, _PIN_HEADERS, skip=-1 if alias_col is None else alias_col)
    if alias_col is None or pin_col is None:
        return 0, 1
    return alias_col, pin_col


def _parse_table(rows: list[tuple[int, str]], heading_path: tuple[str, ...]) -> list[FoundAlias]:
    cells = [(n, table_cells(r)) for n, r in rows if not _SEPARATOR.match(r)]
    if not cells:
        return []
    has_sep = len(rows) > 1 and bool(_SEPARATOR.match(rows[1][1]))
    alias_col, pin_col = table_columns(cells[0][1])
    first = cells[0][1]
    if has_sep or not (len(first) > pin_col and is_pin(clean_pin(first[pin_col]))):
        header_names, cells = cells[0][1], cells[1:]
    else:
        header_names = [f"column {i + 1}" for i in range(len(first))]
    out = []
    for number, row in cells:
        if len(row) <= max(alias_col, pin_col):
            continue
        alias, pin = normalize_alias(row[alias_col]), clean_pin(row[pin_col])
        if not alias or not is_pin(pin):
            continue
        extra = tuple(
            (normalize_alias(header_names[i]) if i < len(header_names) else f"column_{i + 1}", v)
            for i, v in enumerate(row)
            if i not in (alias_col, pin_col) and v.strip() not in _EMPTY
        )
        out.append(FoundAlias(alias, pin, number, heading_path, extra))
    return out


def _parse_kv(number: int, line: str, heading_path: tuple[str, ...]) -> FoundAlias | None:
    m = _KV.match(line)
    if not m:
        return None
    alias = normalize_alias(m.group("alias"))
    pin, _, note = m.group("rest").strip().partition(" ")
    pin = clean_pin(pin.rstrip(",;"))
    if not alias or len(alias) > 64 or not is_pin(pin):
        return None
    note = note.strip().lstrip("#/-—(").rstrip(")").strip()
    return FoundAlias(alias, pin, number, heading_path, (("note", note),) if note else ())


# -- conflicts and query matching --------------------------------------------


def find_conflicts(aliases: Iterable[PinAlias]) -> list[Conflict]:
    groups: dict[tuple[str, str], list[PinAlias]] = defaultdict(list)
    for a in aliases:
        groups[(a.board, a.alias)].append(a)
    return [
        Conflict(board, alias, tuple(group))
        for (board, alias), group in groups.items()
        if len({g.pin.casefold() for g in group}) > 1
    ]


def elements(text: str) -> list[str]:
    """Words and single CJK characters of ``text``, case-folded (``_`` separates)."""
    return _ELEMENT.findall(unicodedata.normalize("NFKC", text).casefold())


def match_aliases(query: str, aliases: Iterable[PinAlias]) -> list[tuple[PinAlias, str]]:
    """Aliases a query talks about, with how they matched: ``alias``, ``pin`` or ``extra``.

    An alias matches when every one of its words (or CJK characters) occurs in
    the query, so "Red LED", "red_led" and "turn on the red led" all find
    ``red_led`` and "打开红色LED" finds ``红色led``. A port-style pin named in
    the query (``PA5``) or an identifier-like extra (``I2C1_SCL``) also match.
    """
    q = set(elements(query))
    by_alias, by_other = [], []
    for a in aliases:
        words = elements(a.alias)
        if words and all(w in q for w in words):
            by_alias.append((a, "alias"))
        elif not a.pin.isdigit() and a.pin.casefold() in q:
            by_other.append((a, "pin"))
        elif any(_extra_matches(v, q) for v in a.extra.values()):
            by_other.append((a, "extra"))
    return by_alias + by_other


def _extra_matches(value: str, query_elements: set[str]) -> bool:
    words = elements(value)
    identifier = len(words) >= 2 or any(ch.isdigit() for ch in value)
    return (
        bool(words) and identifier and len(words) <= 4 and all(w in query_elements for w in words)
    )
