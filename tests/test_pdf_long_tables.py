"""A ruled register table over three or more pages, from several producers.

The 100-row variant of the manual in :mod:`pdf_producers`: every page's
table chunk must start with the real header row (whether the producer
printed it once or on every page), every row must appear once and in order,
and the chunks must sit under the chapter heading, never under a piece of a
table cell.

* Chromium prints the HTML now (with the header row as a plain first row and
  as ``<thead>``); skipped without chromium. Before the fix its running header
  came out of pdfium one glyph per line on pages 2+, was not recognised as
  page furniture, and the table continued on page 3 took its first data row
  as header.
* LibreOffice (``libreoffice-writer-nogui``, from the .docx): the PDF it made
  is committed in tests/data/pdf_long_tables/ (printing takes ~50 s, too long
  for every test run).
* XeTeX (``texlive-xetex``, xeCJK, a ruled ``longtable`` whose header is printed
  once): its PDF is committed too (texlive is ~340 MB, too much to install for
  every run); reportlab's platypus, which splits a table the same way, prints
  its PDF in the test and runs everywhere.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

import pdf_producers as manual
from clawkb.ingest.chunker import chunk_slices
from clawkb.parsers.pdf import PdfParser
from clawkb.parsers.pdf_layout import Line
from clawkb.types import ParsedDocument

pytest.importorskip("pypdfium2")
pytest.importorskip("pdfplumber")
pytest.importorskip("reportlab")

DATA = Path(__file__).parent / "data" / "pdf_long_tables"
HEADER_LINE = manual.HEADER_LINE
CHAPTER = "".join(manual.CHAPTERS[-1][0].split())
CELLS = {"".join(c.split()) for row in manual.LONG_ROWS for c in row} | set(manual.HEADER)


def check_long_table(doc: ParsedDocument) -> None:
    seen = manual.table_rows(doc, pages=3)
    for table in (s for s in doc.slices if s.kind == "table"):
        assert "".join(table.heading_path[-1].split()) == CHAPTER, table.heading_path
    assert seen == [row[0] for row in manual.LONG_ROWS]  # every row once, in order
    for s in doc.slices:  # no piece of a cell opens a section
        for heading in s.heading_path:
            key = "".join(heading.split())
            assert not any(key and key in cell for cell in CELLS), s.heading_path
    for chunk in chunk_slices(doc.slices):  # what is indexed: the header in every chunk
        if chunk.has_table:
            assert HEADER_LINE in chunk.text.split("\n")


@pytest.mark.skipif(not manual.available("chromium"), reason="chromium is not installed")
@pytest.mark.parametrize("thead", [False, True], ids=["first-row", "thead"])
def test_chromium_table_over_three_pages(tmp_path: Path, thead: bool) -> None:
    doc = manual.parse(manual.produce_long("chromium", tmp_path, thead))
    check_long_table(doc)
    text = "\n".join(s.text for s in doc.slices)
    assert "file://" not in text and manual.HTML_TITLE not in text  # furniture on every page


@pytest.mark.skipif(not manual.available("chromium"), reason="chromium is not installed")
@pytest.mark.parametrize("thead", [False, True], ids=["first-row", "thead"])
def test_chromium_table_under_a_bare_chapter(tmp_path: Path, thead: bool) -> None:
    """Only the title, the chapter heading and one short sentence above the table:
    the title's type carried the most prose characters and was taken for the
    body size, so no heading was found at all (every chunk without a section);
    with wrapped cells outside the table box, the sentence became a heading."""
    doc = manual.parse(manual.produce_long("chromium", tmp_path, thead, prose=False))
    check_long_table(doc)
    heads = [s.heading_path for s in doc.slices if s.heading_path and s.text == s.heading_path[-1]]
    assert ["".join(h[-1].split()) for h in heads] == ["".join(manual.TITLE.split()), CHAPTER]
    sentence = next(s for s in doc.slices if "".join(s.text.split()) == manual.SHORT_LEAD)
    assert sentence.kind == "text" and "".join(sentence.heading_path[-1].split()) == CHAPTER


@pytest.mark.skipif(not manual.available("chromium"), reason="chromium is not installed")
@pytest.mark.parametrize("thead", [False, True], ids=["first-row", "thead"])
def test_chromium_wrapped_cells_cut_at_page_breaks_never_head_a_section(
    tmp_path: Path, thead: bool
) -> None:
    """Description cells wrapped over several lines ("控制寄" / "存器"), rows cut
    by page breaks: the pieces of a cut row lie outside pdfplumber's table box.
    None of them, nor the sentence above the table, may open a section."""
    doc = manual.parse(manual.produce_long("chromium", tmp_path, thead, prose=False, narrow=True))
    title, chapter = "".join(manual.TITLE.split()), CHAPTER
    tables = [s for s in doc.slices if s.kind == "table"]
    assert len({s.page for s in tables}) >= 3
    for s in doc.slices:
        assert ["".join(h.split()) for h in s.heading_path] in ([title], [title, chapter]), (
            s.page,
            s.heading_path,
        )
    # the header row on every page's table, printed once or repeated from <thead>
    assert all(s.text.split("\n")[0] == HEADER_LINE for s in tables)


def _cut_rows_html(width: str = "4em") -> str:
    """A bare register page whose rows Chromium cuts at page breaks, so a row's
    upper lines end one page and its lower lines ("据寄存器" / "（第 9" / "项）")
    open the next, above that page's part of the table (header printed once).
    ``width``: the description column's; at 2em a cell wraps over many lines and
    several of them open the next page."""
    css = (
        f"body{{font-family:'{manual.CJK_FONT_NAME}',sans-serif;font-size:11pt;line-height:1.5}}"
        "table{border-collapse:collapse;font-size:9pt}"
        "td,th{border:1px solid #333;padding:1px 6px} th{font-weight:normal}"
        f"td:nth-child(4),th:nth-child(4){{width:{width}}}"
    )
    cells = "".join(
        "<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in manual.LONG_ROWS
    )
    head = "".join(f"<th>{c}</th>" for c in manual.HEADER)
    return (
        f"<!DOCTYPE html><html lang='zh'><head><meta charset='utf-8'><title>{manual.HTML_TITLE}"
        f"</title><style>{css}</style></head><body><h1>{manual.TITLE}</h1>"
        f"<h2>{manual.CHAPTERS[-1][0]}</h2><p>{manual.SHORT_LEAD}</p>"
        f"<table><tr>{head}</tr>{cells}</table></body></html>"
    )


def _print_cut_rows(tmp_path: Path, width: str) -> ParsedDocument:
    work = tmp_path / "print"
    work.mkdir()
    (work / "manual.html").write_text(_cut_rows_html(width), encoding="utf-8")
    out = tmp_path / "cut-rows.pdf"
    manual._print_chromium(work, out)
    return manual.parse(out)


def _outside_the_chapter(doc: ParsedDocument) -> list[list[str]]:
    title = "".join(manual.TITLE.split())
    paths = [["".join(h.split()) for h in s.heading_path] for s in doc.slices]
    return [p for p in paths if p not in ([title], [title, CHAPTER])]


@pytest.mark.skipif(not manual.available("chromium"), reason="chromium is not installed")
@pytest.mark.parametrize("width", ["4em", "2em"])
def test_chromium_row_pieces_above_a_page_s_table_do_not_stop_the_continuation(
    tmp_path: Path, width: str
) -> None:
    """At 2em a description cell wraps over many lines, and several pieces of a cut
    row open the next page: they chain to the table one by one (beside_tables)."""
    doc = _print_cut_rows(tmp_path, width)
    tables = [s for s in doc.slices if s.kind == "table"]
    assert len({s.page for s in tables}) >= 3
    assert [s.text.split("\n")[0] for s in tables] == [HEADER_LINE] * len(tables)
    if width == "4em":
        assert _outside_the_chapter(doc) == []


@pytest.mark.skipif(not manual.available("chromium"), reason="chromium is not installed")
def test_chromium_narrow_cells_leave_the_lead_sentence_a_sentence(tmp_path: Path) -> None:
    """Issue 22: the print footer of page 11 ("… 1 1/16", a spaced-out page
    number) escaped the furniture rule, its long URL in small type became the
    body size, and the sentence and the cut rows' first lines became headings."""
    doc = _print_cut_rows(tmp_path, "2em")
    assert _outside_the_chapter(doc) == []
    sentence = next(s for s in doc.slices if "".join(s.text.split()) == manual.SHORT_LEAD)
    assert sentence.kind == "text"
    assert not any("file://" in s.text for s in doc.slices)  # the footer on every page


