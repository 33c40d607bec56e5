"""Plain-text parser: paragraphs, exact line spans, titles."""

from __future__ import annotations

from pathlib import Path

import pytest

from clawkb.errors import UnsupportedFileError
from clawkb.parsers.text import TextParser


def parse_file(path: Path):
    return TextParser().parse(path.read_bytes(), str(path))


def test_paragraphs_with_exact_lines(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text(
        "\n  Board bring-up notes  \n\nFirst para line 1\nline 2\n\n\n第三段：时钟配置。\n   \n",
        encoding="utf-8",
    )
    doc = parse_file(path)
    lines = path.read_text(encoding="utf-8").split("\n")
    spans = [(s.line_start, s.line_end) for s in doc.slices]
    assert spans == [(2, 2), (4, 5), (8, 8)]
    for s in doc.slices:
        assert s.text == "\n".join(lines[s.line_start - 1 : s.line_end])
        assert s.kind == "text"
    assert doc.title == "Board bring-up notes"
    assert doc.encoding == "utf-8"


def test_crlf_file_keeps_line_numbers(tmp_path: Path) -> None:
    path = tmp_path / "win.log"
    path.write_bytes(b"a\r\nb\r\n\r\nc\r\n")
    doc = parse_file(path)
    assert [(s.text, s.line_start, s.line_end) for s in doc.slices] == [("a\nb", 1, 2), ("c", 4, 4)]


def test_title_falls_back_to_stem_and_is_capped(tmp_path: Path) -> None:
    empty = tmp_path / "empty-file.txt"
    empty.write_bytes(b"\n\n  \n")
    doc = parse_file(empty)
    assert doc.title == "empty-file"
    assert doc.slices == ()

    long = tmp_path / "long.txt"
    long.write_text("x" * 300 + "\n", encoding="utf-8")
    assert parse_file(long).title == "x" * 120


def test_gbk_file(tmp_path: Path) -> None:
    path = tmp_path / "gbk.txt"
    path.write_bytes("串口调试说明\n\n波特率设置为一一五二零零。\n".encode("gbk"))
    doc = parse_file(path)
    assert doc.encoding == "gb18030"
    assert doc.title == "串口调试说明"
    assert doc.slices[1].text == "波特率设置为一一五二零零。"
    assert doc.slices[1].line_start == 3


def test_binary_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "blob.txt"
    path.write_bytes(b"\x00\x01\x02binary\x00")
    with pytest.raises(UnsupportedFileError):
        parse_file(path)


def test_parser_declares_interface() -> None:
    assert TextParser.name == "text"
    assert {".txt", ".text", ".log"} <= set(TextParser.extensions)
    assert "text/plain" in TextParser.mime_types
