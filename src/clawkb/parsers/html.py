"""HTML parser: the DOM (lxml), not regexes, so exported wiki pages keep their shape.

What becomes a slice, walking the ``<body>`` in document order:

* ``h1``–``h6`` set the heading path (like Markdown ATX headings) and are
  emitted as small heading slices so a section with no body is findable;
* ``<pre>`` (with any ``<code>`` inside) is a ``code`` slice; the language
  comes from a ``language-x``/``lang-x`` class on the ``pre`` or its ``code``;
* ``<table>`` is a ``table`` slice in pipe-table form, header row first (the
  ``thead`` or ``th`` row, else the first row), so the chunker repeats the
  header in every piece of a long table;
* lists are ``list`` slices, one ``- item`` per line;
* any other block's inline text is a paragraph.

Page chrome is dropped: ``script``, ``style``, ``nav``, ``header``,
``footer``, ``aside``, forms, and elements marked ``hidden`` or
``role="navigation"`` — except a hidden tab panel (``role="tabpanel"``, or a
``tab-pane``/``tabpanel`` class: Docusaurus, sphinx-tabs, Bootstrap), whose
content is indexed like the visible tab's (``template`` never is). So is control text that documentation generators put
inside content (:func:`_strip_controls`, before the walk): buttons ("Copy to
clipboard"), inline elements marked ``aria-hidden="true"`` (icons, KaTeX's
visual copy of a formula), screen-reader helpers (``sr-only``,
``visually-hidden``), copy-button elements, and heading permalinks — Sphinx
and MkDocs ``a.headerlink`` (``¶``), Docusaurus ``a.hash-link``, VitePress
``a.header-anchor``, and any in-page link whose text is only a glyph such as
``#``, ``§``, ``¶`` or ``🔗`` (and "Skip to content" links). Heading paths and
snippets hold the words only.

Links are kept per slice and, de-duplicated, in the document metadata. Line
numbers are the element's source line (lxml's ``sourceline``) through the
last source line its content reaches (its last descendant's line, or its
text's newlines), never past the end of the file; a table written on one
source line spans that line.

Charset: a BOM, then ``<meta charset>`` / ``http-equiv`` in the first 4 KB,
then strict UTF-8, then clawkb's usual GB18030/CP1252 detection.
A DOCTYPE that declares entities is refused (entity expansion attacks).
"""

from __future__ import annotations

import codecs
import re
from pathlib import PurePath
from typing import TYPE_CHECKING, ClassVar

from clawkb.errors import MissingDependencyError
from clawkb.parsers.safety import guard, reject_dtd
from clawkb.parsers.sniff import decode_text_or_reject
from clawkb.text.decode import normalize_newlines
from clawkb.types import Link, ParsedDocument, Slice

if TYPE_CHECKING:
    from lxml.html import HtmlElement

_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.I)
_XML_DECL = re.compile(r"^\s*<\?xml[^>]*\?>", re.I)
_PROLOGUE_END = re.compile(r"<(?:html|head|body)\b", re.I)
_LANG_CLASS = re.compile(r"(?:^|\s)(?:language|lang|highlight-source|highlight)-([\w+#-]+)")
_SPACES = re.compile(r"[ \t\r\f\v\u00a0]+")
_INVISIBLE = re.compile("[\u200b\u200c\u200d\u2060\ufeff]")
#: Text of a permalink anchor: only these glyphs (and spaces / variation selectors).
_GLYPHS_ONLY = re.compile("[\\s#¶§🔗⚓∞\ufe0e\ufe0f\u200b\u200c\u200d\u2060\ufeff]*")
#: Trailing glyphs that are never part of a heading's words ("Options ¶").
_HEADING_TAIL = re.compile("[\\s¶🔗⚓\ufe0e\ufe0f]+$")
_TAB_PANEL_CLASS = re.compile(r"(?:[\w-]*-)?tab-?pane(?:l)?$|tabpanel$|sphinx-tabs-panel$", re.I)
_SKIP_LINK = re.compile(r"\s*skip to (?:main )?content\s*$", re.I)
#: Classes of permalink anchors, screen-reader helpers and copy buttons.
_CONTROL_CLASS = re.compile(
    r"^(?:headerlink|hash-link|header-anchor|heading-anchor|anchor-link|anchorjs-link"
    r"|permalink|sr-only|sr-only-focusable|visually-hidden|visually-hidden-focusable"
    r"|screen-reader-text|screenreader-only"
    r"|(?:[\w-]*-)?(?:copy|clipboard)(?:-?(?:btn|button|code|icon))?)$",
    re.I,
)
DROP = frozenset(
    [
        "script",
        "style",
        "nav",
        "header",
        "footer",
        "aside",
        "noscript",
        "template",
        "svg",
        "form",
        "iframe",
        "button",
        "select",
        "textarea",
        "object",
        "embed",
        "canvas",
        "map",
        "dialog",
    ]
)
HEADINGS = {f"h{n}": n for n in range(1, 7)}
BLOCKS = frozenset(
    [
        "address",
        "article",
        "blockquote",
        "body",
        "dd",
        "details",
        "div",
        "dl",
        "dt",
        "fieldset",
        "figcaption",
        "figure",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "hr",
        "li",
        "main",
        "ol",
        "p",
        "pre",
        "section",
        "summary",
        "table",
        "ul",
        "center",
    ]
)
MAX_LINKS = 500


