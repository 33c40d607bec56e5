"""Chunker: structure-first packing, exact spans, splitting rules, no lost text."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clawkb.errors import ConfigError
from clawkb.ingest.chunker import ChunkConfig, chunk_slices
from clawkb.parsers.markdown import MarkdownParser
from clawkb.text.estimate import estimate_tokens
from clawkb.types import Chunk, Slice

SENTENCES = [
    "时钟树由外部晶振提供八兆赫兹的输入。",
    "锁相环把频率倍增到七十二兆赫兹！",
    "为什么串口没有输出？",
    "请先检查引脚复用配置；",
    "The PLL multiplies the input clock.",
    "Check the AFIO remap register first!",
]


def nows(text: str) -> str:
    return "".join(text.split())


def is_subsequence(needle: str, haystack: str) -> bool:
    it = iter(haystack)
    return all(ch in it for ch in needle)


def test_estimate_tokens() -> None:
    assert estimate_tokens("") == 0
    assert estimate_tokens("中" * 500) == 350  # DESIGN: ~500 CJK chars per chunk
    assert estimate_tokens("hello world") == 3  # 2 words x 1.3
    assert estimate_tokens("x" * 40) == 10  # long identifiers ~4 chars a token
    assert estimate_tokens("a, b") == 4  # 2 x 1.3 + 0.5, rounded up


def test_config_is_validated() -> None:
    with pytest.raises(ConfigError):
        ChunkConfig(max_tokens=0)
    with pytest.raises(ConfigError):
        ChunkConfig(overlap=0.9)


def test_small_slices_pack_within_a_section_only() -> None:
    slices = [
        Slice("Intro", 1, 1, ("A",)),
        Slice("para one", 3, 3, ("A",)),
        Slice("print(1)", 5, 5, ("A",), kind="code", language="python"),
        Slice("other section", 8, 8, ("A", "B")),
    ]
    first, second = chunk_slices(slices)
    assert first.text == "Intro\n\npara one\n\nprint(1)"
    assert (first.line_start, first.line_end) == (1, 5)
    assert first.heading_path == ("A",)
    assert first.has_code and first.language == "python"
    assert first.kind == "mixed"
    assert (second.text, second.heading_path) == ("other section", ("A", "B"))


def test_pages_are_not_merged() -> None:
    slices = [Slice("p1", 1, 1, page=1), Slice("p2", 1, 1, page=2)]
    assert [c.page for c in chunk_slices(slices)] == [1, 2]


def test_table_split_repeats_header() -> None:
    rows = [f"| PA{i} | USART{i}_TX alternate function |" for i in range(40)]
    lines = ["| Pin | Function |", "|-----|----------|", *rows]
    table = Slice("\n".join(lines), 10, 10 + len(lines) - 1, ("Pins",), kind="table")
    chunks = chunk_slices([table], ChunkConfig(max_tokens=60))
    assert len(chunks) > 2
    seen: list[str] = []
    for c in chunks:
        got = c.text.split("\n")
        assert got[:2] == lines[:2]
        assert c.kind == "table" and c.has_table
        assert estimate_tokens(c.text) <= 60
        body = got[2:]
        seen.extend(body)
        # the span covers exactly the rows in this piece (first piece: from the header)
        first_row = 10 + lines.index(body[0])
        assert c.line_end == 10 + lines.index(body[-1])
        assert c.line_start == (10 if c is chunks[0] else first_row)
    assert seen == rows  # every row exactly once, in order


def test_chinese_sentence_split_with_overlap() -> None:
    text = "".join(SENTENCES[i % 4] for i in range(40))  # one long line, no newlines
    chunks = chunk_slices([Slice(text, 7, 7)], ChunkConfig(max_tokens=60, overlap=0.25))
    assert len(chunks) > 3
    for c in chunks:
        assert c.text[-1] in "。！？；"  # cut at sentence ends
        assert (c.line_start, c.line_end) == (7, 7)
        assert estimate_tokens(c.text) <= 60
    for prev, nxt in pairwise(chunks):
        last_sentence = next(s for s in SENTENCES if prev.text.endswith(s))
        assert nxt.text.startswith(last_sentence)  # overlap carries a sentence
    assert is_subsequence(nows(text), "".join(c.text for c in chunks))


def test_no_overlap_when_disabled() -> None:
    text = "".join(SENTENCES[i % 4] for i in range(40))
    chunks = chunk_slices([Slice(text, 1, 1)], ChunkConfig(max_tokens=60, overlap=0.0))
    assert "".join(c.text for c in chunks) == text


def test_code_is_split_by_whole_lines(tmp_path: Path) -> None:
    code_lines = [f"    reg_write(0x4001_{i:04d}, CONFIG_VALUE_{i});" for i in range(60)]
    source = "# Init\n\n```c\n" + "\n".join(code_lines) + "\n```\n"
    path = tmp_path / "init.md"
    path.write_text(source, encoding="utf-8")
    file_lines = source.split("\n")
    doc = MarkdownParser().parse(path.read_bytes(), str(path))
    chunks = chunk_slices(doc.slices, ChunkConfig(max_tokens=80, overlap=0.1))
    assert len(chunks) > 3
    assert chunks[0].text.startswith("Init\n\n")  # the heading is glued to the first piece
    for c in chunks:
        assert c.has_code and c.language == "c"
        body = c.text.split("\n")[2:] if c is chunks[0] else c.text.split("\n")
        assert body == file_lines[c.line_end - len(body) : c.line_end]
        assert estimate_tokens(c.text) <= 80
    assert chunks[-1].line_end == len(code_lines) + 3


def test_line_spans_exact_for_real_markdown(tmp_path: Path) -> None:
    sections = []
    for n in range(6):
        paragraph = "\n".join(
            f"Line {n}.{k} of section text about clocks 时钟。" for k in range(12)
        )
        sections.append(f"## Section {n}\n\n{paragraph}\n\n- item a{n}\n- item b{n}\n")
    table = "| a | b |\n|---|---|\n" + "\n".join(f"| r{i} | v{i} |" for i in range(30))
    source = "# Doc\n\nIntro.\n\n" + "\n".join(sections) + "\n## Table\n\n" + table + "\n"
    path = tmp_path / "doc.md"
    path.write_text(source, encoding="utf-8")
    file_lines = source.split("\n")
    doc = MarkdownParser().parse(path.read_bytes(), str(path))
    chunks = chunk_slices(doc.slices, ChunkConfig(max_tokens=50))
    assert len(chunks) > 10
    for c in chunks:
        span = "\n".join(file_lines[c.line_start - 1 : c.line_end])
        got = c.text.split("\n")
        assert got[-1] in span
        if not (c.kind == "table" and c.line_start > doc.slices[-1].line_start):
            assert got[0] in span
        assert estimate_tokens(c.text) <= 50


def test_over_long_word_is_hard_split() -> None:
    blob = "A" * 5000  # base64-like, no spaces or sentence ends
    chunks = chunk_slices([Slice(blob, 1, 1)], ChunkConfig(max_tokens=100, overlap=0.0))
    assert "".join(c.text for c in chunks) == blob
    assert all(estimate_tokens(c.text) <= 100 for c in chunks)


def test_empty_slices_give_no_chunks() -> None:
    assert chunk_slices([Slice("  \n ", 1, 2), Slice("", 3, 3)]) == []


# -- property test -------------------------------------------------------------

WORDS = st.sampled_from(
    ["alpha", "GPIO", "0x4001_3000", "v5.15", "中断", "时钟。", "配置！", "ok.", "why?", "x;"]
)
LINE = st.lists(WORDS, min_size=1, max_size=25).map(" ".join)
HEADINGS = st.sampled_from([(), ("A",), ("A", "B"), ("C",)])


@st.composite
def slice_lists(draw: st.DrawFn) -> list[Slice]:
    slices: list[Slice] = []
    line = 1
    for _ in range(draw(st.integers(1, 8))):
        kind = draw(st.sampled_from(["text", "code", "list", "table"]))
        lines = draw(st.lists(LINE, min_size=1, max_size=30))
        if kind == "table":
            lines = ["| h1 | h2 |", "|---|---|", *(f"| {x} |" for x in lines)]
        text = "\n".join(lines)
        end = line + len(lines) - 1
        slices.append(Slice(text, line, end, draw(HEADINGS), kind=kind))
        line = end + draw(st.integers(1, 3))
    return slices


def is_atom(c: Chunk) -> bool:
    """A table piece with a single body row cannot be cut further."""
    return c.kind == "table" and len(c.text.split("\n")) <= 3


@settings(max_examples=200, deadline=None)
@given(
    slices=slice_lists(),
    max_tokens=st.integers(15, 200),
    overlap=st.sampled_from([0.0, 0.15, 0.3]),
)
def test_chunking_properties(slices: list[Slice], max_tokens: int, overlap: float) -> None:
    cfg = ChunkConfig(max_tokens=max_tokens, overlap=overlap)
    chunks = chunk_slices(slices, cfg)
    assert chunks
    # no text lost, order kept (overlap and repeated headers only add text)
    assert is_subsequence(
        nows("".join(s.text for s in slices)), nows("".join(c.text for c in chunks))
    )
    for c in chunks:
        assert c.text.strip()
        assert estimate_tokens(c.text) <= max_tokens or is_atom(c)
        owners = [s for s in slices if s.heading_path == c.heading_path]
        assert any(s.line_start <= c.line_start for s in owners)
        assert any(c.line_end <= s.line_end for s in owners)
        assert c.line_start <= c.line_end
    # chunks never straddle a heading change: sections appear in slice order
    section_order = [s.heading_path for s in slices]
    collapsed = [p for i, p in enumerate(section_order) if i == 0 or p != section_order[i - 1]]
    chunk_paths = [c.heading_path for c in chunks]
    assert [p for i, p in enumerate(chunk_paths) if i == 0 or p != chunk_paths[i - 1]] == collapsed
