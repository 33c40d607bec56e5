"""DOCX parser: headings into the heading path, paragraphs, lists and tables.

The archive is inflated under zip-bomb limits with DTDs refused
(:func:`~clawkb.parsers.safety.verify_zip`) before python-docx opens it.
The body is walked in order (paragraphs and tables interleaved, which
python-docx's ``paragraphs``/``tables`` lists lose).

* Headings: paragraph styles ``Title``, ``Heading N`` (also localised names
  such as ``标题 1``) or an explicit outline level set the heading path.
* Tables become pipe tables with the first row as header, so the chunker
  repeats it in every piece; python-docx repeats a merged cell in every grid
  position it covers, which is the propagation we want.
* DOCX has no lines. "Line" numbers are block numbers: each paragraph and each
  table row counts one, in body order, so anchors still order and locate
  hits ("block 12-15"), and the document metadata says so
  (``line_unit: "block"``). The ``Title`` style is level 0, above ``Heading 1``.
"""

from __future__ import annotations

import io
import re
from pathlib import PurePath
from typing import TYPE_CHECKING, ClassVar

from clawkb.errors import FormatMismatchError, MissingDependencyError
from clawkb.parsers.safety import guard, verify_zip
from clawkb.parsers.sniff import expect_zip
from clawkb.types import Link, ParsedDocument, Slice

if TYPE_CHECKING:
    from docx.document import Document
    from docx.table import Table
    from docx.text.paragraph import Paragraph

_HEADING_STYLE = re.compile(r"^(?:heading|标题|titre|überschrift)\s*(\d)", re.I)
_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"


class DocxParser:
    """Parser for ``.docx`` files (needs ``clawkb[formats]``)."""

    name: ClassVar[str] = "docx"
    extensions: ClassVar[tuple[str, ...]] = (".docx", ".docm")
    mime_types: ClassVar[tuple[str, ...]] = (
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    )
    #: Parse in a forked worker under the per-file time limit: the XML work runs
    #: in C (lxml/zlib), which SIGALRM cannot interrupt, and a crash there must
    #: fail only this file.
    isolate: ClassVar[bool] = True
    requires: ClassVar[tuple[str, ...]] = ("docx", "lxml")
    extra: ClassVar[str] = "formats"

    def parse(self, data: bytes, path: str) -> ParsedDocument:
        expect_zip(data, path, "DOCX document")
        members = verify_zip(data, path)
        if "word/document.xml" not in members:
            real = "an XLSX workbook" if "xl/workbook.xml" in members else "a ZIP archive"
            raise FormatMismatchError(
                path, f"content is {real} without word/document.xml, not a DOCX document"
            )
        try:
            import docx
        except ImportError:  # pragma: no cover - depends on the installed extras
            raise MissingDependencyError("DOCX parsing", "formats") from None
        with guard(path, "DOCX document"):
            document = docx.Document(io.BytesIO(data))
            return _Builder(document, path).build()


class _Builder:
    def __init__(self, document: Document, path: str) -> None:
        self.document = document
        self.path = path
        self.stack: list[tuple[int, str]] = []
        self.slices: list[Slice] = []
        self.block = 0
        self.first_heading = ""

    @property
    def heading_path(self) -> tuple[str, ...]:
        return tuple(t for _, t in self.stack)

    def build(self) -> ParsedDocument:
        from docx.table import Table
        from docx.text.paragraph import Paragraph

        for el in self.document.element.body.iterchildren():
            if el.tag == f"{_W}p":
                self._paragraph(Paragraph(el, self.document))
            elif el.tag == f"{_W}tbl":
                self._table(Table(el, self.document))
        props = self.document.core_properties
        title = (props.title or "").strip() or self.first_heading or PurePath(self.path).stem
        metadata: dict[str, object] = {"line_unit": "block", "blocks": self.block}
        if props.author:
            metadata["author"] = props.author
        return ParsedDocument(tuple(self.slices), title, metadata)

    def _paragraph(self, para: Paragraph) -> None:
        self.block += 1
        text = " ".join(para.text.split())
        level = _heading_level(para)
        if level is not None:
            while self.stack and self.stack[-1][0] >= level:
                self.stack.pop()
            if text:
                self.stack.append((level, text))
                self.first_heading = self.first_heading or text
                self.slices.append(Slice(text, self.block, self.block, self.heading_path))
            return
        if not text:
            return
        style = (para.style.name if para.style is not None else "") or ""
        is_list = "list" in style.lower() or (
            para._p.pPr is not None and para._p.pPr.numPr is not None
        )
        kind = "list" if is_list else "text"
        if is_list:
            text = f"- {text}"
        links = tuple(
            Link(target=h.address, text=" ".join(h.text.split()))
            for h in getattr(para, "hyperlinks", [])
            if getattr(h, "address", None)
        )
        self.slices.append(
            Slice(text, self.block, self.block, self.heading_path, kind=kind, links=links)
        )

    def _table(self, table: Table) -> None:
        start = self.block + 1
        lines: list[str] = []
        width = 0
        for row in table.rows:
            self.block += 1
            cells = [" ".join(c.text.split()).replace("|", "\\|") for c in row.cells]
            if not any(cells):
                continue
            width = max(width, len(cells))
            lines.append("| " + " | ".join(cells) + " |")
            if len(lines) == 1:
                lines.append("|" + " --- |" * len(cells))
        if lines:
            self.slices.append(
                Slice(
                    "\n".join(lines), start, max(start, self.block), self.heading_path, kind="table"
                )
            )


def _heading_level(para: Paragraph) -> int | None:
    style = para.style
    name = (style.name or "") if style is not None else ""
    if name.lower() == "title":
        return 0  # the document title: Heading 1 sections nest under it
    m = _HEADING_STYLE.match(name) or _HEADING_STYLE.match(getattr(style, "style_id", "") or "")
    if m:
        return max(1, int(m.group(1)))
    ppr = para._p.pPr
    if ppr is not None:
        lvl = ppr.find(f"{_W}outlineLvl")
        if lvl is not None and (val := lvl.get(f"{_W}val", "")).isdigit() and int(val) < 9:
            return int(val) + 1
    return None