class HtmlParser:
    """Parser for ``.html``, ``.htm`` and ``.xhtml`` files (needs ``clawkb[formats]``)."""

    name: ClassVar[str] = "html"

    #: spans stay inside the file, permalink glyphs dropped, code language from its wrappers (see parsers/base.py)

    version: ClassVar[str] = "2"
    extensions: ClassVar[tuple[str, ...]] = (".html", ".htm", ".xhtml")
    mime_types: ClassVar[tuple[str, ...]] = ("text/html", "application/xhtml+xml")
    #: Untrusted markup parsed by C code (lxml): a forked, sandboxed worker.
    isolate: ClassVar[bool] = True
    requires: ClassVar[tuple[str, ...]] = ("lxml",)
    extra: ClassVar[str] = "formats"

    def parse(self, data: bytes, path: str) -> ParsedDocument:
        text, encoding = decode_html(data, path)
        prologue = (
            text[: m.start()] if (m := _PROLOGUE_END.search(text, 0, 65536)) else text[:65536]
        )
        reject_dtd(prologue, path, "HTML document type")
        with guard(path, "HTML"):
            return _parse_html(text, path, encoding)


def decode_html(data: bytes, path: str) -> tuple[str, str]:
    """Bytes to text: BOM, declared charset, UTF-8, then the generic detector."""
    if not data.startswith((codecs.BOM_UTF8, codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        m = _META_CHARSET.search(data[:4096])
        if m is not None:
            try:
                name = codecs.lookup(m.group(1).decode("ascii")).name
            except LookupError:
                name = ""
            if name and not name.startswith("utf-16"):
                if name in ("gb2312", "gbk"):
                    name = "gb18030"  # a superset: pages declaring GB2312 often use GBK
                return normalize_newlines(data.decode(name, errors="replace")), name
    return decode_text_or_reject(data, path, "an HTML page")


def _parse_html(text: str, path: str, encoding: str) -> ParsedDocument:
    try:
        import lxml.html
        from lxml import etree
    except ImportError:  # pragma: no cover - depends on the installed extras
        raise MissingDependencyError("HTML parsing", "formats") from None
    text = _XML_DECL.sub("", text, count=1)
    if not text.strip():
        return ParsedDocument(slices=(), title=PurePath(path).stem, encoding=encoding)
    parser = lxml.html.HTMLParser(remove_comments=True, remove_pis=True, no_network=True)
    try:
        root = lxml.html.document_fromstring(text, parser=parser)
    except etree.ParserError:  # "Document is empty": only comments or whitespace
        return ParsedDocument(slices=(), title=PurePath(path).stem, encoding=encoding)
    _strip_controls(root)
    walker = _Walker(text.count("\n") + (0 if text.endswith("\n") else 1))
    body = root.find("body")
    walker.walk(body if body is not None else root)
    title_el = root.find(".//title")
    title = _clean(title_el.text_content()) if title_el is not None else ""
    metadata: dict[str, object] = {"links": walker.all_links[:MAX_LINKS]}
    desc = root.find(".//meta[@name='description']")
    if desc is not None and desc.get("content"):
        metadata["description"] = _clean(desc.get("content", ""))
    if root.get("lang"):
        metadata["lang"] = root.get("lang")
    return ParsedDocument(
        slices=tuple(walker.slices),
        title=title or walker.first_h1 or PurePath(path).stem,
        metadata=metadata,
        encoding=encoding,
    )


class _Walker:
    """Iterative document-order walk (no recursion: hostile pages nest deeply)."""

    def __init__(self, last_line: int) -> None:
        self.last_line = max(last_line, 1)  # the file's last line: no span goes past it
        self.slices: list[Slice] = []
        self.stack: list[tuple[int, str]] = []
        self.first_h1: str | None = None
        self.all_links: list[str] = []
        self._seen_links: set[str] = set()

    @property
    def path(self) -> tuple[str, ...]:
        return tuple(t for _, t in self.stack)

    def walk(self, top: HtmlElement) -> None:
        todo: list[tuple[HtmlElement | None, str | None, int]] = [(top, None, 0)]
        while todo:
            el, loose, line = todo.pop()
            if el is None:
                self._paragraph(loose or "", line, ())
                continue
            children = self._visit(el)
            if children is None:
                continue
            # loose text between child blocks: el.text, then each child's tail
            items: list[tuple[HtmlElement | None, str | None, int]] = []
            if el.text and el.text.strip():
                items.append((None, el.text, el.sourceline or 0))
            for child in children:
                items.append((child, None, 0))
                if child.tail and child.tail.strip():
                    items.append((None, child.tail, child.sourceline or 0))
            todo.extend(reversed(items))

    def _visit(self, el: HtmlElement) -> list[HtmlElement] | None:
        """Handle ``el``; return children to walk when it is a container of blocks."""
        tag = el.tag if isinstance(el.tag, str) else ""
        if not tag or tag in DROP or _hidden(el):
            return None
        line = el.sourceline or 1
        if tag in HEADINGS:
            self._heading(HEADINGS[tag], _heading_text(el), line, el)
        elif tag == "pre":
            self._code(el, line)
        elif tag == "table":
            self._table(el, line)
        elif tag in ("ul", "ol", "dl"):
            self._list(el, line)
        elif any(isinstance(c.tag, str) and c.tag in BLOCKS for c in el):
            return list(el)
        else:
            self._paragraph(el.text_content(), line, _links(el), el)
        return None

    def _span(self, line: int, last: int) -> tuple[int, int]:
        """A valid span: ``1 <= start <= end <= last line of the file``."""
        start = min(max(line, 1), self.last_line)
        return start, min(max(start, last), self.last_line)

    def _emit(
        self,
        text: str,
        line: int,
        raw: str,
        kind: str,
        el: HtmlElement | None = None,
        *,
        links: tuple[Link, ...] = (),
        language: str | None = None,
    ) -> None:
        if text.strip():
            end = line + raw.strip("\n").count("\n")
            if el is not None:
                end = max(end, _last_line(el, line))
            start, end = self._span(line, end)
            self.slices.append(
                Slice(text, start, end, self.path, kind=kind, language=language, links=links)
            )

    def _paragraph(
        self, raw: str, line: int, links: tuple[Link, ...], el: HtmlElement | None = None
    ) -> None:
        self._remember(links)
        self._emit(_clean(raw), max(line, 1), raw, "text", el, links=links)

    def _heading(self, level: int, text: str, line: int, el: HtmlElement) -> None:
        while self.stack and self.stack[-1][0] >= level:
            self.stack.pop()
        if not text:
            return
        self.stack.append((level, text))
        if level == 1 and self.first_h1 is None:
            self.first_h1 = text
        start, end = self._span(line, _last_line(el, line))
        self.slices.append(Slice(text, start, end, self.path, links=_links(el)))

    def _code(self, el: HtmlElement, line: int) -> None:
        raw = el.text_content().strip("\n")
        # Sphinx and MkDocs put the language on the wrapper: div.highlight-bash > div > pre
        parent = el.getparent()
        grand = parent.getparent() if parent is not None else None
        wrappers = [p.get("class") for p in (parent, grand) if p is not None and p.tag == "div"]
        classes = " ".join(
            filter(None, [el.get("class"), *(c.get("class") for c in el.iter("code")), *wrappers])
        )
        m = _LANG_CLASS.search(classes)
        language = m.group(1).lower() if m else None
        self._emit(raw, line, raw, "code", el, language=None if language == "default" else language)

    def _table(self, el: HtmlElement, line: int) -> None:
        rows = [r for r in el.iter("tr") if _nearest_table(r) is el]
        cells = [[_cell_text(c) for c in r if c.tag in ("td", "th")] for r in rows]
        cells = [c for c in cells if any(c)]
        if not cells:
            return
        width = max(len(c) for c in cells)
        lines = ["| " + " | ".join([*c, *[""] * (width - len(c))]) + " |" for c in cells]
        lines.insert(1, "|" + " --- |" * width)
        start, end = self._span(line, _last_line(el, line))
        links = _links(el)
        self._remember(links)
        self.slices.append(
            Slice("\n".join(lines), start, end, self.path, kind="table", links=links)
        )

    def _list(self, el: HtmlElement, line: int) -> None:
        items = [it for it in el.iter("li", "dt", "dd") if it.getparent() is el]
        body = "\n".join(
            f"- {_clean(it.text_content())}" for it in items if _clean(it.text_content())
        )
        links = _links(el)
        self._remember(links)
        if body:
            start, end = self._span(line, _last_line(el, line))
            self.slices.append(Slice(body, start, end, self.path, kind="list", links=links))

    def _remember(self, links: tuple[Link, ...]) -> None:
        for link in links:
            if link.target not in self._seen_links:
                self._seen_links.add(link.target)
                self.all_links.append(link.target)


def _links(el: HtmlElement) -> tuple[Link, ...]:
    out = []
    for a in el.iter("a"):
        href = (a.get("href") or "").strip()
        if href and not href.startswith(("javascript:", "#")):
            out.append(Link(target=href, text=_clean(a.text_content())))
    return tuple(dict.fromkeys(out))


def _last_line(el: HtmlElement, line: int) -> int:
    """The last source line ``el``'s content reaches: its last descendant's line
    plus the newlines in that descendant's text (lxml records start lines only)."""
    last = line
    for node in el.iter():
        if node is el:
            continue
        at = node.sourceline or 0
        if at >= last:
            last = at + (node.text or "").strip("\n").count("\n")
    return max(last, line)


def _strip_controls(root: HtmlElement) -> None:
    """Remove control text and permalink glyphs (see the module docstring); tails stay."""
    doomed = []
    for el in root.iter():
        tag = el.tag if isinstance(el.tag, str) else ""
        if not tag or tag in ("html", "body", "head"):
            continue
        if tag == "button" or _is_control(el, tag):
            doomed.append(el)
    for el in doomed:
        if el.getparent() is not None:
            el.drop_tree()  # keeps el.tail in place


def _is_control(el: HtmlElement, tag: str) -> bool:
    classes = (el.get("class") or "").split()
    if any(_CONTROL_CLASS.match(c) for c in classes):
        return True
    if el.get("aria-hidden") == "true" and tag not in BLOCKS:
        return True  # icons, KaTeX's visual copy; never a whole block
    if tag == "a" and (el.get("href") or "").startswith("#"):
        text = el.text_content()  # "#", "¶", "🔗", "" (permalinks), "Skip to content"
        return _GLYPHS_ONLY.fullmatch(text) is not None or _SKIP_LINK.match(text) is not None
    return False


def _heading_text(el: HtmlElement) -> str:
    return _HEADING_TAIL.sub("", _clean(el.text_content()))


def _hidden(el: HtmlElement) -> bool:
    """Chrome or hidden content; a hidden tab panel is content (one tab shows at a time)."""
    if el.get("hidden") is not None and not _tab_panel(el):
        return True
    return el.get("role") in ("navigation", "banner")


def _tab_panel(el: HtmlElement) -> bool:
    """A tab's panel (Docusaurus, sphinx-tabs, Bootstrap): ``role="tabpanel"`` or its class."""
    if el.get("role") == "tabpanel":
        return True
    return any(_TAB_PANEL_CLASS.match(c) for c in (el.get("class") or "").split())


def _nearest_table(el: HtmlElement) -> HtmlElement | None:
    parent = el.getparent()
    while parent is not None and parent.tag != "table":
        parent = parent.getparent()
    return parent


def _cell_text(cell: HtmlElement) -> str:
    return _clean(cell.text_content()).replace("|", "\\|")


def _clean(text: str) -> str:
    """Collapse whitespace to single spaces (HTML source line breaks are not content)."""
    return " ".join(_SPACES.sub(" ", _INVISIBLE.sub("", text)).split())
