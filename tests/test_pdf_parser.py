"""PDF parser on real generated PDFs: outline headings, tables, OCR, hostile files."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

pytest.importorskip("pypdfium2")
pytest.importorskip("reportlab")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import pdf_samples
from clawkb import KnowledgeBase
from clawkb.errors import ParseError
from clawkb.ingest.chunker import ChunkConfig, chunk_slices
from clawkb.parsers.pdf import PdfParser
from clawkb.parsers.pdf_ocr import clean_ocr_text, tesseract_languages
from clawkb.parsers.registry import default_registry

HAVE_OCR = {"eng", "chi_sim"} <= set(tesseract_languages()) and pdf_samples.fonts_available()


def parse(data: bytes, name: str = "doc.pdf") -> object:
    return PdfParser().parse(data, name)


def test_pdf_parser_is_registered_through_the_entry_point() -> None:
    infos = {i.name: i for i in default_registry().all()}
    assert infos["pdf"].extensions == (".pdf",)
    assert infos["pdf"].origin == "built-in"
    assert default_registry().for_path("Manual.PDF") is not None


def test_outline_gives_the_heading_path_when_type_does_not() -> None:
    doc = PdfParser().parse(pdf_samples.outline_pdf(), "board.pdf")
    boot = next(s for s in doc.slices if "BOOT0" in s.text)
    assert boot.heading_path == ("Introduction", "Boot pins")
    assert boot.page == 2
    power = next(s for s in doc.slices if "VDD_CORE" in s.text)
    assert power.heading_path == ("Power tree",)
    assert doc.title == "Introduction"


def test_long_table_is_split_with_header_in_every_chunk() -> None:
    doc = PdfParser().parse(pdf_samples.long_table_pdf(rows=80), "regs.pdf")
    (table,) = [s for s in doc.slices if s.kind == "table"]
    assert table.text.count("\n") == 81  # header + separator + 80 rows
    assert table.heading_path == ("Register summary",)
    chunks = [c for c in chunk_slices(doc.slices, ChunkConfig(max_tokens=100)) if c.has_table]
    assert len(chunks) >= 3
    rows_seen = []
    for c in chunks:
        body = c.text[c.text.index("| Register |") :]
        assert body.startswith("| Register | Offset | Reset value |\n| --- | --- | --- |\n")
        rows_seen += [ln for ln in body.split("\n")[2:] if ln.startswith("| CTRL_REG")]
        assert c.page == 1 and c.line_start <= c.line_end
    assert {f"| CTRL_REG{i} |" for i in range(80)} <= {r.split(" 0x")[0] for r in rows_seen}


def test_cjk_text_without_mojibake_and_metadata_title() -> None:
    data = pdf_samples.text_pdf(
        [["寄存器 GPIOA_MODER 配置引脚模式", "复位值 0xA800_0000"]], title="引脚手册"
    )
    doc = PdfParser().parse(data, "zh.pdf")
    assert doc.title == "引脚手册"
    assert doc.slices[0].text == "寄存器 GPIOA_MODER 配置引脚模式\n复位值 0xA800_0000"


@pytest.mark.skipif(not HAVE_OCR, reason="tesseract with eng+chi_sim and CJK fonts not installed")
def test_scanned_page_is_ocred_and_searchable_with_its_page(tmp_path: Path) -> None:
    data = pdf_samples.scanned_pdf(
        ["Errata sheet ES0182", "USART wakeup fails", "停止模式唤醒电流"], "Cover page"
    )
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "errata.pdf").write_bytes(data)
    with KnowledgeBase.open(tmp_path / "kb", create=True) as kb:
        report = kb.index([tmp_path / "docs"])
        assert report.added == 1 and not report.warnings
        hit = kb.search("ES0182", limit=1).hits[0]
        assert hit.anchor.page == 2
        assert "Errata sheet" in hit.text
        zh = kb.search("唤醒电流", limit=1).hits[0]
        assert zh.anchor.page == 2 and "停止模式" in zh.text
        doc = kb.repo.document(str(tmp_path / "docs" / "errata.pdf"))
        assert doc is not None


def test_scanned_page_without_ocr_is_reported_not_silent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLAWKB_NO_OCR", "1")
    (tmp_path / "docs").mkdir()
    data = pdf_samples.scanned_pdf(["Scanned text"], "Cover page text")
    (tmp_path / "docs" / "scan.pdf").write_bytes(data)
    with KnowledgeBase.open(tmp_path / "kb", create=True) as kb:
        report = kb.index([tmp_path / "docs"])
    assert report.added == 1
    ((path, message),) = report.warnings
    assert path.endswith("scan.pdf")
    assert message.startswith("needs OCR: page(s) 2 have no text layer")
    assert report.to_dict()["warnings"][0]["message"] == message


def test_ocr_text_cleaning_joins_spaced_out_chinese() -> None:
    assert (
        clean_ocr_text("电 源 管 理 Power  mode\f\n\n\n下 一 行")
        == "电源管理 Power  mode\n\n下一行"
    )


@pytest.mark.parametrize(
    ("name", "make", "reason"),
    [
        (
            "locked.pdf",
            lambda: pdf_samples.text_pdf([["secret"]], encrypt="pw"),
            "encrypted PDF, needs a password",
        ),
        ("cut.pdf", lambda: pdf_samples.long_table_pdf()[:900], "corrupt or truncated PDF"),
        ("junk.pdf", lambda: b"%PDF-1.7\n" + bytes(range(256)) * 8, "corrupt or truncated PDF"),
        ("notes.pdf", lambda: b"# just markdown\n\nwith a .pdf name\n", "not a PDF file"),
        ("empty.pdf", lambda: b"", "not a PDF file"),
    ],
)
def test_hostile_pdfs_give_a_clear_error(name: str, make: object, reason: str) -> None:
    with pytest.raises(ParseError) as info:
        PdfParser().parse(make(), name)  # type: ignore[operator]
    assert info.value.path == name
    assert info.value.reason.startswith(reason)


def test_pdf_with_empty_user_password_still_parses() -> None:
    # owner-password-only files open without a password (permissions only)
    from reportlab.lib.pdfencrypt import StandardEncryption

    enc = pdf_samples.text_pdf(
        [["permissions only 权限"]], encrypt=StandardEncryption("", ownerPassword="owner")
    )
    assert b"/Encrypt" in enc
    doc = PdfParser().parse(enc, "perm.pdf")
    assert doc.slices[0].text == "permissions only 权限"


def test_bad_pdfs_fail_per_file_and_the_run_goes_on(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "locked.pdf").write_bytes(pdf_samples.text_pdf([["secret"]], encrypt="pw"))
    full = pdf_samples.long_table_pdf()
    (docs / "truncated.pdf").write_bytes(full[: len(full) // 3])
    (docs / "good.pdf").write_bytes(pdf_samples.text_pdf([["Boot ROM loads the SPL from eMMC"]]))
    (docs / "notes.md").write_text("# Notes\n\nSPL means secondary program loader.\n")
    with KnowledgeBase.open(tmp_path / "kb", create=True) as kb:
        report = kb.index([docs])
        errors = dict(report.errors)
        assert report.added == 2 and report.failed == 2
        assert errors[str(docs / "locked.pdf")] == "encrypted PDF, needs a password"
        assert errors[str(docs / "truncated.pdf")].startswith("corrupt or truncated PDF")
        hit = kb.search("SPL eMMC", limit=1).hits[0]
        assert hit.anchor.path.endswith("good.pdf") and hit.anchor.page == 1


def test_missing_tesseract_binary_means_needs_ocr(monkeypatch: pytest.MonkeyPatch) -> None:
    from clawkb.parsers import pdf_ocr

    monkeypatch.setattr(shutil, "which", lambda _name: None)
    pdf_ocr.tesseract_languages.cache_clear()
    try:
        doc = PdfParser().parse(pdf_samples.scanned_pdf(["x"]), "scan.pdf")
    finally:
        pdf_ocr.tesseract_languages.cache_clear()
    assert doc.slices == ()
    assert doc.metadata["needs_ocr_pages"] == [1]
    assert "needs OCR: page(s) 1" in doc.warnings[0]


@pytest.mark.skipif(not HAVE_OCR, reason="tesseract with eng+chi_sim and CJK fonts not installed")
def test_ocr_is_skipped_and_reported_when_the_time_limit_is_near() -> None:
    from clawkb.parsers.limits import call_with_alarm

    data = pdf_samples.scanned_pdf(["Scanned text"])
    doc = call_with_alarm(PdfParser().parse, (data, "s.pdf"), 10.0, "s.pdf")
    assert doc.metadata["needs_ocr_pages"] == [1]
    assert any(w.startswith("OCR stopped at page 1") for w in doc.warnings)