def test_libreoffice_table_over_three_pages() -> None:
    check_long_table(manual.parse(DATA / "libreoffice-long.pdf"))


def test_xetex_table_over_three_pages() -> None:
    check_long_table(manual.parse(DATA / "xetex-long.pdf"))


def test_reportlab_table_over_three_pages(tmp_path: Path) -> None:
    check_long_table(manual.parse(manual.produce_long("reportlab", tmp_path)))


def _ruled_table(
    c: Any,
    xs: Sequence[float],
    top: float,
    rows: Sequence[Sequence[str]],
    size: float = 10.0,
    bold_header: bool = False,
) -> float:
    """Draw ``rows`` in a grid with column edges ``xs`` from ``top`` down; return its bottom."""
    row_h = 18
    for r, cells in enumerate(rows):
        c.setFont("Helvetica-Bold" if bold_header and r == 0 else "Helvetica", size)
        for x, cell in zip(xs, cells, strict=False):
            c.drawString(x + 4, top - r * row_h - 13, cell)
    bottom = top - len(rows) * row_h
    for r in range(len(rows) + 1):
        c.line(xs[0], top - r * row_h, xs[-1], top - r * row_h)
    for x in xs:
        c.line(x, top, x, bottom)
    return bottom


def _fragment_pdf() -> bytes:
    """One page: a chapter heading, prose, a ruled table, and the bold tail of a
    header cell that strayed just below the table's last rule (a row cut by a
    page break, a wrapped cell) — as body-size bold type it looks like a heading."""
    return _one_page_pdf(_draw_fragment)


