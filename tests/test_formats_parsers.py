"""HTML, subtitles, CSV/XLSX, DOCX and JSON/YAML parsers on real generated files."""

from __future__ import annotations

import io
from pathlib import Path

import docx
import openpyxl
import pytest

from clawkb.errors import ParseError
from clawkb.kb import KnowledgeBase
from clawkb.parsers.docx import DocxParser
from clawkb.parsers.html import HtmlParser
from clawkb.parsers.spreadsheet import CsvParser, XlsxParser
from clawkb.parsers.structured import JsonParser, YamlParser
from clawkb.parsers.subtitles import SubtitleParser

HTML = """<!doctype html>
<html lang="zh"><head><meta charset="gbk"><title>串口 UART guide</title>
<script>var secret_script_token = 1</script><style>.x{}</style></head>
<body><nav>NAVMENU home</nav><header>SITEHEADER</header>
<h1>Intro</h1>
<p>波特率 <a href="https://example.org/baud">baud rates</a> explained</p>
<h2>Pins</h2>
<table>
<thead><tr><th>Pin</th><th>Function</th></tr></thead>
<tr><td>PA5</td><td>LED</td></tr>
<tr><td>PA2</td><td>USART2_TX</td></tr>
</table>
<pre><code class="language-c">int main(void)
{
    return 0;
}</code></pre>
<ul><li>first item</li><li>second item</li></ul>
<aside>SIDEBAR</aside><footer>COPYRIGHT</footer>
</body></html>
"""


def test_html_structure_charset_and_chrome() -> None:
    doc = HtmlParser().parse(HTML.encode("gbk"), "guide.html")
    assert doc.title == "串口 UART guide"
    assert doc.encoding == "gb18030"
    text = "\n".join(s.text for s in doc.slices)
    for dropped in ("secret_script_token", "NAVMENU", "SITEHEADER", "SIDEBAR", "COPYRIGHT"):
        assert dropped not in text
    para = next(s for s in doc.slices if "波特率" in s.text)
    assert para.heading_path == ("Intro",) and para.line_start == 6
    assert para.links[0].target == "https://example.org/baud"
    table = next(s for s in doc.slices if s.kind == "table")
    assert table.heading_path == ("Intro", "Pins")
    assert table.text.splitlines()[0] == "| Pin | Function |"
    assert "| PA2 | USART2_TX |" in table.text
    code = next(s for s in doc.slices if s.kind == "code")
    assert code.language == "c" and code.text.startswith("int main(void)")
    assert (code.line_start, code.line_end) == (13, 16)
    assert any(s.kind == "list" and "- second item" in s.text for s in doc.slices)
    assert doc.metadata["links"] == ["https://example.org/baud"] and doc.metadata["lang"] == "zh"


def test_html_utf8_without_meta_and_empty_page() -> None:
    doc = HtmlParser().parse("<p>温度传感器 sensor</p>".encode(), "a.htm")
    assert [s.text for s in doc.slices] == ["温度传感器 sensor"]
    assert HtmlParser().parse(b"<!-- only a comment -->", "e.html").slices == ()


SRT = """1
00:00:01,000 --> 00:00:03,500
Welcome to the <i>design review</i>.

2
00:00:04,000 --> 00:00:06,000
今天讨论电源模块。

3
00:01:00,000 --> 00:01:02,250
After the break: the LDO thermal issue.
"""

VTT = """WEBVTT

NOTE this note must not be indexed

STYLE
::cue { color: red }

intro
00:00.500 --> 00:02.000 align:start
<v Alice>Clock tree is <b>fine</b>

00:02.100 --> 00:04.000
<v.loud Bob>PLL locks at 84 MHz
"""


def test_srt_cues_merge_into_passages_with_timestamps() -> None:
    doc = SubtitleParser().parse(SRT.encode(), "review.srt")
    assert [s.heading_path for s in doc.slices] == [
        ("00:00:01.000 --> 00:00:06.000",),
        ("00:01:00.000 --> 00:01:02.250",),
    ]
    first = doc.slices[0]
    assert first.text == "Welcome to the design review.\n今天讨论电源模块。"
    assert (first.line_start, first.line_end) == (2, 7)
    assert doc.metadata["passages"][1] == {
        "start": 60.0,
        "end": 62.25,
        "start_ts": "00:01:00.000",
        "end_ts": "00:01:02.250",
        "line_start": 10,
        "line_end": 11,
    }
    assert doc.metadata["cues"] == 3 and doc.metadata["duration_s"] == 62.25


