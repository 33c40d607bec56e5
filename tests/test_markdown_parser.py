"""Markdown parser on real files: blocks, heading paths, exact line spans."""

from __future__ import annotations

from pathlib import Path

from clawkb.parsers.markdown import MarkdownParser
from clawkb.types import Link, ParsedDocument, Slice

DOC = """\
---
title: STM32 笔记
tags: [mcu, uart]
date: 2024-03-01
---
# Board Guide

Intro with a [datasheet](https://st.com/ds.pdf "DS") and [[Pin Map|pins]].
Second line ![diagram](img/d.png) here <!-- secret --> end.

## 时钟配置

- HSE 8 MHz
- PLL x9
  continued line
  - nested item

- after a blank line

| Pin | Function |
|-----|:--------:|
| PA9 | USART1_TX |
| PA10 | [RX](rx.md) |

### Code

```c
# define not a heading
int main(void) { return 0; }
```

## UART

> Note: quoted
> text

~~~python title="x"
print("unclosed")
"""


def parse(tmp_path: Path, text: str, name: str = "guide.md") -> tuple[ParsedDocument, list[str]]:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    lines = path.read_text(encoding="utf-8").split("\n")
    return MarkdownParser().parse(path.read_bytes(), str(path)), lines


def by_kind(doc: ParsedDocument, kind: str) -> list[Slice]:
    return [s for s in doc.slices if s.kind == kind]


def test_front_matter_and_title(tmp_path: Path) -> None:
    doc, _ = parse(tmp_path, DOC)
    assert doc.title == "STM32 笔记"
    assert doc.metadata == {"title": "STM32 笔记", "tags": ["mcu", "uart"], "date": "2024-03-01"}
    assert doc.warnings == ()
    assert doc.slices[0].text == "Board Guide"
    assert doc.slices[0].line_start == 6  # front matter lines count


def test_heading_paths(tmp_path: Path) -> None:
    doc, _ = parse(tmp_path, DOC)
    paths = {s.text.split("\n")[0]: s.heading_path for s in doc.slices}
    assert paths["Board Guide"] == ("Board Guide",)
    assert paths["时钟配置"] == ("Board Guide", "时钟配置")
    assert paths["Code"] == ("Board Guide", "时钟配置", "Code")
    assert paths["UART"] == ("Board Guide", "UART")  # new H2 pops H2 and H3
    assert paths["Note: quoted"] == ("Board Guide", "UART")


def test_every_slice_has_exact_lines(tmp_path: Path) -> None:
    doc, lines = parse(tmp_path, DOC)
    for s in doc.slices:
        assert 1 <= s.line_start <= s.line_end <= len(lines)
        if s.kind in ("list", "table", "code"):
            assert s.text.count("\n") == s.line_end - s.line_start
    code = by_kind(doc, "code")[0]
    assert lines[code.line_start - 1] == "# define not a heading"
    assert lines[code.line_end - 1] == "int main(void) { return 0; }"


def test_links_images_and_comments(tmp_path: Path) -> None:
    doc, _ = parse(tmp_path, DOC)
    intro = doc.slices[1]
    assert intro.text == "Intro with a datasheet and pins.\nSecond line diagram here  end."
    assert intro.links == (  # document order
        Link("https://st.com/ds.pdf", "datasheet", "url"),
        Link("Pin Map", "pins", "wiki"),
    )
    assert (intro.line_start, intro.line_end) == (8, 9)


def test_list_is_one_slice(tmp_path: Path) -> None:
    doc, lines = parse(tmp_path, DOC)
    (lst,) = by_kind(doc, "list")
    assert lst.text.splitlines()[0] == "- HSE 8 MHz"
    assert lst.text.splitlines()[-1] == "- after a blank line"
    assert lines[lst.line_start - 1] == "- HSE 8 MHz"
    assert lines[lst.line_end - 1] == "- after a blank line"


