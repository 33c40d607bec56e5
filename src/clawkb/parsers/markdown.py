"""Markdown parser: a small line-based block scanner, no markdown library.

Search needs blocks with exact line numbers and the heading path in force,
not HTML, so this scanner walks lines once and recognises just the blocks that
matter: YAML front matter, ATX and setext headings, paragraphs, lists, GFM
pipe tables, fenced and indented code, blockquotes and HTML comments.

Choices worth knowing:

* Every slice's ``line_start``/``line_end`` are 1-based lines of the original
  file (front matter lines count). Text slices keep one text line per source
  line, so the chunker can compute exact spans for pieces of a long slice.
  Code slices span the lines *inside* the fence (the fence lines are not
  content).
* A heading is emitted as its own small ``text`` slice holding just the
  heading text, with a heading path that ends with itself. The chunker packs
  it with the section body that follows (same heading path), so chunks start
  at the heading line, and a heading with no body is still searchable.
* Links keep their visible text in the slice (``[text](url)`` -> ``text``,
  ``[[target|alias]]`` -> ``alias``) and are recorded in ``Slice.links``.
  Images are replaced by their alt text; HTML comments are removed.
* A ``---`` block at the very top that is closed by ``---``/``...`` is front
  matter even if its YAML is malformed: it is skipped with a warning rather
  than indexed as prose.
"""

from __future__ import annotations

import datetime as dt
import re
from pathlib import PurePath
from typing import Any, ClassVar

import yaml

from clawkb.ingest.decode import decode_source
from clawkb.types import Link, ParsedDocument, Slice

_FENCE_OPEN = re.compile(r"^( {0,3})(`{3,}|~{3,})(.*)$")
_FENCE_CLOSE = re.compile(r"^ {0,3}(`{3,}|~{3,})[ \t]*$")
_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*$")
_ATX_CLOSING = re.compile(r"(?:^|[ \t]+)#+$")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_THEMATIC = re.compile(r"^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$")
_LIST_ITEM = re.compile(r"^[ \t]*(?:[-*+]|\d{1,9}[.)])(?:[ \t]+|$)")
_TOP_LIST_ITEM = re.compile(r"^ {0,3}(?:[-*+]|\d{1,9}[.)])(?:[ \t]+|$)")
_INTERRUPTING_ITEM = re.compile(r"^ {0,3}(?:[-*+]|1[.)])[ \t]+\S")
_TABLE_SEP = re.compile(r"^ {0,3}\|?[ \t]*:?-+:?[ \t]*(?:\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*$")
_QUOTE = re.compile(r"^ {0,3}>")
_QUOTE_MARKS = re.compile(r"^(?: {0,3}> ?)+")
_INDENTED = re.compile(r"^(?: {4}|\t)")
_COMMENT = re.compile(r"<!--.*?-->", re.S)
_IMAGE = re.compile(r"!\[([^\[\]\n]*)\]\([^)\n]*\)")
_LINKS = re.compile(
    r"(?P<embed>!?)\[\[(?P<wiki>[^\[\]|\n]+)(?:\|(?P<alias>[^\[\]\n]*))?\]\]"
    r"|\[(?P<label>[^\[\]\n]*)\]\(\s*<?(?P<url>[^)\s>]+)>?(?:\s+[\"'(][^)\n]*)?\)"
    r"|<(?P<auto>(?:https?|ftp|mailto):[^>\s]+)>"
)
_IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".gif", ".svg", ".webp", ".bmp")


class MarkdownParser:
    """Parser for ``.md``, ``.markdown`` and ``.mdx`` files."""

    name: ClassVar[str] = "markdown"
    extensions: ClassVar[tuple[str, ...]] = (".md", ".markdown", ".mdx")
    mime_types: ClassVar[tuple[str, ...]] = ("text/markdown", "text/x-markdown")

    def parse(self, data: bytes, path: str) -> ParsedDocument:
        text, encoding = decode_source(data, path)
        return parse_markdown(text, path, encoding)


def parse_markdown(text: str, path: str, encoding: str | None = None) -> ParsedDocument:
    """Parse already-decoded markdown (newlines normalised to ``\\n``)."""
    lines = text.split("\n")
    metadata, body_start, warnings = read_front_matter(lines)
    scanner = _BlockScanner(lines)
    slices = scanner.scan(body_start)
    title = _metadata_title(metadata) or scanner.first_h1 or PurePath(path).stem
    return ParsedDocument(
        slices=tuple(slices),
        title=title,
        metadata=metadata,
        encoding=encoding,
        warnings=tuple(warnings),
    )


