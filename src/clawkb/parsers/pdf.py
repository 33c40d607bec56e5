"""PDF parser: pdfium for text and fonts, pdfplumber for ruled tables, Tesseract for scans.

Why this split (measured in ``bench/pdf_extract.py``, see ``docs/pdf.md``):
pdfium (C++) extracts text an order of magnitude faster than pdfminer-based
pdfplumber and reads CID/CJK fonts correctly, but has no table finder;
pdfplumber finds ruled tables well. So every page goes through pdfium, and
only pages that draw enough vector paths to hold a ruled table are handed to
pdfplumber.

What a slice looks like:

* ``page`` is 1-based; ``line_start``/``line_end`` count lines of the page
  text as clawkb extracted it (one line per visual line; a table is its
  Markdown rendering), so ``report.pdf:12-18 (p. 4)`` is exact and stable.
* Headings come from the PDF outline (bookmarks) when it has one, otherwise
  from font size (sizes clearly above the body size, largest = level 1) and
  weight (short bold lines at body size); they form the heading path, which
  carries over page breaks.
* Tables are ``kind="table"`` Markdown pipe tables (see :mod:`pdf_tables`).
* Running headers and footers (the same line at the page edge on most pages)
  are dropped.
* A page without a text layer but with images is OCR'd with Tesseract when
  installed; otherwise the document gets a "needs OCR" warning naming the
  pages, which the index report shows. Never silently empty.

Hostile input: a file without a ``%PDF`` header, an encrypted file that needs
a password, and a corrupt or truncated file each raise :class:`ParseError`
with the reason. The pipeline's per-file time limit runs this parser in a
worker process (``isolate = True``), so a PDF that hangs pdfium is killed.
"""

from __future__ import annotations

import io
from pathlib import PurePath
from types import ModuleType
from typing import TYPE_CHECKING, ClassVar

from clawkb.errors import MissingDependencyError, ParseError
from clawkb.parsers import pdf_ocr
from clawkb.parsers.limits import time_left
from clawkb.parsers.pdf_layout import (
    HeadingScale,
    Line,
    body_size,
    cover_title,
    page_lines,
    running_lines,
)
from clawkb.parsers.pdf_outline import OutlineHeadings
from clawkb.parsers.pdf_page import (
    DocState,
    PageInfo,
    PageWriter,
    beside_tables,
    in_margins,
    table_positions,
)
from clawkb.parsers.pdf_quiet import library_log
from clawkb.parsers.pdf_tables import Table, find_tables
from clawkb.types import ParsedDocument

if TYPE_CHECKING:
    from pdfplumber.pdf import PDF
    from pypdfium2 import PdfDocument, PdfPage

_FPDF_ERR_PASSWORD = 4
#: OCR of a page is skipped (page reported as needing OCR) with less time left than this.
OCR_RESERVE_S = 15.0
_TEXT, _PATH, _IMAGE = 1, 2, 3  # pdfium page-object types
#: Share of private-use / replacement characters that marks a garbled text layer.
_GARBLED_SHARE = 0.3
#: Metadata values that producers write when they know nothing.
_PLACEHOLDERS = frozenset({"", "anonymous", "unspecified", "untitled", "unknown", "none"})