def test_table_is_whole(tmp_path: Path) -> None:
    doc, _ = parse(tmp_path, DOC)
    (table,) = by_kind(doc, "table")
    assert table.text.split("\n") == [
        "| Pin | Function |",
        "|-----|:--------:|",
        "| PA9 | USART1_TX |",
        "| PA10 | RX |",
    ]
    assert table.links == (Link("rx.md", "RX", "url"),)
    assert table.heading_path == ("Board Guide", "时钟配置")


def test_fences(tmp_path: Path) -> None:
    doc, lines = parse(tmp_path, DOC)
    c_code, py_code = by_kind(doc, "code")
    assert c_code.language == "c"
    assert "# define not a heading" in c_code.text
    assert all(s.text != "define not a heading" for s in doc.slices)
    assert py_code.language == "python"
    assert py_code.text == 'print("unclosed")'  # unclosed fence runs to EOF
    assert py_code.line_start == len(lines) - 1


def test_title_from_h1_then_stem(tmp_path: Path) -> None:
    doc, _ = parse(tmp_path, "intro\n\n# First\n\n# Second\n", "a.md")
    assert doc.title == "First"
    doc, _ = parse(tmp_path, "## Only H2\n\ntext\n", "my-notes.md")
    assert doc.title == "my-notes"


def test_setext_headings(tmp_path: Path) -> None:
    doc, _ = parse(tmp_path, "Main Title\n==========\n\nSub\n---\n\nbody text\n")
    assert doc.title == "Main Title"
    assert [(s.text, s.line_start, s.line_end, s.heading_path) for s in doc.slices] == [
        ("Main Title", 1, 2, ("Main Title",)),
        ("Sub", 4, 5, ("Main Title", "Sub")),
        ("body text", 7, 7, ("Main Title", "Sub")),
    ]


def test_malformed_front_matter_is_a_warning(tmp_path: Path) -> None:
    doc, _ = parse(tmp_path, "---\ntitle: [unclosed\n---\n# Real\n\nbody\n")
    assert len(doc.warnings) == 1
    assert "front matter" in doc.warnings[0]
    assert doc.metadata == {}
    assert doc.title == "Real"
    assert [s.line_start for s in doc.slices] == [4, 6]


def test_rule_at_top_without_closing_is_not_front_matter(tmp_path: Path) -> None:
    doc, _ = parse(tmp_path, "---\n\nplain text\n")
    assert [(s.text, s.line_start) for s in doc.slices] == [("plain text", 3)]


def test_heading_levels_pop_correctly(tmp_path: Path) -> None:
    text = "# A\n## B\n### C\ntext c\n# D\n### E\ntext e\n## F ##\ntext f\n"
    doc, _ = parse(tmp_path, text)
    paths = [(s.text, s.heading_path) for s in doc.slices]
    assert paths == [
        ("A", ("A",)),
        ("B", ("A", "B")),
        ("C", ("A", "B", "C")),
        ("text c", ("A", "B", "C")),
        ("D", ("D",)),
        ("E", ("D", "E")),
        ("text e", ("D", "E")),
        ("F", ("D", "F")),
        ("text f", ("D", "F")),
    ]


def test_hashtag_is_not_a_heading_and_rules_are_dropped(tmp_path: Path) -> None:
    doc, _ = parse(tmp_path, "#tag text\n\n***\n\n- - -\n\nafter\n")
    assert [(s.text, s.heading_path) for s in doc.slices] == [("#tag text", ()), ("after", ())]


def test_badge_inside_link_autolink_and_image_embed(tmp_path: Path) -> None:
    text = "[![CI](https://ci/badge.svg)](https://ci/run) see <https://docs.rs> ![[wiring.png]]\n"
    doc, _ = parse(tmp_path, text)
    (para,) = doc.slices
    assert para.text == "CI see https://docs.rs "
    assert para.links == (
        Link("https://ci/run", "CI", "url"),
        Link("https://docs.rs", "https://docs.rs", "url"),
    )


