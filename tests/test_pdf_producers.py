"""PDF fidelity across producers: one manual printed by Chromium, LibreOffice, XeTeX, reportlab.

Each committed PDF in tests/data/pdf_producers/ was made from the same content
by :mod:`pdf_producers` with the real tool. Every producer lays the 60-row
register table over two or more pages with its header row printed once; the
parser must repeat the real header on every continued piece, keep the chapter
heading (not the table caption) as the table's heading path, keep the prose
and its full-width punctuation, and keep the PDF libraries' log lines off the
terminal.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest

import pdf_producers as manual
from clawkb.parsers.pdf_layout import HeadingScale, Line, cover_title, running_lines
from clawkb.parsers.pdf_tables import cell_text
from clawkb.types import ParsedDocument

pytest.importorskip("pypdfium2")
pytest.importorskip("pdfplumber")

DATA = Path(__file__).parent / "data" / "pdf_producers"
FIXTURES = sorted(DATA.glob("*.pdf"))
CHAPTER = manual.CHAPTERS[-1][0]


def test_fixtures_cover_every_producer() -> None:
    assert {p.stem for p in FIXTURES} == set(manual.PRODUCERS)
    for path in FIXTURES:
        assert path.stat().st_size < 220_000, f"{path.name} is too large to commit"


@pytest.fixture(scope="module", params=FIXTURES, ids=lambda p: p.stem)
def doc(request: pytest.FixtureRequest) -> ParsedDocument:
    return manual.parse(request.param)


def test_continued_table_repeats_the_real_header(doc: ParsedDocument) -> None:
    seen = manual.table_rows(doc, pages=2)
    assert seen == [row[0] for row in manual.ROWS]  # every row once, in order


def test_table_heading_path_is_the_chapter(doc: ParsedDocument) -> None:
    for s in doc.slices:
        if s.kind == "table":
            assert manual.squash(s.heading_path[-1]) == manual.squash(CHAPTER), s.heading_path
        assert manual.squash(manual.CAPTION) not in map(
            manual.squash, s.heading_path
        )  # opens no section


def test_title_chapters_and_prose_survive(doc: ParsedDocument) -> None:
    if doc.metadata.get("producer", "").startswith("Skia"):  # Chromium: the HTML <title>
        assert doc.title == manual.HTML_TITLE
    else:  # the PDF's Title, or else the large type on the first page
        assert manual.squash(doc.title) == manual.squash(manual.TITLE)
    headings = {manual.squash(s.heading_path[-1]) for s in doc.slices if s.heading_path}
    assert {manual.squash(title) for title, _ in manual.CHAPTERS} <= headings
    text = "".join(manual.squash(s.text) for s in doc.slices if s.kind != "table")
    for _title, paragraphs in manual.CHAPTERS:
        for paragraph in paragraphs:
            assert manual.squash(paragraph) in text  # line breaks differ per producer, not the text
    assert "差分线阻抗：90欧姆" in text  # full-width colon kept as printed


def test_wrapped_cjk_cells_are_rejoined_without_a_space(doc: ParsedDocument) -> None:
    rows = "\n".join(s.text for s in doc.slices if s.kind == "table")
    for row in manual.ROWS:
        assert f"| {row[3]} |" in rows  # "控制寄存器（第 1 项）", never "控制寄存 器"


def test_page_furniture_is_dropped() -> None:
    chromium = manual.parse(DATA / "chromium.pdf")
    assert chromium.metadata["pages"] == 2
    text = "\n".join(s.text for s in chromium.slices)
    assert "file://" not in text  # Chromium's footer: URL and "1/2"
    assert f"M {manual.HTML_TITLE}" not in text  # its header: "12/1/26, 9:30 AM CKB-7 manual"


def test_library_log_lines_do_not_reach_the_terminal(
    caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    with caplog.at_level(logging.DEBUG, logger="clawkb.parsers.pdf"):
        manual.parse(DATA / "chromium.pdf")
    out, err = capfd.readouterr()
    assert "FontBBox" not in out + err
    kept = [r.getMessage() for r in caplog.records if r.name == "clawkb.parsers.pdf"]
    assert any("FontBBox" in m for m in kept), "the messages go to the log instead"
    assert all(r.levelno == logging.DEBUG for r in caplog.records if r.name.startswith("clawkb"))


def test_index_stderr_has_no_pdfplumber_warnings(tmp_path: Path) -> None:
    """A real `clawkb index` in a subprocess: stderr must not carry pdfminer's lines."""
    docs = tmp_path / "docs"
    docs.mkdir()
    for path in FIXTURES:
        (docs / path.name).write_bytes(path.read_bytes())
    kb = str(tmp_path / "kb")
    result = subprocess.run(
        [sys.executable, "-m", "clawkb.cli.main", "--kb", kb, "index", str(docs), "--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert "FontBBox" not in result.stderr and "pdfminer" not in result.stderr
    report = json.loads(result.stdout)
    assert report["failed"] == 0 and report["added"] == len(FIXTURES)


@pytest.mark.skipif(not manual.available("chromium"), reason="chromium is not installed")
def test_freshly_printed_chromium_pdf(tmp_path: Path) -> None:
    """The same checks on a PDF Chromium prints now (the committed one could go stale)."""
    doc = manual.parse(manual.produce("chromium", tmp_path))
    test_continued_table_repeats_the_real_header(doc)
    test_table_heading_path_is_the_chapter(doc)


# -- the rules behind the fixes, one by one ----------------------------------------


def _line(text: str, top: float, size: float = 10.0) -> Line:
    return Line(text, size, False, top, top - size, 72.0, top - size)


@pytest.mark.parametrize(
    ("text", "caption"),
    [
        ("表 3-1 寄存器列表", True),
        ("表3-1", True),
        ("Table 4.2: Pin functions", True),
        ("Figure 7 Block diagram", True),
        ("图 2", True),
        ("表", True),
        ("表：寄存器", True),
        ("表格说明", False),
        ("Table of contents", False),
        ("Tablet mode", False),
        ("3.2 Clock tree", False),
    ],
)
def test_captions_are_never_headings(text: str, caption: bool) -> None:
    scale = HeadingScale([[_line(text, 700, 14.0), _line("body " * 20, 600)]], 10.0)
    assert (scale.level(_line(text, 700, 14.0)) is None) is caption


def test_running_lines_of_a_two_page_file_and_bare_page_numbers() -> None:
    height = 842.0
    pages = [
        [_line("12/1/26, 9:30 AM Manual", 830), _line("Body one", 500), _line("1", 20)],
        [_line("12/1/26, 9:30 AM Manual", 830), _line("Body two", 500), _line("- 2 -", 20)],
    ]
    assert running_lines(pages, [height, height]) == {(0, 0), (0, 2), (1, 0), (1, 2)}
    single = [[_line("Page 1", 20), _line("Body", 500)]]
    assert running_lines(single, [height]) == set()  # one page: nothing recurs


def test_a_running_footer_whose_page_number_pdfium_spaced_out_is_still_furniture() -> None:
    """Chromium's footer on page 11 of 16 came out of pdfium as "1 1/16": with
    the spaces counted it matched no other page, stayed in, and its long URL
    in small type was taken for the body size."""
    url = "file:///home/me/manual.html"
    numbers = ["1/4", "2/4", "3/4", "1 1/4"]
    pages = [[_line("Body", 500), _line(f"{url} {n}", 20)] for n in numbers]
    assert running_lines(pages, [842.0] * 4) == {(p, 1) for p in range(4)}


def test_a_line_ending_in_a_chinese_full_stop_is_never_a_heading() -> None:
    sentence = _line("下表列出全部寄存器。", 700, 14.0)
    heading = _line("第三章 寄存器表", 750, 14.0)
    scale = HeadingScale([[heading, sentence, _line("body " * 20, 600)]], 10.0)
    assert scale.level(sentence) is None
    assert scale.level(heading) == 1
    alone = HeadingScale([[sentence, _line("body " * 20, 600)]], 10.0)
    assert alone.levels == {}  # nor does it make a heading level of its size


def test_cover_title_is_the_largest_type_on_page_one() -> None:
    first = [_line("CKB-7 控制器", 780, 24.0), _line("用户手册", 750, 24.0), _line("x" * 40, 600)]
    assert cover_title([first, [_line("y" * 40, 600)]], 10.0) == "CKB-7 控制器 用户手册"
    later_bigger = [[_line("Intro", 780, 14.0)], [_line("Big", 700, 20.0)]]
    assert cover_title(later_bigger, 10.0) is None
    assert cover_title([[_line("Body", 700)]], 10.0) is None


def test_wrapped_cell_text_is_rejoined() -> None:
    assert cell_text("UART 通道 0 控制寄存\n器（第 1 项）") == "UART 通道 0 控制寄存器（第 1 项）"
    assert cell_text("Reset\nvalue") == "Reset value"
    assert cell_text("状态寄存器\n（第 11 项）") == "状态寄存器（第 11 项）"
    assert cell_text(None) == ""
