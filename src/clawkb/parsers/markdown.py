"""Markdown parser: markdown-it-py's block parser, slices cut from the source lines.

Search needs blocks with exact line numbers and the heading path in force,
not HTML. markdown-it-py (CommonMark, plus GFM pipe tables and the
mdit-py-plugins front-matter rule) finds the blocks and gives each top-level
block token a ``map`` of source lines; this module walks those tokens once,
keeps the heading stack and cuts every slice's text from the original lines.
Inline parsing is switched off: slices keep the author's text, so emphasis
marks, inline code and list markers stay as written, and only links, images
and HTML comments are rewritten by :func:`clean_inline`.

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
* A list, a blockquote (markers removed) and a table are each one slice,
  whatever they hold. A table ends at its first line without a ``|`` (GFM
  would make that line a row; in notes it is the sentence after the table);
  only its line span is taken from markdown-it (see :func:`_table_span`).
* An HTML block keeps only its text: tags are removed line by line (entities
  decoded), so a block that is only tags (``<div class="os-tabs-src">``,
  ``</div>``, MDX's ``<Tabs>``) or a ``<script>``/``<style>`` block emits no
  slice, and a heading is never followed by a passage that is just a tag.
* Link reference definitions (``[id]: url``) stay text, as written.
* Links keep their visible text in the slice (``[text](url)`` -> ``text``,
  ``[[target|alias]]`` -> ``alias``) and are recorded in ``Slice.links``.
  Images are replaced by their alt text; HTML comments are removed.
* A ``---`` block at the very top that is closed by ``---``/``...`` is front
  matter even if its YAML is malformed: it is skipped with a warning rather
  than indexed as prose.
"""

from __future__ import annotations

import datetime as dt
import html
import re
from functools import lru_cache
from pathlib import PurePath
from typing import ClassVar

import yaml
from markdown_it import MarkdownIt
from markdown_it.rules_block import StateBlock
from markdown_it.rules_block import table as gfm_table
from markdown_it.token import Token
from mdit_py_plugins.front_matter import front_matter_plugin

from clawkb.text.decode import decode_source
from clawkb.types import JSONValue, Link, ParsedDocument, Slice

_QUOTE_MARKS = re.compile(r"^(?: {0,3}> ?)+")
_COMMENT = re.compile(r"<!--.*?-->", re.S)
_IMAGE = re.compile(r"!\[([^\[\]\n]*)\]\([^)\n]*\)")
_LINKS = re.compile(
    r"(?P<embed>!?)\[\[(?P<wiki>[^\[\]|\n]+)(?:\|(?P<alias>[^\[\]\n]*))?\]\]"
    r"|\[(?P<label>[^\[\]\n]*)\]\(\s*<?(?P<url>[^)\s>]+)>?(?:\s+[\"'(][^)\n]*)?\)"
    r"|<(?P<auto>(?:https?|ftp|mailto):[^>\s]+)>"
)
_TAG = re.compile(r"</?[A-Za-z][\w:.-]*(?:\s[^<>]*)?/?>|<!--.*?-->|<![^<>]*>|<\?.*?\?>", re.S)
_SCRIPT_BLOCK = re.compile(r"\s*<(?:script|style|textarea)\b", re.I)
_IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".gif", ".svg", ".webp", ".bmp")


class MarkdownParser:
    """Parser for ``.md``, ``.markdown`` and ``.mdx`` files."""

    name: ClassVar[str] = "markdown"

    #: HTML blocks keep only their text (see parsers/base.py)

    version: ClassVar[str] = "2"
    extensions: ClassVar[tuple[str, ...]] = (".md", ".markdown", ".mdx")
    mime_types: ClassVar[tuple[str, ...]] = ("text/markdown", "text/x-markdown")

    def parse(self, data: bytes, path: str) -> ParsedDocument:
        text, encoding = decode_source(data, path)
        return parse_markdown(text, path, encoding)


@lru_cache(maxsize=1)
def _block_parser() -> MarkdownIt:
    """CommonMark blocks + pipe tables + front matter; no inline pass (not needed)."""
    md = MarkdownIt("commonmark").disable("reference")
    md.block.ruler.at("table", _table_span, {"alt": ["paragraph", "reference"]})
    md.enable("table")
    md.core.ruler.disable(["inline", "text_join"])
    front_matter_plugin(md)
    return md


def _table_span(state: StateBlock, start: int, end: int, silent: bool) -> bool:
    """markdown-it's GFM table rule, reduced to the table's line span.

    The header and delimiter rows are checked by markdown-it's own rule (in
    validation mode); the body runs to a blank line, a line that starts another
    block, or a line without ``|`` (GFM would make that line a row; in notes it
    is the sentence after the table). One ``table_open`` token carries the
    span: the slice text comes from the source lines, so the per-cell tokens
    (most of the parse time of a table-heavy file) are never built.
    """
    if not gfm_table(state, start, end, True):
        return False
    if silent:
        return True
    terminators = state.md.block.ruler.getRules("blockquote")
    line = start + 2
    while line < end and state.sCount[line] >= state.blkIndent:
        text = state.src[state.bMarks[line] + state.tShift[line] : state.eMarks[line]]
        if not text.strip() or "|" not in text or state.is_code_block(line):
            break
        if any(rule(state, line, end, True) for rule in terminators):
            break
        line += 1
    state.push("table_open", "table", 1).map = [start, line]
    state.push("table_close", "table", -1)
    state.line = line
    return True