def test_comment_block_and_indented_code(tmp_path: Path) -> None:
    text = "para\n\n<!--\nhidden\n-->\n\n    $ make flash\n    $ make run\n\nend\n"
    doc, _ = parse(tmp_path, text)
    assert [(s.text, s.kind, s.line_start, s.line_end) for s in doc.slices] == [
        ("para", "text", 1, 1),
        ("$ make flash\n$ make run", "code", 7, 8),
        ("end", "text", 10, 10),
    ]


def test_paragraph_interrupted_by_list_and_table(tmp_path: Path) -> None:
    text = "Pins:\n- PA9\n- PA10\n\nRegisters:\n| a | b |\n|---|---|\n| 1 | 2 |\n"
    doc, _ = parse(tmp_path, text)
    assert [(s.kind, s.line_start, s.line_end) for s in doc.slices] == [
        ("text", 1, 1),
        ("list", 2, 3),
        ("text", 5, 5),
        ("table", 6, 8),
    ]


def test_crlf_and_gbk_markdown(tmp_path: Path) -> None:
    path = tmp_path / "gbk.md"
    path.write_bytes("# 标题\r\n\r\n中文正文内容，测试编码。\r\n".encode("gbk"))
    doc = MarkdownParser().parse(path.read_bytes(), str(path))
    assert doc.encoding == "gb18030"
    assert doc.title == "标题"
    assert [(s.text, s.line_start) for s in doc.slices] == [
        ("标题", 1),
        ("中文正文内容，测试编码。", 3),
    ]


def test_tabs_inside_fenced_code_are_kept(tmp_path: Path) -> None:
    text = "# Make\n\n```make\nall: app\n\tcc -o app main.c\n```\n"
    doc, lines = parse(tmp_path, text)
    (code,) = by_kind(doc, "code")
    assert code.text == "all: app\n\tcc -o app main.c"  # a Makefile recipe needs its tab
    assert lines[code.line_end - 1] == "\tcc -o app main.c"


def test_adjacent_lists_with_other_markers_are_one_slice(tmp_path: Path) -> None:
    doc, _ = parse(tmp_path, "- step\n1. first\n2. second\n\n* more\n\nafter\n")
    assert [(s.kind, s.line_start, s.line_end) for s in doc.slices] == [
        ("list", 1, 5),
        ("text", 7, 7),
    ]


def test_table_ends_at_a_line_without_pipe(tmp_path: Path) -> None:
    text = "| a | b |\n|---|---|\n| 1 | 2 |\nNote: values in volts.\n"
    doc, _ = parse(tmp_path, text)
    assert [(s.kind, s.line_start, s.line_end, s.text) for s in doc.slices] == [
        ("table", 1, 3, "| a | b |\n|---|---|\n| 1 | 2 |"),
        ("text", 4, 4, "Note: values in volts."),
    ]


def test_front_matter_closed_by_dots_and_unclosed_comment(tmp_path: Path) -> None:
    doc, _ = parse(tmp_path, "---\nboard: nucleo\n...\nbody\n\n<!-- draft\nhidden\n")
    assert doc.metadata == {"board": "nucleo"}
    assert [(s.text, s.line_start) for s in doc.slices] == [("body", 4)]


def test_html_block_and_reference_definition_stay_text(tmp_path: Path) -> None:
    text = '<p align="center">\n  <b>Logo</b>\n</p>\n\n[ds]: https://st.com/ds.pdf\n'
    doc, _ = parse(tmp_path, text)
    assert [(s.kind, s.text, s.line_start, s.line_end) for s in doc.slices] == [
        ("text", "Logo", 2, 2),  # the block's text, tags removed, on its own line
        ("text", "[ds]: https://st.com/ds.pdf", 5, 5),
    ]
    assert doc.slices[1].text == "[ds]: https://st.com/ds.pdf"