def read_front_matter(lines: list[str]) -> tuple[dict[str, Any], int, list[str]]:
    """Return ``(metadata, index of first body line, warnings)``."""
    if not lines or lines[0].rstrip() != "---":
        return {}, 0, []
    close = next((j for j in range(1, len(lines)) if lines[j].rstrip() in ("---", "...")), None)
    if close is None:
        return {}, 0, []  # an opening rule with no end is a thematic break, not metadata
    try:
        data = yaml.safe_load("\n".join(lines[1:close]))
    except yaml.YAMLError as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return {}, close + 1, [f"front matter ignored: invalid YAML ({reason})"]
    if data is None:
        return {}, close + 1, []
    if not isinstance(data, dict):
        return {}, close + 1, ["front matter ignored: not a key/value mapping"]
    return {str(key): _plain(value) for key, value in data.items()}, close + 1, []


def clean_inline(text: str) -> tuple[str, tuple[Link, ...]]:
    """Replace links by their visible text, drop images and comments, collect links.

    Newlines are preserved (a multi-line comment leaves its line breaks) so
    the text keeps one line per source line.
    """
    links: list[Link] = []
    text = _COMMENT.sub(lambda m: "\n" * m.group().count("\n"), text)

    def replace(m: re.Match[str]) -> str:
        if m.group("wiki"):
            target, alias = m.group("wiki").strip(), (m.group("alias") or "").strip()
            if m.group("embed") and target.lower().endswith(_IMAGE_SUFFIXES):
                return ""
            links.append(Link(target=target, text=alias or target, kind="wiki"))
            return alias or target
        if m.group("url"):
            links.append(Link(target=m.group("url"), text=m.group("label").strip(), kind="url"))
            return m.group("label")
        auto = m.group("auto")
        links.append(Link(target=auto, text=auto, kind="url"))
        return auto

    text = _IMAGE.sub(lambda m: m.group(1), text)  # first, so badges inside links work
    text = _LINKS.sub(replace, text)  # one pass keeps links in document order
    return text, tuple(links)


