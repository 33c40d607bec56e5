"""XLSX and CSV parsers: one document section per sheet, anchors ``Sheet!A12:F30``.

XLSX is read with openpyxl in read-only, values-only mode (cached formula
results, not formulas), after :func:`~clawkb.parsers.safety.verify_zip` has
inflated the archive under zip-bomb limits and refused any DTD. Read-only
mode does not expose merged cells, so their ranges are read from each
sheet's XML (``<mergeCell ref=...>``) with one regex pass. Sheet dimensions
are ignored (``reset_dimensions``): a hostile file claiming ``A1:XFD1048576``
would otherwise make every row 16k cells wide.

CSV/TSV: decoded like any text file (BOM, UTF-8, GB18030...), dialect sniffed
from the first 16 KB; row numbers are the file line where a record starts, so
anchors match what a spreadsheet program shows for ordinary files.

Both stop with :class:`~clawkb.errors.UnsafeFileError` past :data:`MAX_CELLS`
cells, and format values the same way (integral floats without ``.0``, dates
in ISO form). See :mod:`clawkb.parsers.sheet_table` for how rows become slices.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import re
from pathlib import PurePath
from types import ModuleType
from typing import TYPE_CHECKING, ClassVar

from clawkb.errors import FormatMismatchError, MissingDependencyError, UnsafeFileError
from clawkb.parsers.safety import guard, read_member, verify_zip
from clawkb.parsers.sheet_table import parse_range, propagate_merged, sheet_slices
from clawkb.parsers.sniff import decode_text_or_reject, expect_zip
from clawkb.types import ParsedDocument, Slice

if TYPE_CHECKING:
    from openpyxl.worksheet._read_only import ReadOnlyWorksheet

MAX_CELLS = 5_000_000
MAX_COLUMNS = 2000
_MERGE = re.compile(rb"<(?:\w+:)?mergeCell\b[^>]*?\bref=\"([A-Za-z$]+\d+(?::[A-Za-z$]+\d+)?)\"")


class XlsxParser:
    """Parser for ``.xlsx``/``.xlsm`` workbooks (needs ``clawkb[formats]``)."""

    name: ClassVar[str] = "xlsx"
    extensions: ClassVar[tuple[str, ...]] = (".xlsx", ".xlsm")
    mime_types: ClassVar[tuple[str, ...]] = (
        "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        "application/vnd.ms-excel.sheet.macroenabled.12",
    )
    #: Parse in a forked worker under the per-file time limit: the XML work runs
    #: in C (lxml/zlib), which SIGALRM cannot interrupt, and a crash there must
    #: fail only this file.
    isolate: ClassVar[bool] = True
    requires: ClassVar[tuple[str, ...]] = ("openpyxl",)
    extra: ClassVar[str] = "formats"

    def parse(self, data: bytes, path: str) -> ParsedDocument:
        expect_zip(data, path, "XLSX workbook")
        members = verify_zip(data, path)
        if "xl/workbook.xml" not in members:
            real = "a Word document (DOCX)" if "word/document.xml" in members else "a ZIP archive"
            raise FormatMismatchError(
                path, f"content is {real} without xl/workbook.xml, not an XLSX workbook"
            )
        try:
            import openpyxl
        except ImportError:  # pragma: no cover - depends on the installed extras
            raise MissingDependencyError("XLSX parsing", "formats") from None
        with guard(path, "XLSX workbook"):
            return _read_workbook(openpyxl, data, path)


def _read_workbook(openpyxl: ModuleType, data: bytes, path: str) -> ParsedDocument:
    wb = openpyxl.load_workbook(io.BytesIO(data), read_only=True, data_only=True)
    try:
        slices: list[Slice] = []
        sheets: list[dict[str, object]] = []
        cells = 0
        for ws in wb.worksheets:
            rows, cells = _sheet_rows(ws, path, cells)
            xml_path = getattr(ws, "_worksheet_path", None)
            xml = read_member(data, xml_path) if isinstance(xml_path, str) else None
            merged = [r for m in _MERGE.findall(xml or b"") if (r := parse_range(m.decode()))]
            propagate_merged(rows, merged, MAX_CELLS)
            sheet_sl, meta = sheet_slices(ws.title, rows)
            meta["merged_ranges"] = len(merged)
            slices.extend(sheet_sl)
            sheets.append(meta)
        title = (wb.properties.title or "").strip() if wb.properties else ""
    finally:
        wb.close()
    metadata = {"sheets": sheets}
    return ParsedDocument(tuple(slices), title or PurePath(path).stem, metadata)


def _sheet_rows(ws: ReadOnlyWorksheet, path: str, cells: int) -> tuple[dict[int, list[str]], int]:
    if hasattr(ws, "reset_dimensions"):
        ws.reset_dimensions()
    rows: dict[int, list[str]] = {}
    for number, values in enumerate(ws.iter_rows(values_only=True), start=1):
        if not values:
            continue
        cells += len(values)
        if cells > MAX_CELLS:
            raise UnsafeFileError(
                path, f"more than {MAX_CELLS:,} cells: refused (sheet {ws.title!r})"
            )
        row = [format_value(v) for v in values[:MAX_COLUMNS]]
        if any(row):
            rows[number] = row
    return rows, cells


def format_value(value: object) -> str:
    """One cell as display text: ``3.0`` -> ``3``, dates ISO, text on one line."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, float):
        if value.is_integer() and abs(value) < 1e15:
            return str(int(value))
        return repr(value)
    if isinstance(value, dt.datetime):
        return value.date().isoformat() if value.time() == dt.time() else value.isoformat(sep=" ")
    if isinstance(value, dt.date | dt.time):
        return value.isoformat()
    return " ".join(str(value).split()).replace("|", "\\|")


class CsvParser:
    """Parser for ``.csv`` and ``.tsv`` files."""

    name: ClassVar[str] = "csv"
    extensions: ClassVar[tuple[str, ...]] = (".csv", ".tsv")
    mime_types: ClassVar[tuple[str, ...]] = ("text/csv", "text/tab-separated-values")

    def parse(self, data: bytes, path: str) -> ParsedDocument:
        text, encoding = decode_text_or_reject(data, path, "a CSV file")
        sheet = PurePath(path).stem
        with guard(path, "CSV file"):
            rows = _csv_rows(text, path)
            slices, meta = sheet_slices(sheet, rows)
        return ParsedDocument(tuple(slices), sheet, {"sheets": [meta]}, encoding)


def _csv_rows(text: str, path: str) -> dict[int, list[str]]:
    dialect: type[csv.Dialect] | csv.Dialect
    if PurePath(path).suffix.lower() == ".tsv":
        dialect = csv.excel_tab
    else:
        try:
            dialect = csv.Sniffer().sniff(text[:16384], delimiters=",;\t|")
        except csv.Error:
            dialect = csv.excel
    reader = csv.reader(io.StringIO(text), dialect)
    rows: dict[int, list[str]] = {}
    cells = 0
    start = 1
    for record in reader:
        cells += len(record)
        if cells > MAX_CELLS:
            raise UnsafeFileError(path, f"more than {MAX_CELLS:,} cells: refused")
        row = [" ".join(v.split()).replace("|", "\\|") for v in record[:MAX_COLUMNS]]
        if any(row):
            rows[start] = row
        start = reader.line_num + 1
    return rows