def _one_page_pdf(draw: Callable[[Any, float], None]) -> bytes:
    """A one-page A4 PDF that ``draw(canvas, page height)`` fills."""
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    buf = io.BytesIO()
    c = canvas.Canvas(buf, pagesize=A4)
    draw(c, A4[1])
    c.showPage()
    c.save()
    return buf.getvalue()


def _draw_fragment(c: Any, height: float) -> None:
    c.setFont("Helvetica-Bold", 16)
    c.drawString(72, height - 72, "3 Register map")
    c.setFont("Helvetica", 10.5)
    for k in range(6):
        c.drawString(
            72, height - 100 - 14 * k, f"Body line {k} of the chapter text, in the body size."
        )
    xs = [72, 160, 260, 360, 520]
    rows = [("Address", "Name", "Reset", "Description")] + [
        (f"0x4000{4 * k:04X}", f"REG{k}", "0x0", f"Register {k}") for k in range(5)
    ]
    bottom = _ruled_table(c, xs, height - 200, rows, size=10.5, bold_header=True)
    c.setFont("Helvetica-Bold", 10.5)
    c.drawString(xs[3] + 4, bottom - 13, "control register")  # the strayed cell text
    c.setFont("Helvetica", 10.5)
    c.drawString(72, bottom - 60, "Text after the table belongs to the chapter.")


def _footer_pdf() -> bytes:
    """One page: title, chapter heading, one 11pt sentence, and a print footer in
    small type whose long text outweighs the sentence (one page: nothing recurs,
    so the furniture rule cannot drop it)."""
    return _one_page_pdf(_draw_footer_page)


