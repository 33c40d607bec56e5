"""Hostile and broken files: each fails alone with a reason, the run goes on."""

from __future__ import annotations

import io
import time
import zipfile
from pathlib import Path

import openpyxl
import pytest

from clawkb.errors import FormatMismatchError, ParseError, UnsafeFileError
from clawkb.kb import KnowledgeBase
from clawkb.parsers import spreadsheet
from clawkb.parsers.docx import DocxParser
from clawkb.parsers.html import HtmlParser
from clawkb.parsers.safety import ZipLimits, verify_zip
from clawkb.parsers.spreadsheet import CsvParser, XlsxParser
from clawkb.parsers.structured import MAX_DEPTH, JsonParser, YamlParser

PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(64)
LAUGHS = (
    '<?xml version="1.0"?>\n<!DOCTYPE lolz [\n <!ENTITY lol "lol">\n'
    + "".join(
        f' <!ENTITY lol{i} "{("&lol" + str(i - 1) + ";") * 10 if i > 1 else "&lol;" * 10}">\n'
        for i in range(1, 10)
    )
    + "]>\n"
)


def _xlsx_bytes(rows: int = 3) -> bytes:
    wb = openpyxl.Workbook()
    ws = wb.active
    ws.append(["Name", "Value"])
    for i in range(rows):
        ws.append([f"n{i}", i])
    buf = io.BytesIO()
    wb.save(buf)
    return buf.getvalue()


def _replace_member(data: bytes, name: str, content: bytes | None = None, zeros: int = 0) -> bytes:
    """Copy an OOXML archive, replacing one member (``zeros`` streams that many NUL bytes)."""
    out = io.BytesIO()
    with (
        zipfile.ZipFile(io.BytesIO(data)) as src,
        zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst,
    ):
        for info in src.infolist():
            if info.filename != name:
                dst.writestr(info, src.read(info))
        with dst.open(name, "w") as fh:
            if content is not None:
                fh.write(content)
            block = bytes(1 << 20)
            for _ in range(zeros >> 20):
                fh.write(block)
    return out.getvalue()


def _docx_bytes() -> bytes:
    import docx

    d = docx.Document()
    d.add_paragraph("hello")
    buf = io.BytesIO()
    d.save(buf)
    return buf.getvalue()


def test_zip_bomb_disguised_as_xlsx_and_docx() -> None:
    bomb = _replace_member(_xlsx_bytes(), "xl/worksheets/sheet1.xml", b"<x>", zeros=64 << 20)
    assert len(bomb) < 200_000
    t0 = time.perf_counter()
    with pytest.raises(UnsafeFileError, match=r"inflates \d+x .*zip bomb"):
        XlsxParser().parse(bomb, "bom.xlsx")
    assert time.perf_counter() - t0 < 5
    bomb = _replace_member(_docx_bytes(), "word/document.xml", b"<w>", zeros=64 << 20)
    with pytest.raises(UnsafeFileError, match="zip bomb"):
        DocxParser().parse(bomb, "note.docx")


def test_zip_size_and_member_limits() -> None:
    data = _xlsx_bytes(200)
    with pytest.raises(UnsafeFileError, match="in total"):
        verify_zip(data, "a.xlsx", ZipLimits(max_total_bytes=2000))
    with pytest.raises(UnsafeFileError, match="members"):
        verify_zip(data, "a.xlsx", ZipLimits(max_members=3))
    assert "xl/workbook.xml" in verify_zip(data, "a.xlsx")