class _BlockScanner:
    """Walks the lines once, tracking the heading stack, emitting slices."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        self.stack: list[tuple[int, str]] = []
        self.slices: list[Slice] = []
        self.first_h1: str | None = None

    def scan(self, start: int) -> list[Slice]:
        handlers = (
            self._fenced_code,
            self._comment_block,
            self._atx_heading,
            self._thematic_break,
            self._table,
            self._list,
            self._blockquote,
            self._indented_code,
        )
        i = start
        while i < len(self.lines):
            if not self.lines[i].strip():
                i += 1
                continue
            for handler in handlers:
                after = handler(i)
                if after is not None:
                    i = after
                    break
            else:
                i = self._paragraph(i)
        return self.slices

    # -- emitting ---------------------------------------------------------

    @property
    def heading_path(self) -> tuple[str, ...]:
        return tuple(text for _, text in self.stack)

    def _emit(self, first: int, last: int, kind: str, body: list[str] | None = None) -> None:
        """Emit lines ``first..last`` (0-based, inclusive) after inline cleaning."""
        raw = "\n".join(self.lines[first : last + 1] if body is None else body)
        text, links = clean_inline(raw)
        if text.strip():
            self.slices.append(
                Slice(text, first + 1, last + 1, self.heading_path, kind=kind, links=links)
            )

    def _emit_code(self, body: list[str], first: int, language: str | None) -> None:
        """Emit code lines (no inline cleaning), trimming blank edge lines."""
        lo, hi = 0, len(body)
        while lo < hi and not body[lo].strip():
            lo += 1
        while hi > lo and not body[hi - 1].strip():
            hi -= 1
        if lo == hi:
            return
        self.slices.append(
            Slice(
                "\n".join(body[lo:hi]),
                first + lo + 1,
                first + hi,
                self.heading_path,
                kind="code",
                language=language,
            )
        )

    def _heading(self, level: int, raw: str, first: int, last: int) -> None:
        text, links = clean_inline(raw)
        text = " ".join(text.split())
        while self.stack and self.stack[-1][0] >= level:
            self.stack.pop()
        if not text:
            return
        self.stack.append((level, text))
        if level == 1 and self.first_h1 is None:
            self.first_h1 = text
        self.slices.append(Slice(text, first + 1, last + 1, self.heading_path, links=links))

    # -- block handlers: return the index after the block, or None -------

    def _fenced_code(self, i: int) -> int | None:
        m = _FENCE_OPEN.match(self.lines[i])
        if m is None:
            return None
        indent, fence, info = len(m.group(1)), m.group(2), m.group(3).strip()
        if fence[0] == "`" and "`" in info:
            return None  # inline code such as ```x``` is not a fence
        close = len(self.lines)
        for j in range(i + 1, len(self.lines)):
            c = _FENCE_CLOSE.match(self.lines[j])
            if c and c.group(1)[0] == fence[0] and len(c.group(1)) >= len(fence):
                close = j
                break
        body = [_dedent(line, indent) for line in self.lines[i + 1 : close]]
        self._emit_code(body, i + 1, _language(info))
        return close + 1

    def _comment_block(self, i: int) -> int | None:
        line = self.lines[i]
        if not line.lstrip().startswith("<!--"):
            return None
        start = line.index("<!--") + 4
        if "-->" in line[start:]:
            rest = line[line.index("-->", start) + 3 :]
            if rest.strip():
                return None  # text after the comment: let the paragraph keep it
            return i + 1
        for j in range(i + 1, len(self.lines)):
            if "-->" in self.lines[j]:
                return j + 1
        return len(self.lines)

    def _atx_heading(self, i: int) -> int | None:
        m = _ATX.match(self.lines[i])
        if m is None:
            return None
        content = _ATX_CLOSING.sub("", m.group(2) or "")
        self._heading(len(m.group(1)), content, i, i)
        return i + 1

    def _thematic_break(self, i: int) -> int | None:
        return i + 1 if _THEMATIC.match(self.lines[i]) else None

    def _table(self, i: int) -> int | None:
        if not self._is_table_start(i):
            return None
        j = i + 2
        while j < len(self.lines) and self.lines[j].strip() and "|" in self.lines[j]:
            j += 1
        self._emit(i, j - 1, "table")
        return j

    def _is_table_start(self, i: int) -> bool:
        if i + 1 >= len(self.lines) or "|" not in self.lines[i]:
            return False
        sep = self.lines[i + 1]
        return "|" in sep and _TABLE_SEP.match(sep) is not None

    def _list(self, i: int) -> int | None:
        if not _TOP_LIST_ITEM.match(self.lines[i]):
            return None
        last = i
        for j in range(i + 1, len(self.lines)):
            line = self.lines[j]
            if not line.strip():
                continue
            nested = bool(_LIST_ITEM.match(line)) or line.startswith(("  ", "\t"))
            if j > last + 1 and not nested:
                break  # a blank line ends the list unless an item or indent follows
            if not nested and self._starts_block(j):
                break
            last = j
        self._emit(i, last, "list")
        return last + 1

    def _blockquote(self, i: int) -> int | None:
        if not _QUOTE.match(self.lines[i]):
            return None
        j = i
        while j < len(self.lines) and self.lines[j].strip():
            if j > i and not _QUOTE.match(self.lines[j]) and self._starts_block(j):
                break
            j += 1
        body = [_QUOTE_MARKS.sub("", line) for line in self.lines[i:j]]
        self._emit(i, j - 1, "text", body)
        return j

    def _indented_code(self, i: int) -> int | None:
        if not _INDENTED.match(self.lines[i]):
            return None
        j = i
        while j < len(self.lines) and (not self.lines[j].strip() or _INDENTED.match(self.lines[j])):
            j += 1
        body = [_dedent(line, 4) for line in self.lines[i:j]]
        self._emit_code(body, i, None)
        return j

    def _paragraph(self, i: int) -> int:
        j = i + 1
        while j < len(self.lines) and self.lines[j].strip():
            m = _SETEXT.match(self.lines[j])
            if m:
                level = 1 if m.group(1)[0] == "=" else 2
                self._heading(level, " ".join(self.lines[i:j]), i, j)
                return j + 1
            if self._starts_block(j):
                break
            j += 1
        self._emit(i, j - 1, "text")
        return j

    def _starts_block(self, j: int) -> bool:
        """Whether line ``j`` interrupts a paragraph (CommonMark-like rules)."""
        line = self.lines[j]
        return bool(
            _FENCE_OPEN.match(line)
            or _ATX.match(line)
            or _THEMATIC.match(line)
            or _QUOTE.match(line)
            or _INTERRUPTING_ITEM.match(line)
            or line.lstrip().startswith("<!--")
            or self._is_table_start(j)
        )


def _dedent(line: str, width: int) -> str:
    """Remove up to ``width`` leading spaces (a tab counts as a full indent)."""
    if line.startswith("\t"):
        return line[1:]
    stripped = len(line) - len(line.lstrip(" "))
    return line[min(stripped, width) :]


def _language(info: str) -> str | None:
    """First word of a fence info string: ```` ```python title="x" ```` -> ``python``."""
    word = info.split()[0] if info.split() else ""
    word = word.strip("{}.").lower()
    return word or None


def _metadata_title(metadata: dict[str, Any]) -> str | None:
    title = metadata.get("title")
    if isinstance(title, str | int | float) and str(title).strip():
        return str(title).strip()
    return None


def _plain(value: Any) -> Any:
    """Make YAML values JSON-friendly (dates become ISO strings) for the store."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set):
        return [_plain(v) for v in value]
    if isinstance(value, dt.date | dt.datetime):
        return value.isoformat()
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)