def _draw_footer_page(c: Any, height: float) -> None:
    c.setFont("Helvetica", 24)
    c.drawString(72, height - 72, "Controller manual")
    c.setFont("Helvetica", 16)
    c.drawString(72, height - 110, "3 Register map")
    c.setFont("Helvetica", 11)
    c.drawString(72, height - 140, "The table below lists every register.")
    c.setFont("Helvetica", 8)
    c.drawString(24, 26, "Printed from the documentation build of the controller firmware tree,")
    c.drawString(24, 16, "file:///home/someone/projects/controller/docs/manual/register-map.html.")


def test_a_footer_in_the_page_edge_does_not_set_the_body_size() -> None:
    doc = PdfParser().parse(_footer_pdf(), "footer.pdf")
    sentence = next(s for s in doc.slices if s.text.startswith("The table below"))
    assert sentence.heading_path == ("Controller manual", "3 Register map")
    assert sentence.text != sentence.heading_path[-1]


def test_a_cell_fragment_outside_the_table_box_is_not_a_heading() -> None:
    doc = PdfParser().parse(_fragment_pdf(), "fragment.pdf")
    paths = {s.heading_path for s in doc.slices}
    assert paths == {("3 Register map",)}, paths
    assert any(s.kind == "table" for s in doc.slices)
    assert any("control register" in s.text for s in doc.slices)  # kept as text


def _line(text: str, x0: float, x1: float, baseline: float = 700.0, size: float = 10.5) -> Line:
    return Line(text, size, False, baseline + size, baseline - 2, x0, baseline, x1)


def test_glyph_fragments_on_one_baseline_are_joined() -> None:
    from clawkb.parsers.pdf_layout import _join_fragments

    pieces = [_line(ch, 20 + 6 * k, 25 + 6 * k) for k, ch in enumerate("12/1/26")]
    pieces += [_line("PM", 80, 95), _line("C", 300, 307), _line("KB-7 manual", 307, 370)]
    joined = _join_fragments(pieces)
    assert [ln.text for ln in joined] == ["12/1/26 PM CKB-7 manual"]
    columns = [_line("Supply voltage", 72, 160), _line("1.8 V to 3.6 V", 300, 380)]
    assert [ln.text for ln in _join_fragments(columns)] == ["Supply voltage", "1.8 V to 3.6 V"]
    lines = [_line("first line", 72, 200), _line("second", 72, 150, baseline=686)]
    assert len(_join_fragments(lines)) == 2


def _two_tables_pdf(prose_between: bool) -> bytes:
    """Page 1 ends with a ruled table reaching its bottom; page 2 starts with a
    table of as many columns, with or without a paragraph above it."""
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    buf = io.BytesIO()
    c = canvas.Canvas(buf, pagesize=A4)
    _width, height = A4
    xs = [72, 170, 270, 370, 520]

    c.setFont("Helvetica-Bold", 14)
    c.drawString(72, height - 60, "Registers")
    first = [("Address", "Name", "Reset", "Access")]
    first += [(f"0x{4 * k:04X}", f"REG{k}", "0x0", "RW") for k in range(39)]
    _ruled_table(c, xs, height - 80, first)
    c.showPage()
    top = height - 60
    if prose_between:
        c.setFont("Helvetica", 10)
        c.drawString(72, top, "The pins of the second port are listed below.")
        top -= 20
    _ruled_table(
        c,
        xs,
        top,
        [("Pin", "Port", "Mode", "Pull")] + [(f"P{k}", "B", "IN", "UP") for k in range(5)],
    )
    c.showPage()
    c.save()
    return buf.getvalue()


def test_a_table_after_prose_on_the_next_page_is_not_a_continuation() -> None:
    joined = PdfParser().parse(_two_tables_pdf(prose_between=False), "t.pdf")
    tables = [s for s in joined.slices if s.kind == "table"]
    assert [t.page for t in tables] == [1, 2]
    assert tables[1].text.startswith("| Address | Name | Reset | Access |\n| --- ")  # continued
    apart = PdfParser().parse(_two_tables_pdf(prose_between=True), "t.pdf")
    tables = [s for s in apart.slices if s.kind == "table"]
    assert tables[1].text.startswith("| Pin | Port | Mode | Pull |")  # its own header
