"""One bilingual manual, printed to PDF by several real producers.

The same content (three chapters of prose, then a 60-row register table that
runs over two pages with its header row printed once; :func:`produce_long`
makes a 100-row variant that runs over three or more pages) is written as HTML for
Chromium's print-to-PDF, as a .docx for LibreOffice, as LaTeX for XeTeX and
laid out directly with reportlab. The PDFs in ``tests/data/pdf_producers/``
were made by this script with the real tools (Debian's chromium,
libreoffice-writer-nogui and texlive-xetex); the tests read those committed
files, so CI does not need the heavy toolchains, and re-run a producer only
when it is installed. Remake them with::

    .venv/bin/python tests/pdf_producers.py tests/data/pdf_producers [chromium libreoffice ...]
    .venv/bin/python tests/pdf_producers.py tests/data/pdf_long_tables libreoffice-long
"""

from __future__ import annotations

import html
import io
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from clawkb.types import ParsedDocument

TITLE = "CKB-7 控制器用户手册"
#: The HTML <title>: Chromium prints it in the page header and stores it as the PDF's Title.
HTML_TITLE = "CKB-7 manual"
CHAPTERS: list[tuple[str, list[str]]] = [
    (
        "第一章 概述",
        [
            "CKB-7 是一款面向工业现场的低功耗控制器，集成 4 路 CAN 接口、2 路以太网和 "
            "16 路通用输入输出。本手册说明其电气特性、上电流程与全部寄存器。",
            "The CKB-7 controller targets field devices: it boots from SPI flash in under "
            "40 ms and exposes every peripheral through memory-mapped registers.",
            "阅读本手册前，请先确认板卡版本：丝印为 “REV B” 的板卡使用本手册。",
        ],
    ),
    (
        "第二章 电气特性",
        [
            "工作电压范围为 1.8 V 至 3.6 V；典型工作电流 12 mA（全速运行，所有外设开启）。",
            "The I/O pins tolerate 5 V only when VDD is present; never drive them from an "
            "unpowered board, or the clamp diodes conduct.",
            "差分线阻抗：90 欧姆，误差不超过 10%。上电顺序：先 VDD_CORE，后 VDD_IO，间隔不少于 1 ms。",
        ],
    ),
    (
        "第三章 寄存器表",
        [
            "下表列出全部 60 个寄存器。所有寄存器均为 32 位，只能按字访问；"
            "保留位写 0，读出值无定义。",
        ],
    ),
]
CAPTION = "表 3-1 寄存器列表"
#: The one sentence above the table when the manual has no other prose.
SHORT_LEAD = "下表列出全部寄存器。"
HEADER = ("地址", "名称", "复位值", "说明")
_UNITS = ["UART", "SPI", "CAN", "GPIO", "TIMER", "DMA"]
_ROLES = [("CTRL", "控制寄存器"), ("STAT", "状态寄存器"), ("DATA", "数据寄存器")]


def register_rows(n: int) -> list[tuple[str, str, str, str]]:
    """``n`` register rows: address, name, reset value, a CJK description."""
    return [
        (
            f"0x{0x4000_0000 + 4 * i:08X}",
            f"{_UNITS[i // 10 % 6]}{i % 10 // 3}_{_ROLES[i % 3][0]}",
            f"0x{(i * 0x1111) & 0xFFFF:08X}",
            f"{_UNITS[i // 10 % 6]} 通道 {i % 10 // 3} {_ROLES[i % 3][1]}（第 {i + 1} 项）",
        )
        for i in range(n)
    ]


#: What the tests read back: the header row and a register row (its address) in pipe form.
HEADER_LINE = "| " + " | ".join(HEADER) + " |"
ROW = re.compile(r"^\| (0x4000[0-9A-F]{4}) \|")


def squash(text: str) -> str:
    """Text without whitespace: XeTeX sets "第一章 概述" as "第一章概述", and
    producers break lines in different places."""
    return "".join(text.split())


