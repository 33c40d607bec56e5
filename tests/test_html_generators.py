"""HTML as documentation generators emit it: exact, valid line spans and clean headings.

The pages in tests/data/html_generators/ follow the markup Sphinx (alabaster
theme, sphinx-copybutton), MkDocs Material and Docusaurus 3 write: permalink
anchors inside headings (``¶``, an invisible ``​`` hash-link), copy buttons
with SVG icons and tooltips, screen-reader helpers, skip links, page chrome.
Heading paths and chunk text must hold the words only, and every span must
exist in the file.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from clawkb.ingest.chunker import ChunkConfig, chunk_slices
from clawkb.kb import KnowledgeBase
from clawkb.parsers.html import HtmlParser
from clawkb.types import ParsedDocument

pytest.importorskip("lxml")

DATA = Path(__file__).parent / "data" / "html_generators"
#: Glyphs and control words that must never reach a heading path or a chunk.
NOISE = re.compile(r"[¶#🔗\u200b]|Copy to clipboard|Copy code|\bcopy\b|Skip to|On this page", re.I)


def parse(name: str) -> tuple[ParsedDocument, list[str]]:
    data = (DATA / name).read_bytes()
    return HtmlParser().parse(data, name), data.decode("utf-8").split("\n")


def headings(doc: ParsedDocument) -> list[tuple[str, ...]]:
    return [s.heading_path for s in doc.slices if s.heading_path and s.text == s.heading_path[-1]]


def assert_spans_valid(doc: ParsedDocument, source: list[str]) -> None:
    n_lines = len(source) - (source[-1] == "")
    for s in doc.slices:
        assert 1 <= s.line_start <= s.line_end <= n_lines, (s.line_start, s.line_end, s.text)


def test_sphinx_headings_spans_and_chunks() -> None:
    doc, source = parse("sphinx.html")
    assert headings(doc) == [
        ("Command-line API",),
        ("Command-line API", "Options"),
        ("Command-line API", "Options", "--completion-bash"),
    ]
    assert_spans_valid(doc, source)
    for s in doc.slices:
        assert not NOISE.search(s.text), s.text
        if s.text == (s.heading_path or ("",))[-1]:  # a heading: its own source line
            assert s.heading_path[-1].lstrip("-") in source[s.line_start - 1]
    table = next(s for s in doc.slices if s.kind == "table")
    assert source[table.line_start - 1].startswith("<table")
    assert "--baud" in source[table.line_end - 1] or "Link speed" in source[table.line_end - 1]
    code = next(s for s in doc.slices if s.kind == "code")
    assert (code.line_start, code.line_end) == (48, 49) and code.language == "bash"
    assert "source" in source[code.line_end - 1] and code.text.endswith("~/.ckbtool-completion")


def test_mkdocs_material_permalinks_buttons_and_helpers() -> None:
    doc, source = parse("mkdocs.html")
    assert headings(doc) == [
        ("Flashing",),
        ("Flashing", "Verify"),
        ("Flashing", "Recovery mode"),
    ]
    assert_spans_valid(doc, source)
    text = "\n".join(s.text for s in doc.slices)
    assert not NOISE.search(text), text
    assert "opens the loader console" not in text  # an sr-only helper
    assert "Hold BOOT while pressing RESET to enter the ROM loader." in text
    code = next(s for s in doc.slices if s.kind == "code")
    assert code.text == "ckbtool verify --image fw.bin" and code.language == "bash"


def test_docusaurus_hash_links_copy_buttons_and_one_line_table() -> None:
    doc, source = parse("docusaurus.html")
    assert headings(doc) == [
        ("Options",),
        ("Options", "--completion-bash"),
        ("Options", "--port"),
        ("Exit codes",),
    ]
    assert_spans_valid(doc, source)
    text = "\n".join(s.text for s in doc.slices)
    assert not NOISE.search(text), text
    assert "Serial device of the board." in text
    table = next(s for s in doc.slices if s.kind == "table")
    assert table.line_start == table.line_end and "<table>" in source[table.line_start - 1]
    code = next(s for s in doc.slices if s.kind == "code")
    assert code.text == "ckbtool --completion-bash > ~/.ckbtool-completion"


@pytest.mark.parametrize(
    ("heading", "expected"),
    [
        ('<h2 id="a">Pins<a class="headerlink" href="#a">¶</a></h2>', "Pins"),
        (
            '<h2 id="a"><a href="#a" class="anchor" aria-hidden="true"><svg></svg></a>Pins</h2>',
            "Pins",
        ),
        ('<h2 id="a"><a href="#a" class="anchor">§</a>Pins</h2>', "Pins"),
        ('<h2 id="a">Pins <a href="#a">#</a></h2>', "Pins"),
        ('<h2 id="a">Pins <a href="#a">🔗</a></h2>', "Pins"),
        (
            '<h2 id="a">Pins<a class="header-anchor" href="#a" aria-label="Permalink">\u200b</a></h2>',
            "Pins",
        ),
        ("<h2>Pins ¶</h2>", "Pins"),
        (  # Node.js API docs
            '<h2>Pins<span><a class="mark" href="#pins" id="pins">#</a></span>'
            '<a aria-hidden="true" class="legacy" id="x_pins"></a></h2>',
            "Pins",
        ),
        ("<h2>C#</h2>", "C#"),  # a glyph that is part of the words stays
        ('<h2>Using <a href="#pins">pins</a></h2>', "Using pins"),
    ],
)
def test_permalink_glyphs_leave_heading_words(heading: str, expected: str) -> None:
    doc = HtmlParser().parse(f"<body>{heading}<p>body</p></body>".encode(), "h.html")
    assert doc.slices[0].heading_path == (expected,)


def _one_line_table_page() -> str:
    rows = "".join(
        f"<tr><td>REG{i}</td><td>0x{4 * i:04X}</td><td>register {i} of the timer block "
        "with its reset value and access type</td></tr>"
        for i in range(60)
    )
    lines = [
        "<!DOCTYPE html>",
        "<html><head><title>Manual</title></head>",
        "<body>",
        "<h1>Manual</h1>",
        "<p>Intro text.</p>",
        "<h2>Registers</h2>",
        "<p>The register map:</p>",
        f"<table><tr><th>Name</th><th>Address</th><th>Description</th></tr>{rows}</table>",
        "</body>",
        "</html>",
    ]
    return "\n".join(lines) + "\n"


def test_table_on_one_source_line_gives_valid_spans(tmp_path: Path) -> None:
    """Before the fix the pieces of this table were cited as manual.html:22-8 (10 lines)."""
    page = _one_line_table_page()
    doc = HtmlParser().parse(page.encode(), "manual.html")
    for config in (ChunkConfig(max_tokens=120), ChunkConfig(row_tables=lambda _header: True)):
        chunks = chunk_slices(doc.slices, config)
        tables = [c for c in chunks if c.has_table]
        assert len(tables) > 2
        for c in chunks:
            assert 1 <= c.line_start <= c.line_end <= 10, (c.line_start, c.line_end)
        assert all((c.line_start, c.line_end) == (8, 8) for c in tables[1:])
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "manual.html").write_text(page, encoding="utf-8")
    with KnowledgeBase.open(tmp_path / "kb", create=True) as kb:
        kb.index([docs])
        hits = kb.search("REG45 timer register", limit=5).hits
        assert hits
        for hit in hits:
            assert 1 <= hit.anchor.line_start <= hit.anchor.line_end <= 10


def test_entity_newlines_never_push_a_span_past_the_file() -> None:
    page = "<body><p>a" + "&#10;" * 40 + "b</p></body>"
    doc = HtmlParser().parse(page.encode(), "e.html")
    assert [(s.line_start, s.line_end) for s in doc.slices] == [(1, 1)]


#: Docusaurus 3 <Tabs> and sphinx-tabs as they render: one panel shown, the others
#: ``hidden``; plus chrome that stays out (a hidden banner, a template, an icon).
TABS = """<!DOCTYPE html><html><body><article>
<h2 id="install">Install</h2>
<div class="tabs-container tabList__CuJ"><ul role="tablist" aria-orientation="horizontal" class="tabs">
<li role="tab" tabindex="0" aria-selected="true" class="tabs__item">Linux</li>
<li role="tab" tabindex="-1" aria-selected="false" class="tabs__item">Windows</li></ul>
<div class="margin-top--md">
<div role="tabpanel" class="tabItem_Ymn6"><p>Run apt install ckbtool on Debian.</p></div>
<div role="tabpanel" class="tabItem_Ymn6" hidden=""><p>Run winget install ckbtool in PowerShell.</p>
<pre><code class="language-powershell">winget install ckbtool</code></pre></div>
</div></div>
<div class="sphinx-tabs docutils container">
<div aria-label="Tabbed content" role="tablist"><button aria-controls="panel-0-0-0" role="tab">C</button>
<button aria-controls="panel-0-0-1" role="tab">Python</button></div>
<div class="sphinx-tabs-panel" id="panel-0-0-0" role="tabpanel" tabindex="0"><p>Call ckb_open() first.</p></div>
<div class="sphinx-tabs-panel" hidden="true" id="panel-0-0-1" role="tabpanel" tabindex="0"><p>Call ckb.open() first.</p></div>
</div>
<div class="tab-pane fade" hidden><p>Bootstrap pane about serial ports.</p></div>
<div hidden><p>A hidden banner nobody reads.</p></div>
<template><p>Template row never indexed.</p></template>
<p>Done <span aria-hidden="true">decorative icon</span>here.</p>
</article></body></html>
"""


def test_hidden_tab_panels_are_indexed_chrome_is_not(tmp_path: Path) -> None:
    doc = HtmlParser().parse(TABS.encode(), "tabs.html")
    text = "\n".join(s.text for s in doc.slices)
    for shown in ("apt install", "winget install ckbtool in PowerShell", "ckb.open()",
                  "ckb_open()", "Bootstrap pane about serial ports"):  # fmt: skip
        assert shown in text, shown
    for chrome in ("hidden banner", "Template row", "decorative icon"):
        assert chrome not in text, chrome
    code = next(s for s in doc.slices if s.kind == "code")
    assert code.language == "powershell" and code.heading_path == ("Install",)
    assert_spans_valid(doc, TABS.split("\n"))
    (tmp_path / "tabs.html").write_text(TABS, "utf-8")
    kb = KnowledgeBase.open(tmp_path / "kb", create=True)
    kb.index([tmp_path / "tabs.html"])
    hits = kb.search("winget PowerShell", mode="lexical").hits
    kb.close()
    assert hits and "winget install" in hits[0].text
    assert hits[0].anchor.heading_path == ("Install",)
