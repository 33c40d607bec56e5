"""The issue's PDF target on a generated 30-page bilingual datasheet with 5 tables.

The golden set's expected pages come from reportlab's layout (bench/pdfgen.py
records the page of each marked paragraph or table while it builds the PDF).
A query counts as a hit when a top-3 result's anchor names the expected page
and its chunk holds the expected text.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("pypdfium2")
pytest.importorskip("reportlab")

BENCH = Path(__file__).resolve().parents[1] / "bench"
sys.path.insert(0, str(BENCH))

import pdfgen  # noqa: E402
from clawkb import KnowledgeBase  # noqa: E402
from clawkb.ingest.chunker import ChunkConfig, chunk_slices  # noqa: E402
from clawkb.parsers.pdf import PdfParser  # noqa: E402
from clawkb.types import ParsedDocument  # noqa: E402


@pytest.fixture(scope="module")
def datasheet(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, int]]:
    folder = tmp_path_factory.mktemp("datasheet")
    path = folder / "ckb32f7-datasheet.pdf"
    markers = pdfgen.build_datasheet(path)
    return path, markers


@pytest.fixture(scope="module")
def parsed(datasheet: tuple[Path, dict[str, int]]) -> ParsedDocument:
    path, _ = datasheet
    return PdfParser().parse(path.read_bytes(), str(path))


@pytest.fixture(scope="module")
def kb(
    datasheet: tuple[Path, dict[str, int]], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[KnowledgeBase]:
    home = tmp_path_factory.mktemp("kb")
    with KnowledgeBase.open(home, create=True) as kb:
        report = kb.index([datasheet[0]])
        assert report.added == 1 and report.failed == 0, report.errors
        yield kb


def test_fixture_is_30_pages_with_5_tables(
    datasheet: tuple[Path, dict[str, int]], parsed: ParsedDocument
) -> None:
    assert parsed.metadata["pages"] == 30
    assert parsed.title == "CKB32F7 Datasheet"
    headers = {s.text.split("\n")[0] for s in parsed.slices if s.kind == "table"}
    assert len(headers) == 5, headers  # 5 distinct tables (the pin table spans 2 pages)


def test_golden_hit_at_3_with_right_page(
    kb: KnowledgeBase, datasheet: tuple[Path, dict[str, int]]
) -> None:
    golden = pdfgen.golden_set(datasheet[1])
    assert len(golden) >= 20
    misses = []
    for g in golden:
        hits = kb.search(g["query"], limit=3).hits
        if not any(h.anchor.page == g["page"] and g["expect_text"] in h.text for h in hits):
            misses.append((g, [(h.anchor.page, h.text[:60]) for h in hits]))
    hit_rate = 1 - len(misses) / len(golden)
    assert hit_rate >= 0.9, misses
    assert len(golden) - len(misses) >= 20


def test_chinese_text_from_cid_font_is_exact(parsed: ParsedDocument) -> None:
    text = "\n".join(s.text for s in parsed.slices)
    assert "停止模式下所有时钟停止，唤醒时间典型值为 12 微秒" in text
    assert "待机模式电流典型值为 2.4 微安" in text
    assert "\ufffd" not in text and not re.search(r"[\ue000-\uf8ff]", text)


def test_headings_from_font_size_and_weight(
    parsed: ParsedDocument, datasheet: tuple[Path, dict[str, int]]
) -> None:
    markers = datasheet[1]
    fact = next(s for s in parsed.slices if s.text.startswith("RCC_PLLCFGR sets the PLL"))
    assert fact.heading_path == (
        "5 Reset and clock control 复位和时钟控制",
        "5.3 PLL configuration",
    )
    assert fact.page == markers["pllcfgr"]
    zh = next(s for s in parsed.slices if "窗口看门狗在计数器" in s.text)
    assert zh.heading_path == ("9 Watchdogs 看门狗", "9.2 窗口看门狗")
    # the section carries over to the next page until the next heading
    page_after = [s for s in parsed.slices if s.page == markers["pins-1"] + 1]
    assert page_after and all(s.heading_path[-1] == "2.1 LQFP64 pin assignment" for s in page_after)


def test_running_header_and_footer_are_dropped(parsed: ParsedDocument) -> None:
    for s in parsed.slices:
        assert "Production data" not in s.text
        assert not re.search(r"Page \d+ of 30", s.text)


def test_tables_are_pipe_tables_and_continuations_get_the_header(
    parsed: ParsedDocument, datasheet: tuple[Path, dict[str, int]]
) -> None:
    markers = datasheet[1]
    pin_tables = [s for s in parsed.slices if s.kind == "table" and "| PA0 |" in s.text]
    assert [s.page for s in pin_tables] == [markers["pins-1"]]
    continued = next(s for s in parsed.slices if s.kind == "table" and s.page == markers["pins-2"])
    lines = continued.text.split("\n")
    assert lines[0] == "| Pin | Name | Type | Alternate functions |"
    assert lines[1] == "| --- | --- | --- | --- |"
    assert "| 46 | PC13 | I/O FT | RTC_TAMP1 / WKUP2 |" in lines
    absmax = next(s for s in parsed.slices if s.kind == "table" and "TSTG" in s.text)
    assert "| VDD | External main supply voltage 主电源电压 | -0.3 | 4.0 | V |" in absmax.text


def test_line_spans_are_exact_within_each_page(parsed: ParsedDocument) -> None:
    by_page: dict[int, list[tuple[int, int, str]]] = {}
    for s in parsed.slices:
        assert s.page is not None
        by_page.setdefault(s.page, []).append((s.line_start, s.line_end, s.text))
    assert sorted(by_page) == list(range(1, 31))
    for spans in by_page.values():
        expected = 1
        for start, end, text in spans:
            assert start == expected
            if "\n" in text:  # headings may join two visual lines into one
                assert end - start + 1 == text.count("\n") + 1
            expected = end + 1


def test_every_chunk_with_table_rows_repeats_the_header(parsed: ParsedDocument) -> None:
    chunks = chunk_slices(parsed.slices, ChunkConfig(max_tokens=120))
    pin_chunks = [c for c in chunks if c.has_table and "I/O FT" in c.text]
    assert len(pin_chunks) >= 4  # the pin table really was cut
    for c in pin_chunks:
        table = c.text[c.text.index("| Pin |") :] if "| Pin |" in c.text else ""
        assert table.startswith("| Pin | Name | Type | Alternate functions |\n| --- |"), c.text
    assert all(c.page is not None for c in chunks)


def test_search_prints_page_in_anchor(kb: KnowledgeBase) -> None:
    hit = kb.search("IWDG_KR 0xCCCC", limit=1).hits[0]
    assert hit.anchor.page is not None
    assert hit.anchor.location.endswith(f"(p. {hit.anchor.page})")
    assert hit.anchor.path.endswith("ckb32f7-datasheet.pdf")