def parse(path: Path) -> ParsedDocument:
    """``path`` through clawkb's PDF parser."""
    from clawkb.parsers.pdf import PdfParser

    return PdfParser().parse(path.read_bytes(), str(path))


def table_rows(doc: ParsedDocument, pages: int) -> list[str]:
    """The register addresses of ``doc``'s table slices, in order. Checks on the way that
    the table spans at least ``pages`` pages and that every slice opens with the real
    header row followed by the separator."""
    tables = [s for s in doc.slices if s.kind == "table"]
    assert len({s.page for s in tables}) >= pages, f"the table should span {pages} pages or more"
    seen: list[str] = []
    for table in tables:
        lines = table.text.split("\n")
        assert lines[0] == HEADER_LINE, f"page {table.page}: header is {lines[0]!r}"
        assert lines[1].startswith("| ---"), f"page {table.page}: no separator row"
        seen += [m.group(1) for line in lines[2:] if (m := ROW.match(line))]
    return seen


ROWS = register_rows(60)
#: The long variant: a table that runs over three or more pages.
LONG_ROWS = register_rows(100)
CJK_FONT_NAME = "WenQuanYi Micro Hei"
PRODUCERS = ("chromium", "libreoffice", "reportlab", "xetex")


def manual_html(
    rows: list[tuple[str, str, str, str]] | None = None,
    thead: bool = False,
    prose: bool = True,
    narrow: bool = False,
) -> str:
    """The manual as one HTML page; the header row is a plain first row unless
    ``thead`` (then Chromium repeats it at the top of every page). Without
    ``prose`` only the last chapter's heading and sentence precede the table:
    the title's large type then carries more characters than the running text.
    ``narrow``: the description column is 4em wide, so its cells wrap over
    several lines ("控制寄" / "存器") and Chromium cuts rows at page breaks."""
    rows = ROWS if rows is None else rows
    esc = html.escape
    parts = [
        "<!DOCTYPE html><html lang='zh'><head><meta charset='utf-8'>",
        f"<title>{HTML_TITLE}</title><style>",
        f"body{{font-family:'{CJK_FONT_NAME}',sans-serif;font-size:11pt;line-height:1.5}}",
        "h1{font-size:22pt} h2{font-size:16pt;margin-top:1.2em}",
        "table{border-collapse:collapse;font-size:9pt;line-height:1.25}",
        "td,th{border:1px solid #333;padding:1px 6px}",
        "th{font-weight:normal;background:#ddd} caption{padding:4px}",
        "td:nth-child(4),th:nth-child(4){width:4em}" if narrow else "",
        "</style></head><body>",
        f"<h1>{esc(TITLE)}</h1>",
    ]
    chapters = CHAPTERS if prose else [(CHAPTERS[-1][0], [SHORT_LEAD])]
    for heading, paragraphs in chapters:
        parts.append(f"<h2>{esc(heading)}</h2>")
        parts.extend(f"<p>{esc(p)}</p>" for p in paragraphs)
    parts.append(f"<table><caption>{esc(CAPTION)}</caption>")
    header = "<tr>" + "".join(f"<th>{esc(c)}</th>" for c in HEADER) + "</tr>"
    parts.append(f"<thead>{header}</thead><tbody>" if thead else header)
    for row in rows:
        parts.append("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in row) + "</tr>")
    parts.append("</tbody></table></body></html>" if thead else "</table></body></html>")
    return "\n".join(parts)


def manual_tex(rows: list[tuple[str, str, str, str]] | None = None) -> str:
    """The manual for XeTeX: xeCJK, a ruled longtable whose header is not repeated."""
    rows = ROWS if rows is None else rows
    tex = str.maketrans({"_": r"\_", "%": r"\%", "&": r"\&", "#": r"\#"})
    out = [
        r"\documentclass[11pt,a4paper]{article}",
        r"\usepackage[margin=2.2cm]{geometry}",
        r"\usepackage{xeCJK}",
        rf"\setCJKmainfont{{{CJK_FONT_NAME}}}",
        r"\usepackage{longtable}",
        r"\usepackage{titlesec}",
        r"\titleformat{\section}{\Large\bfseries}{}{0em}{}",
        r"\setlength{\parindent}{0pt}",
        r"\pagestyle{plain}",
        r"\begin{document}",
        rf"{{\huge\bfseries {TITLE.translate(tex)}\par}}\bigskip",
    ]
    for heading, paragraphs in CHAPTERS:
        out.append(rf"\section*{{{heading}}}")
        out.extend(p.translate(tex) + "\n" for p in paragraphs)
    out.append(r"\begin{longtable}{|l|l|l|l|}")
    out.append(r"\multicolumn{4}{l}{\textbf{" + CAPTION + r"}}\\")
    out.append(r"\hline " + " & ".join(rf"\textbf{{{c}}}" for c in HEADER) + r" \\ \hline")
    out.append(r"\endfirsthead \hline \endhead \hline \endfoot \hline \endlastfoot")
    for row in rows:
        out.append(" & ".join(c.translate(tex) for c in row) + r" \\ \hline")
    out.append(r"\end{longtable}")
    out.append(r"\end{document}")
    return "\n".join(line for line in out if line)


def manual_docx(path: Path, rows: list[tuple[str, str, str, str]] | None = None) -> None:
    """The manual as a Word file (python-docx) for LibreOffice to print."""
    rows = ROWS if rows is None else rows
    from docx import Document
    from docx.shared import Pt

    doc = Document()
    doc.add_heading(TITLE, level=0)
    for heading, paragraphs in CHAPTERS:
        doc.add_heading(heading, level=1)
        for p in paragraphs:
            doc.add_paragraph(p)
    caption = doc.add_paragraph()
    caption.add_run(CAPTION).bold = True
    table = doc.add_table(rows=1 + len(rows), cols=len(HEADER))
    table.style = "Table Grid"
    for r, cells in enumerate([HEADER, *rows]):
        for c, value in enumerate(cells):
            run = table.cell(r, c).paragraphs[0].add_run(value)
            run.font.size = Pt(9)
            run.bold = r == 0
    doc.save(str(path))


def manual_reportlab(rows: list[tuple[str, str, str, str]] | None = None) -> bytes:
    """The manual laid out by reportlab's platypus (CID font, split table, no repeat)."""
    rows = ROWS if rows is None else rows
    from reportlab.lib import colors
    from reportlab.lib.pagesizes import A4
    from reportlab.lib.styles import ParagraphStyle
    from reportlab.pdfbase import pdfmetrics
    from reportlab.pdfbase.cidfonts import UnicodeCIDFont
    from reportlab.platypus import Paragraph, SimpleDocTemplate, Spacer, Table, TableStyle

    pdfmetrics.registerFont(UnicodeCIDFont("STSong-Light"))
    body = ParagraphStyle("body", fontName="STSong-Light", fontSize=10.5, leading=15)
    h1 = ParagraphStyle("h1", parent=body, fontSize=20, leading=26, spaceAfter=8)
    h2 = ParagraphStyle("h2", parent=body, fontSize=15, leading=20, spaceBefore=10)
    story: list[object] = [Paragraph(TITLE, h1)]
    for heading, paragraphs in CHAPTERS:
        story.append(Paragraph(heading, h2))
        story.extend(Paragraph(html.escape(p), body) for p in paragraphs)
    story += [Spacer(1, 6), Paragraph(CAPTION, body)]
    table = Table([list(HEADER), *[list(r) for r in rows]], repeatRows=0)
    table.setStyle(
        TableStyle(
            [
                ("FONT", (0, 0), (-1, -1), "STSong-Light", 9),
                ("GRID", (0, 0), (-1, -1), 0.5, colors.black),
            ]
        )
    )
    story.append(table)
    buf = io.BytesIO()
    SimpleDocTemplate(buf, pagesize=A4, title=TITLE).build(story)  # type: ignore[arg-type]
    return buf.getvalue()


def produce_long(
    producer: str, out_dir: Path, thead: bool = False, prose: bool = True, narrow: bool = False
) -> Path:
    """The manual with :data:`LONG_ROWS`, a register table over three or more pages.

    ``thead``: Chromium only, the header row in ``<thead>`` (repeated on every
    printed page) instead of a plain first row (printed once). ``prose=False``:
    Chromium only, just the chapter heading and one sentence above the table;
    ``narrow``: Chromium only, wrapped description cells (see :func:`manual_html`)."""
    name = f"{producer}-long{'-thead' if thead else ''}{'' if prose else '-short'}"
    name += "-narrow" if narrow else ""
    out = out_dir / f"{name}.pdf"
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        if producer == "reportlab":
            out.write_bytes(manual_reportlab(LONG_ROWS))
        elif producer == "chromium":
            (tmp / "manual.html").write_text(manual_html(LONG_ROWS, thead, prose), encoding="utf-8")
            _print_chromium(tmp, out)
        elif producer == "libreoffice":
            manual_docx(tmp / "manual.docx", LONG_ROWS)
            _print_libreoffice(tmp, out)
        elif producer == "xetex":
            _print_xetex(tmp, manual_tex(LONG_ROWS), out)
        else:
            raise ValueError(f"no long variant for {producer!r}")
    return out


def _print_chromium(tmp: Path, out: Path) -> None:
    _run(
        [
            shutil.which("chromium") or "chromium",
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            f"--user-data-dir={tmp / 'profile'}",
            f"--print-to-pdf={out.resolve()}",
            (tmp / "manual.html").as_uri(),
        ],
        tmp,
    )


def _print_libreoffice(tmp: Path, out: Path) -> None:
    _run(
        [
            "libreoffice",
            f"-env:UserInstallation={(tmp / 'lo').as_uri()}",
            "--headless",
            "--convert-to",
            "pdf",
            "manual.docx",
        ],
        tmp,
    )
    shutil.copyfile(tmp / "manual.pdf", out)


def _print_xetex(tmp: Path, source: str, out: Path) -> None:
    (tmp / "manual.tex").write_text(source, encoding="utf-8")
    for _ in range(2):  # longtable settles its column widths on the second run
        _run(["xelatex", "-interaction=nonstopmode", "manual.tex"], tmp)
    shutil.copyfile(tmp / "manual.pdf", out)


def _run(cmd: list[str], cwd: Path) -> None:
    subprocess.run(cmd, cwd=cwd, check=True, capture_output=True, timeout=300)


def produce(producer: str, out_dir: Path) -> Path:
    """Print the manual with ``producer`` into ``out_dir/<producer>.pdf``."""
    out = out_dir / f"{producer}.pdf"
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        if producer == "reportlab":
            out.write_bytes(manual_reportlab())
        elif producer == "chromium":
            (tmp / "manual.html").write_text(manual_html(), encoding="utf-8")
            _print_chromium(tmp, out)
        elif producer == "libreoffice":
            manual_docx(tmp / "manual.docx")
            _print_libreoffice(tmp, out)
        elif producer == "xetex":
            _print_xetex(tmp, manual_tex(), out)
        else:
            raise ValueError(f"unknown producer {producer!r}; known: {', '.join(PRODUCERS)}")
    return out


def available(producer: str) -> bool:
    """Whether the tool behind ``producer`` is installed here."""
    tool = {"chromium": "chromium", "libreoffice": "libreoffice", "xetex": "xelatex"}
    return producer == "reportlab" or shutil.which(tool[producer]) is not None


if __name__ == "__main__":
    target = Path(sys.argv[1])
    target.mkdir(parents=True, exist_ok=True)
    for name in sys.argv[2:] or PRODUCERS:
        long = name.endswith("-long")  # "libreoffice-long": the 100-row variant
        path = produce_long(name.removesuffix("-long"), target) if long else produce(name, target)
        print(f"{path}: {path.stat().st_size // 1024} KB")