def test_billion_laughs_everywhere() -> None:
    xml = (LAUGHS + "<root>&lol9;</root>").encode()
    with pytest.raises(UnsafeFileError, match="DTD"):
        DocxParser().parse(_replace_member(_docx_bytes(), "word/document.xml", xml), "lol.docx")
    with pytest.raises(UnsafeFileError, match="DTD"):
        XlsxParser().parse(_replace_member(_xlsx_bytes(), "xl/sharedStrings.xml", xml), "lol.xlsx")
    page = (LAUGHS.replace("lolz", "html") + "<html><body><p>&lol9;</p></body></html>").encode()
    with pytest.raises(UnsafeFileError, match="entities"):
        HtmlParser().parse(page, "lol.xhtml")
    anchors = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]\n" for i in range(8)
    )
    t0 = time.perf_counter()
    doc = YamlParser().parse(anchors.encode(), "lol.yaml")
    assert time.perf_counter() - t0 < 2
    assert sum(s.text.count("\n") + 1 for s in doc.slices) < 100  # aliases are references
    assert any("*same as" in s.text for s in doc.slices)


def test_deeply_nested_json_and_yaml() -> None:
    for depth in (MAX_DEPTH + 5, 200_000):
        with pytest.raises(UnsafeFileError, match="nested"):
            JsonParser().parse(b"[" * depth + b"]" * depth, "deep.json")
    with pytest.raises(UnsafeFileError, match="nested"):
        YamlParser().parse(b"[" * 50_000 + b"]" * 50_000, "deep.yaml")


def test_files_that_lie_about_their_extension() -> None:
    pdf = b"%PDF-1.7\n1 0 obj\n<<>>\nendobj\n"
    ole = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(512)
    cases = [
        (XlsxParser(), pdf, "a.xlsx", "content is a PDF document, not a XLSX"),
        (XlsxParser(), ole, "old.xlsx", "OLE2 compound file"),
        (XlsxParser(), _docx_bytes(), "doc.xlsx", "Word document"),
        (DocxParser(), _xlsx_bytes(), "sheet.docx", "XLSX workbook without word/document.xml"),
        (DocxParser(), b"just text", "t.docx", "content is text"),
        (HtmlParser(), PNG, "p.html", "content is a PNG image"),
        (CsvParser(), _xlsx_bytes(), "x.csv", r"ZIP archive, not a CSV file \(rename"),
        (JsonParser(), pdf, "x.json", "PDF document"),
    ]
    for parser, data, name, reason in cases:
        with pytest.raises(FormatMismatchError, match=reason):
            parser.parse(data, name)