def test_vtt_speakers_notes_and_styles() -> None:
    doc = SubtitleParser().parse(VTT.encode(), "call.vtt")
    assert len(doc.slices) == 1
    assert doc.slices[0].text == "Alice: Clock tree is fine\nBob: PLL locks at 84 MHz"
    assert doc.slices[0].heading_path == ("00:00:00.500 --> 00:00:04.000",)
    assert doc.metadata["format"] == "vtt"
    with pytest.raises(ParseError, match="no subtitle cues"):
        SubtitleParser().parse(b"just some text\n", "x.srt")


def test_csv_header_repeated_and_anchor_ranges() -> None:
    rows = ["Ref,Value,Footprint"] + [f"R{i},{i}k,0402" for i in range(1, 120)]
    doc = CsvParser().parse("\n".join(rows).encode(), "/x/bom.csv")
    tables = [s for s in doc.slices if s.kind == "table"]
    assert len(tables) > 1
    for sl in tables:
        assert sl.text.splitlines()[0] == "| Ref | Value | Footprint |"
        assert sl.heading_path[0] == "bom"
        assert sl.heading_path[1] == f"bom!A{sl.line_start}:C{sl.line_end}"
    assert tables[0].line_start == 2 and tables[-1].line_end == 120
    assert "| R77 | 77k | 0402 |" in "".join(s.text for s in tables)
    assert doc.metadata["sheets"][0]["header_row"] == 1


def test_csv_semicolons_and_no_header() -> None:
    doc = CsvParser().parse(b"1;2;3\n4;5;6\n", "nums.csv")
    assert doc.slices[0].text.splitlines()[:3] == [
        "| A | B | C |",
        "| --- | --- | --- |",
        "| 1 | 2 | 3 |",
    ]


def _workbook() -> bytes:
    wb = openpyxl.Workbook()
    ws = wb.active
    ws.title = "Pins"
    ws.append(["STM32 pin map"])
    ws.append([])
    ws.append(["Group", "Pin", "Function", "Voltage"])
    ws.append(["Power", "VDD", "supply", 3.3])
    ws.append([None, "VSS", "ground", 0.0])
    ws.append([None, "VBAT", "backup", 3.0])
    ws.merge_cells("A4:A6")
    for i in range(7, 60):
        ws.append(["GPIO", f"PA{i}", f"AF{i % 16}", 3.3])
    wb.create_sheet("Notes").append(["Note", "Owner"])
    wb["Notes"].append(["check 电源 ripple", "Li"])
    buf = io.BytesIO()
    wb.save(buf)
    return buf.getvalue()


def test_xlsx_sheets_merged_cells_header_and_ranges() -> None:
    doc = XlsxParser().parse(_workbook(), "/x/pins.xlsx")
    pins = [s for s in doc.slices if s.heading_path[0] == "Pins"]
    assert pins[0].kind == "text" and pins[0].text == "STM32 pin map" and pins[0].line_start == 1
    tables = [s for s in pins if s.kind == "table"]
    assert tables[0].heading_path[1].startswith("Pins!A4:D")
    assert all(s.text.startswith("| Group | Pin | Function | Voltage |") for s in tables)
    first_rows = tables[0].text.splitlines()[2:5]
    assert first_rows == [
        "| Power | VDD | supply | 3.3 |",
        "| Power | VSS | ground | 0 |",
        "| Power | VBAT | backup | 3 |",
    ]
    assert tables[-1].line_end == 59 and tables[-1].heading_path[1].endswith(
        f"D{tables[-1].line_end}"
    )
    notes = [s for s in doc.slices if s.heading_path[0] == "Notes"]
    assert notes[0].heading_path == ("Notes", "Notes!A2:B2") and "电源" in notes[0].text
    sheets = {m["name"]: m for m in doc.metadata["sheets"]}
    assert sheets["Pins"]["header_row"] == 3 and sheets["Pins"]["merged_ranges"] == 1


def _docx() -> bytes:
    d = docx.Document()
    d.core_properties.title = "Power design note"
    d.add_heading("Power tree", level=1)
    d.add_paragraph("The LDO feeds the 3V3 rail; 纹波 below 30 mV.")
    d.add_heading("Regulators", level=2)
    d.add_paragraph("TPS7A20 is the chosen LDO.", style="List Bullet")
    table = d.add_table(rows=3, cols=3)
    for r, row in enumerate(
        [["Rail", "Part", "Current"], ["3V3", "TPS7A20", "300 mA"], ["1V8", "TLV755", "500 mA"]]
    ):
        for c, value in enumerate(row):
            table.cell(r, c).text = value
    d.add_heading("Clocks", level=1)
    d.add_paragraph("HSE is 8 MHz.")
    buf = io.BytesIO()
    d.save(buf)
    return buf.getvalue()