def parse_markdown(text: str, path: str, encoding: str | None = None) -> ParsedDocument:
    """Parse already-decoded markdown (newlines normalised to ``\\n``)."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    lines = text.split("\n")
    walker = _TokenWalker(lines)
    walker.walk(_block_parser().parse(text))
    title = _metadata_title(walker.metadata) or walker.first_h1 or PurePath(path).stem
    return ParsedDocument(
        slices=tuple(walker.slices),
        title=title,
        metadata=walker.metadata,
        encoding=encoding,
        warnings=tuple(walker.warnings),
    )


def read_front_matter(body: str) -> tuple[dict[str, JSONValue], list[str]]:
    """``(metadata, warnings)`` from the YAML between the front-matter fences."""
    try:
        data = yaml.safe_load(body)
    except yaml.YAMLError as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return {}, [f"front matter ignored: invalid YAML ({reason})"]
    if data is None:
        return {}, []
    if not isinstance(data, dict):
        return {}, ["front matter ignored: not a key/value mapping"]
    return {str(key): _plain(value) for key, value in data.items()}, []


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


class _TokenWalker:
    """Turns top-level block tokens into slices, tracking the heading stack."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        self.stack: list[tuple[int, str]] = []
        self.slices: list[Slice] = []
        self.first_h1: str | None = None
        self.metadata: dict[str, JSONValue] = {}
        self.warnings: list[str] = []
        self._list: tuple[int, int] | None = None  # span of the list being gathered

    @property
    def heading_path(self) -> tuple[str, ...]:
        return tuple(text for _, text in self.stack)

    def walk(self, tokens: list[Token]) -> None:
        for i, tok in enumerate(tokens):
            if tok.level != 0 or tok.map is None:
                continue  # closing tokens and everything inside a container
            first, end = tok.map
            kind = tok.type
            if kind in ("bullet_list_open", "ordered_list_open"):
                # CommonMark starts a new list when the marker changes ("-" then "1.");
                # to a reader it is one list, so adjacent lists are one slice.
                start = first if self._list is None else self._list[0]
                self._list = (start, end - 1)
                continue
            self._flush_list()
            if kind == "heading_open":
                self._heading(int(tok.tag[1]), tokens[i + 1].content, first, end - 1)
            elif kind == "paragraph_open":
                self._emit(first, end - 1, "text")
            elif kind == "html_block":
                if tok.content.lstrip().startswith("<!--") and "-->" not in tok.content:
                    break  # an unclosed comment hides the rest of the file
                self._html(first, end - 1, tok.content)
            elif kind == "table_open":
                self._emit(first, end - 1, "table")
            elif kind == "blockquote_open":
                self._quote(first, end - 1)
            elif kind == "fence":
                self._code(tok.content, first + 1, _language(tok.info))
            elif kind == "code_block":
                self._code(tok.content, first, None)
            elif kind == "front_matter":
                self.metadata, warnings = read_front_matter(tok.content)
                self.warnings.extend(warnings)
            # hr: a thematic break carries no text
        self._flush_list()

    def _flush_list(self) -> None:
        if self._list is not None:
            self._emit(*self._list, "list")
            self._list = None

    # -- emitting ---------------------------------------------------------

    def _trim(self, first: int, last: int) -> tuple[int, int]:
        """Drop blank lines at both ends of ``first..last`` (0-based, inclusive)."""
        while first <= last and not self.lines[first].strip():
            first += 1
        while last >= first and not self.lines[last].strip():
            last -= 1
        return first, last

    def _emit(self, first: int, last: int, kind: str, body: list[str] | None = None) -> None:
        """Emit lines ``first..last`` (0-based, inclusive) after inline cleaning."""
        if body is None:
            first, last = self._trim(first, last)
            body = self.lines[first : last + 1]
        text, links = clean_inline("\n".join(body))
        if text.strip():
            self.slices.append(
                Slice(text, first + 1, last + 1, self.heading_path, kind=kind, links=links)
            )

    def _html(self, first: int, last: int, content: str) -> None:
        """An HTML block: its text without the tags, one line per source line.

        Tag-only blocks (``<div class="os-tabs-src">``, ``</div>``, MDX's
        ``<Tabs>``) and script/style blocks emit nothing: a tag is not a passage.
        """
        if _SCRIPT_BLOCK.match(content):
            return
        body = _html_text("\n".join(self.lines[first : last + 1])).split("\n")
        lo, hi = 0, len(body)
        while lo < hi and not body[lo]:
            lo += 1
        while hi > lo and not body[hi - 1]:
            hi -= 1
        if lo < hi:
            self._emit(first + lo, first + hi - 1, "text", body[lo:hi])

    def _quote(self, first: int, last: int) -> None:
        first, last = self._trim(first, last)
        body = [_QUOTE_MARKS.sub("", line) for line in self.lines[first : last + 1]]
        self._emit(first, last, "text", body)

    def _code(self, content: str, first: int, language: str | None) -> None:
        """Emit code lines (no inline cleaning), trimming blank edge lines.

        ``first`` is the 0-based source line of the content's first line.
        """
        body = content.split("\n")
        if body and body[-1] == "":
            body.pop()  # the content ends with a newline
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


def _html_text(text: str) -> str:
    """An HTML block without its tags (a tag over several lines leaves its line
    breaks), entities decoded, each line's spaces collapsed."""
    text = _TAG.sub(lambda m: " " + "\n" * m.group().count("\n"), text)
    return "\n".join(" ".join(html.unescape(line).split()) for line in text.split("\n"))


def _language(info: str) -> str | None:
    """First word of a fence info string: ```` ```python title="x" ```` -> ``python``."""
    word = info.split()[0] if info.split() else ""
    word = word.strip("{}.").lower()
    return word or None


def _metadata_title(metadata: dict[str, JSONValue]) -> str | None:
    title = metadata.get("title")
    if isinstance(title, str | int | float) and str(title).strip():
        return str(title).strip()
    return None


def _plain(value: object) -> JSONValue:
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
