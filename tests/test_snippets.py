"""Snippets show the file's own text (issue 13 item 5), through a real KB."""

from __future__ import annotations

from pathlib import Path

from clawkb.kb import KnowledgeBase, TextRecord
from clawkb.retrieve.snippet import highlight, make_snippet
from clawkb.text import tokenize

DOC = """# 差分线

差分阻抗：100Ω±10%，单端阻抗：50Ω。ＳＴＭ３２ 的引脚见下表。

| 引脚 | 功能 |
|------|------|
| PA5 | SPI1_SCK |
| PA6 | SPI1_MISO |

{{#include ../listings/spi.rs}}

<div class="warning">Keep the SPI1_SCK trace short.</div>
"""


def _search(tmp_path: Path, query: str):  # type: ignore[no-untyped-def]
    with KnowledgeBase.open(tmp_path / "kb", create=True) as kb:
        kb.index_texts([TextRecord("diff.md", DOC)])
        return kb.search(query, limit=1).hits[0]


def test_full_width_text_kept_and_highlights_on_source_offsets(tmp_path: Path) -> None:
    hit = _search(tmp_path, "阻抗 stm32")
    assert "差分阻抗：100Ω±10%，单端阻抗：50Ω。" in hit.snippet  # not 阻抗:100Ω±10%,...
    assert "ＳＴＭ３２" in hit.snippet
    marked = {hit.snippet[s:e] for s, e in hit.highlights}
    assert marked == {"阻抗", "ＳＴＭ３２"}


def test_table_rows_readable_and_markup_noise_gone(tmp_path: Path) -> None:
    hit = _search(tmp_path, "SPI1_SCK PA5")
    assert "|---" not in hit.snippet and "| |" not in hit.snippet
    assert "PA5 | SPI1_SCK" in hit.snippet
    assert "{{#include" not in hit.snippet and "<div" not in hit.snippet
    assert "Keep the SPI1_SCK trace short." in hit.snippet
    assert "{{#include ../listings/spi.rs}}" in hit.text  # the stored text is untouched
    marked = {hit.snippet[s:e].lower() for s, e in hit.highlights}
    assert {"spi1_sck", "pa5"} <= marked <= set(tokenize("SPI1_SCK PA5"))


def test_expanding_normalisation_maps_back() -> None:
    text = "Use the ﬁle API; Straße and STRASSE; #include <stdio.h>"
    snip, spans = make_snippet(text, tokenize("file strasse stdio"))
    assert snip == text
    assert highlight(snip, spans, "[", "]") == (
        "Use the [ﬁle] API; [Straße] and [STRASSE]; #include <[stdio].h>"
    )