class PdfParser:
    """Parser for ``.pdf`` files (needs the ``pdf`` extra)."""

    name: ClassVar[str] = "pdf"

    #: 2: continued tables keep their header, stray cells are no headings;
    #: 3: spaced-out page numbers in running footers, footers in the page edge
    #: and sentences ending in "。" no longer make headings (see parsers/base.py)
    version: ClassVar[str] = "3"
    extensions: ClassVar[tuple[str, ...]] = (".pdf",)
    mime_types: ClassVar[tuple[str, ...]] = ("application/pdf",)
    #: Run in a worker process under the per-file time limit (C code can hang).
    isolate: ClassVar[bool] = True
    #: Modules it needs and the extra that installs them (``clawkb parsers`` says so).
    requires: ClassVar[tuple[str, ...]] = ("pypdfium2", "pdfplumber")
    extra: ClassVar[str] = "pdf"

    @property
    def helpers(self) -> tuple[str, ...]:
        """Helpers the sandboxed worker needs: ``tesseract`` when OCR is usable.

        Read in the parent before the fork, which also caches Tesseract's
        language list there (the worker may not start programs)."""
        return ("tesseract",) if pdf_ocr.ocr_available() else ()

    def parse(self, data: bytes, path: str) -> ParsedDocument:
        pdfium = _require_pdfium()
        if b"%PDF-" not in data[:1024]:
            raise ParseError(path, "not a PDF file (no %PDF- header in the first 1 KB)")
        try:
            doc = pdfium.PdfDocument(data)
        except pdfium.PdfiumError as exc:
            if getattr(exc, "err_code", None) == _FPDF_ERR_PASSWORD:
                raise ParseError(path, "encrypted PDF, needs a password") from None
            raise ParseError(path, f"corrupt or truncated PDF ({exc})") from None
        try:
            return _Reader(doc, data, path).read()
        except pdfium.PdfiumError as exc:  # a page that cannot be loaded
            raise ParseError(path, f"corrupt PDF ({exc})") from None
        finally:
            doc.close()


def _require_pdfium() -> ModuleType:
    try:
        import pypdfium2
    except ImportError as exc:
        raise MissingDependencyError("PDF parsing", "pdf") from exc
    return pypdfium2