def test_truncated_and_corrupt_office_files() -> None:
    data = _xlsx_bytes(50)
    for cut in (len(data) // 2, 40):
        with pytest.raises(ParseError):
            XlsxParser().parse(data[:cut], "cut.xlsx")
    broken = _replace_member(data, "xl/workbook.xml", b"<not-closed")
    with pytest.raises(ParseError, match="corrupt or unsupported XLSX"):
        XlsxParser().parse(broken, "broken.xlsx")


def _big_sheet_xlsx(rows: int) -> bytes:
    """A minimal valid XLSX written by hand (openpyxl's writer is slow for 100k rows)."""
    ns = 'xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"'
    rel = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
    body = io.StringIO()
    body.write(f'<?xml version="1.0"?><worksheet {ns}><dimension ref="A1:XFD1048576"/><sheetData>')
    body.write(
        '<row r="1"><c r="A1" t="inlineStr"><is><t>Part</t></is></c><c r="B1" t="inlineStr"><is><t>Qty</t></is></c></row>'
    )
    for r in range(2, rows + 2):
        body.write(
            f'<row r="{r}"><c r="A{r}" t="inlineStr"><is><t>PN{r}</t></is></c><c r="B{r}"><v>{r}</v></c></row>'
        )
    body.write("</sheetData></worksheet>")
    files = {
        "[Content_Types].xml": '<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
        '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
        '<Default Extension="xml" ContentType="application/xml"/>'
        '<Override PartName="/xl/workbook.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"/>'
        '<Override PartName="/xl/worksheets/sheet1.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml"/></Types>',
        "_rels/.rels": f'<?xml version="1.0"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
        f'<Relationship Id="rId1" Type="{rel}/officeDocument" Target="xl/workbook.xml"/></Relationships>',
        "xl/workbook.xml": f'<?xml version="1.0"?><workbook {ns} xmlns:r="{rel}"><sheets><sheet name="Big" sheetId="1" r:id="rId1"/></sheets></workbook>',
        "xl/_rels/workbook.xml.rels": f'<?xml version="1.0"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
        f'<Relationship Id="rId1" Type="{rel}/worksheet" Target="worksheets/sheet1.xml"/></Relationships>',
        "xl/worksheets/sheet1.xml": body.getvalue(),
    }
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for name, text in files.items():
            z.writestr(name, text)
    return out.getvalue()


def test_100k_row_sheet_parses_and_cell_limit_refuses(monkeypatch: pytest.MonkeyPatch) -> None:
    data = _big_sheet_xlsx(100_000)
    t0 = time.process_time()  # CPU time: a loaded machine must not fail this
    doc = XlsxParser().parse(data, "big.xlsx")
    assert time.process_time() - t0 < 60  # linear, not quadratic, in the rows
    tables = [s for s in doc.slices if s.kind == "table"]
    assert tables[0].heading_path == ("Big", "Big!A2:B" + str(tables[0].line_end))
    assert tables[-1].line_end == 100_001 and doc.metadata["sheets"][0]["rows"] == 100_001
    assert all(s.text.startswith("| Part | Qty |") for s in tables)
    monkeypatch.setattr(spreadsheet, "MAX_CELLS", 50_000)
    with pytest.raises(UnsafeFileError, match="more than 50,000 cells"):
        XlsxParser().parse(data, "big.xlsx")


def test_hostile_folder_run_goes_on(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "good.csv").write_text("Part,Qty\nLM1117,4\n", encoding="utf-8")
    (docs / "bomb.xlsx").write_bytes(
        _replace_member(_xlsx_bytes(), "xl/worksheets/sheet1.xml", b"<x>", zeros=64 << 20)
    )
    (docs / "lol.docx").write_bytes(
        _replace_member(_docx_bytes(), "word/document.xml", (LAUGHS + "<r>&lol9;</r>").encode())
    )
    (docs / "deep.json").write_bytes(b"[" * 100_000 + b"]" * 100_000)
    (docs / "liar.html").write_bytes(PNG)
    (docs / "cut.xlsx").write_bytes(_xlsx_bytes()[:300])
    with KnowledgeBase.open(tmp_path / "kb", create=True) as kb:
        # one long line without spaces is skipped as generated by default: include it
        report = kb.index([docs], include=["deep.json"])
        reasons = {Path(p).name: r for p, r in report.errors}
        assert report.added == 1 and report.failed == 5, reasons
        assert "zip bomb" in reasons["bomb.xlsx"]
        assert "DTD" in reasons["lol.docx"]
        assert "nested" in reasons["deep.json"]
        assert "PNG image" in reasons["liar.html"]
        assert "ZIP" in reasons["cut.xlsx"] or "corrupt" in reasons["cut.xlsx"]
        assert kb.search("LM1117").hits[0].anchor.path.endswith("good.csv")


def test_zlib_is_streamed_not_trusted() -> None:
    """The central directory may lie about sizes; verify_zip counts real bytes."""
    data = _replace_member(_xlsx_bytes(), "xl/worksheets/sheet1.xml", b"<x>", zeros=8 << 20)
    patched = bytearray(data)
    # claim a tiny uncompressed size in the central directory entry of the bomb member
    cd = data.rfind(b"PK\x01\x02", 0, data.rfind(b"xl/worksheets/sheet1.xml"))
    patched[cd + 24 : cd + 28] = (100).to_bytes(4, "little")
    with pytest.raises((UnsafeFileError, ParseError)):
        verify_zip(bytes(patched), "liar.xlsx", ZipLimits(max_member_bytes=1 << 20))
