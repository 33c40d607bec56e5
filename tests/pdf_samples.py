"""Small real PDFs for the PDF tests, made with reportlab and Pillow.

Kept apart from the test modules so the OCR, hostile-input and parser tests
share one way of making them; the 30-page datasheet lives in bench/pdfgen.py.
"""

from __future__ import annotations

import io
from pathlib import Path

from PIL import Image, ImageDraw, ImageFont
from reportlab.lib.pagesizes import A4
from reportlab.lib.utils import ImageReader
from reportlab.pdfbase import pdfmetrics
from reportlab.pdfbase.cidfonts import UnicodeCIDFont
from reportlab.pdfgen import canvas

CJK_FONT = "STSong-Light"
CJK_TTF = Path("/usr/share/fonts/truetype/wqy/wqy-microhei.ttc")
LATIN_TTF = Path("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf")


def _canvas(buf: io.BytesIO, **kwargs: object) -> canvas.Canvas:
    pdfmetrics.registerFont(UnicodeCIDFont(CJK_FONT))
    return canvas.Canvas(buf, pagesize=A4, **kwargs)  # type: ignore[arg-type]


def text_pdf(pages: list[list[str]], *, encrypt: object = None, title: str = "") -> bytes:
    """One 11 pt line per string, one list per page (Chinese-capable font)."""
    buf = io.BytesIO()
    c = _canvas(buf, encrypt=encrypt)
    if title:
        c.setTitle(title)
    for lines in pages:
        y = A4[1] - 72
        for line in lines:
            c.setFont(CJK_FONT, 11)
            c.drawString(72, y, line)
            y -= 14
        c.showPage()
    c.save()
    return buf.getvalue()


def outline_pdf() -> bytes:
    """Headings set in body-size type, structure only in the outline (bookmarks)."""
    buf = io.BytesIO()
    c = _canvas(buf)
    sections = [
        ("Introduction", 0, ["Introduction", "The board boots from SPI flash."]),
        ("Boot pins", 1, ["Boot pins", "BOOT0 high selects the UART loader."]),
        ("Power tree", 0, ["Power tree", "The PMIC supplies 0.9 V core rail VDD_CORE."]),
    ]
    for n, (title, level, lines) in enumerate(sections):
        key = f"s{n}"
        c.bookmarkPage(key)
        c.addOutlineEntry(title, key, level=level)
        y = A4[1] - 72
        for line in lines:
            c.setFont("Helvetica", 11)
            c.drawString(72, y, line)
            y -= 14
        c.showPage()
    c.save()
    return buf.getvalue()


def long_table_pdf(rows: int = 60) -> bytes:
    """A ruled 3-column table of ``rows`` register rows on one page."""
    buf = io.BytesIO()
    c = _canvas(buf)
    c.setFont("Helvetica-Bold", 16)
    c.drawString(72, A4[1] - 60, "Register summary")
    top, height, xs = A4[1] - 80, 11.5, [72, 172, 292, 460]
    data = [("Register", "Offset", "Reset value")] + [
        (f"CTRL_REG{i}", f"0x{i * 4:03X}", f"0x{i:08X}") for i in range(rows)
    ]
    for r, cells in enumerate(data):
        y = top - r * height
        c.setFont("Helvetica", 8)
        for x, cell in zip(xs, cells, strict=False):
            c.drawString(x + 3, y - 9, cell)
    bottom = top - len(data) * height
    for r in range(len(data) + 1):
        c.line(xs[0], top - r * height, xs[-1], top - r * height)
    for x in xs:
        c.line(x, top, x, bottom)
    c.showPage()
    c.save()
    return buf.getvalue()


def scanned_pdf(lines: list[str], text_first_page: str | None = None) -> bytes:
    """Lines drawn into a bitmap and embedded as an image-only page (a "scan").

    With ``text_first_page``, page 1 is an ordinary text page and the scan is
    page 2, so page numbers in anchors are tested too.
    """
    font_size = 40
    width, height = 1700, 140 + len(lines) * 70
    image = Image.new("L", (width, height), 255)
    draw = ImageDraw.Draw(image)
    for i, line in enumerate(lines):
        cjk = any("\u4e00" <= ch <= "\u9fff" for ch in line)
        font = ImageFont.truetype(str(CJK_TTF if cjk else LATIN_TTF), font_size)
        draw.text((60, 60 + i * 70), line, fill=0, font=font)
    png = io.BytesIO()
    image.save(png, format="PNG")
    buf = io.BytesIO()
    c = _canvas(buf)
    if text_first_page:
        c.setFont("Helvetica", 11)
        c.drawString(72, A4[1] - 72, text_first_page)
        c.showPage()
    # 200 dpi: the bitmap's pixels -> points
    w_pt, h_pt = width * 72 / 200, height * 72 / 200
    c.drawImage(ImageReader(io.BytesIO(png.getvalue())), 40, A4[1] - 60 - h_pt, w_pt, h_pt)
    c.showPage()
    c.save()
    return buf.getvalue()


def fonts_available() -> bool:
    return CJK_TTF.exists() and LATIN_TTF.exists()