def test_docx_headings_paragraphs_tables() -> None:
    doc = DocxParser().parse(_docx(), "note.docx")
    assert doc.title == "Power design note"
    by_text = {s.text: s for s in doc.slices}
    assert by_text["The LDO feeds the 3V3 rail; 纹波 below 30 mV."].heading_path == ("Power tree",)
    assert by_text["- TPS7A20 is the chosen LDO."].kind == "list"
    table = next(s for s in doc.slices if s.kind == "table")
    assert table.heading_path == ("Power tree", "Regulators")
    assert table.text.splitlines() == [
        "| Rail | Part | Current |",
        "| --- | --- | --- |",
        "| 3V3 | TPS7A20 | 300 mA |",
        "| 1V8 | TLV755 | 500 mA |",
    ]
    assert by_text["HSE is 8 MHz."].heading_path == ("Clocks",)
    assert table.line_end - table.line_start == 2 and doc.metadata["line_unit"] == "block"


def test_json_key_paths_and_lines() -> None:
    data = b'{\n  "board": {\n    "name": "nucleo",\n    "pins": {\n      "red_led": "PA5",\n      "user_btn": 13\n    }\n  },\n  "list": [1, 2]\n}\n'
    doc = JsonParser().parse(data, "board.json")
    pins = next(s for s in doc.slices if s.heading_path == ("board", "pins"))
    assert pins.text == "board.pins.red_led: PA5\nboard.pins.user_btn: 13"
    assert (pins.line_start, pins.line_end) == (5, 6)
    assert any(s.text == "list[0]: 1\nlist[1]: 2" for s in doc.slices)
    with pytest.raises(ParseError, match=r"not valid JSON: .* line 3"):
        JsonParser().parse(b'{\n "a": 1,\n "b": }\n', "bad.json")


def test_jsonl_and_yaml_multi_document() -> None:
    doc = JsonParser().parse(b'{"id": "a", "v": 1}\n\n{"id": "b"}\n', "r.jsonl")
    assert [(s.text, s.line_start) for s in doc.slices] == [
        ("[1].id: a\n[1].v: 1", 1),
        ("[3].id: b", 3),
    ]
    yml = b"board:\n  pins:\n    red_led: PA5\n---\nname: second\n"
    doc = YamlParser().parse(yml, "b.yaml")
    assert [(s.heading_path, s.text, s.line_start) for s in doc.slices] == [
        (("[doc 1]", "board", "pins"), "[doc 1].board.pins.red_led: PA5", 3),
        (("[doc 2]",), "[doc 2].name: second", 5),
    ]
    with pytest.raises(ParseError, match=r"not valid YAML.*line 2"):
        YamlParser().parse(b"a: [1,\nb: }\n", "bad.yaml")


def test_formats_index_and_search_end_to_end(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "pins.xlsx").write_bytes(_workbook())
    (docs / "note.docx").write_bytes(_docx())
    (docs / "guide.html").write_bytes(HTML.encode("gbk"))
    (docs / "review.srt").write_text(SRT, encoding="utf-8")
    (docs / "board.yaml").write_text("board:\n  pins:\n    red_led: PA5\n", encoding="utf-8")
    with KnowledgeBase.open(tmp_path / "kb", create=True) as kb:
        report = kb.index([docs])
        assert (report.added, report.failed) == (5, 0), report.errors
        hit = kb.search("VBAT backup", limit=1).hits[0]
        assert hit.anchor.path.endswith("pins.xlsx") and hit.anchor.heading_path[1].startswith(
            "Pins!A4:D"
        )
        assert hit.text.startswith("| Group | Pin |")
        hit = kb.search("LDO thermal", limit=1).hits[0]
        assert hit.anchor.heading_path == ("00:01:00.000 --> 00:01:02.250",)
        hit = kb.search("TLV755", limit=1).hits[0]
        assert hit.anchor.path.endswith("note.docx") and hit.anchor.heading_path == (
            "Power tree",
            "Regulators",
        )
        hit = kb.search("red_led", limit=1).hits[0]
        assert hit.anchor.heading_path == ("board", "pins") and hit.anchor.line_start == 3
        hit = kb.search("USART2_TX", limit=1).hits[0]
        assert hit.anchor.path.endswith("guide.html") and hit.anchor.heading_path == (
            "Intro",
            "Pins",
        )