class _Reader:
    """One document: a first pass over pages (lines, objects, OCR), then the writers."""

    def __init__(self, doc: PdfDocument, data: bytes, path: str) -> None:
        self.doc = doc
        self.data = data
        self.path = path
        self.state = DocState()
        self._plumber: PDF | None = None
        self._plumber_failed = False
        self.cover_title: str | None = None

    def read(self) -> ParsedDocument:
        with library_log(self.path):
            pages = [self._first_pass(i) for i in range(len(self.doc))]
            all_lines = [p.lines for p in pages]
            outline = OutlineHeadings.from_document(self.doc, all_lines)
            drop = running_lines(all_lines, [p.height for p in pages])
            kept = [
                [ln for i, ln in enumerate(page.lines) if (index, i) not in drop]
                for index, page in enumerate(pages)
            ]
            tables = [
                table_positions(lines, page, self.tables, index)
                for index, (page, lines) in enumerate(zip(pages, kept, strict=True))
            ]
            # Font statistics leave table cells out: a long register table set in
            # small type must not make the prose look like headings.
            # So do lines that stray out of a table's box (beside_tables).
            cells = [
                set(where) | (beside_tables(lines, page.height, where) if where else set())
                for page, lines, where in zip(pages, kept, tables, strict=True)
            ]
            prose = [
                [ln for i, ln in enumerate(lines) if i not in skip]
                for lines, skip in zip(kept, cells, strict=True)
            ]
            # Nor, for the body size, do lines in the page's outer strips: a running
            # footer the furniture rule missed (a long file:// URL) is no prose.
            inner = [
                [ln for ln in lines if not in_margins(ln, page.height)]
                for page, lines in zip(pages, prose, strict=True)
            ]
            scale = HeadingScale(prose, body_size(inner))
            self.cover_title = cover_title(prose, scale.body)
            for index, page in enumerate(pages):
                PageWriter(
                    self.state, tables[index], index, page, kept[index], scale, outline
                ).write()
            self._close_plumber()
        return self._document(len(pages))

    def _first_pass(self, index: int) -> PageInfo:
        page = self.doc[index]
        try:
            textpage = page.get_textpage()
            try:
                lines = page_lines(textpage)
            finally:
                textpage.close()
            kinds = [obj.type for obj in page.get_objects(max_depth=2)]
            info = PageInfo(lines, page.get_height(), kinds.count(_PATH), kinds.count(_IMAGE))
            if (not lines or _garbled(lines)) and info.images:
                self._recognise(index, page, info, garbled=bool(lines))
            return info
        finally:
            page.close()

    def _recognise(self, index: int, page: PdfPage, info: PageInfo, garbled: bool) -> None:
        """OCR a page that has no usable text layer, or record that it needs OCR."""
        number = index + 1
        if not pdf_ocr.ocr_available():
            self.state.needs_ocr.append(number)
            return
        left = time_left()
        if left is not None and left < OCR_RESERVE_S:
            self.state.needs_ocr.append(number)
            if not self.state.ocr_skipped:
                self.state.warnings.append(
                    f"OCR stopped at page {number}: the file's parse time limit is nearly used up"
                    " (raise parse_timeout_s in config.yaml)"
                )
            self.state.ocr_skipped = True
            return
        try:
            text = pdf_ocr.ocr_page(page)
        except OSError as exc:
            self.state.warnings.append(f"page {number}: OCR failed ({exc})")
            self.state.needs_ocr.append(number)
            return
        if not text:
            self.state.warnings.append(f"page {number}: OCR found no text on the scanned page")
            return
        info.ocr_text = text
        if garbled:
            info.lines = []  # the OCR text replaces the unreadable text layer
        self.state.ocr_pages.append(number)

    def tables(self, index: int) -> list[Table]:
        """Ruled tables of a page via pdfplumber (opened once, on first need)."""
        if self._plumber_failed:
            return []
        try:
            if self._plumber is None:
                import pdfplumber

                self._plumber = pdfplumber.open(io.BytesIO(self.data))
            page = self._plumber.pages[index]
            try:
                return find_tables(page)
            finally:
                page.close()
        except ImportError as exc:
            raise MissingDependencyError("PDF table extraction", "pdf") from exc
        except Exception as exc:  # pdfminer can choke where pdfium coped: keep the text
            self._plumber_failed = True
            self.state.warnings.append(
                f"tables not extracted: pdfplumber could not read the file ({type(exc).__name__})"
            )
            return []

    def _close_plumber(self) -> None:
        if self._plumber is not None:
            self._plumber.close()

    def _document(self, n_pages: int) -> ParsedDocument:
        st = self.state
        warnings = list(st.warnings)
        if st.needs_ocr:
            warnings.insert(
                0,
                f"needs OCR: page(s) {_ranges(st.needs_ocr)} have no text layer; install "
                "tesseract with chi_sim/eng language data to index them",
            )
        meta = {
            k: v
            for k, v in self.doc.get_metadata_dict(skip_empty=True).items()
            if v.strip("() ").casefold() not in _PLACEHOLDERS
        }
        first_h1 = next((s.text for s in st.slices if len(s.heading_path) == 1), "")
        metadata: dict[str, object] = {"pages": n_pages}
        if st.ocr_pages:
            metadata["ocr_pages"] = st.ocr_pages
        if st.needs_ocr:
            metadata["needs_ocr_pages"] = st.needs_ocr
        for key in ("Author", "Subject", "Producer"):
            if meta.get(key):
                metadata[key.lower()] = meta[key]
        return ParsedDocument(
            slices=tuple(st.slices),
            title=meta.get("Title") or self.cover_title or first_h1 or PurePath(self.path).stem,
            metadata=metadata,
            warnings=tuple(warnings),
        )


def _garbled(lines: list[Line]) -> bool:
    """A text layer made mostly of private-use or replacement characters."""
    text = "".join(ln.text for ln in lines)
    bad = sum(1 for ch in text if "\ue000" <= ch <= "\uf8ff" or ch == "\ufffd")
    return bool(text) and bad / len(text) > _GARBLED_SHARE


def _ranges(pages: list[int]) -> str:
    """``[1, 2, 3, 7]`` -> ``"1-3, 7"``."""
    out: list[str] = []
    start = prev = pages[0]
    for p in [*pages[1:], None]:
        if p is not None and p == prev + 1:
            prev = p
            continue
        out.append(str(start) if start == prev else f"{start}-{prev}")
        if p is not None:
            start = prev = p
    return ", ".join(out)
