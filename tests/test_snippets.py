"""Snippets show the file's own text (issue 13 item 5), through a real KB."""

from __future__ import annotations

from pathlib import Path

from hypothesis import example, given, settings
from hypothesis import strategies as st

from clawkb.kb import KnowledgeBase, TextRecord
from clawkb.retrieve.snippet import (
    _caseless,
    _highlighted,
    _literal_spans,
    _patterns,
    highlight,
    make_snippet,
    pattern_for,
    prepare,
)
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


def test_caseless_text_needs_no_case_insensitive_regex() -> None:
    """The fast path (no IGNORECASE) is exact: checked against every code point.

    A character `_caseless` accepts is never matched by a lower-case ASCII
    letter under IGNORECASE, and the regex engine treats it as uncased.
    """
    import _sre  # the regex engine's own notion of "has case"
    import re

    safe = "".join(
        c for c in map(chr, range(0x80, 0x30000)) if not 0xD800 <= ord(c) < 0xE000 and _caseless(c)
    )
    assert "中" in safe and "，" in safe and "α" not in safe and "ı" not in safe
    assert re.findall("[a-z]", safe, re.IGNORECASE) == []
    assert not any(_sre.unicode_iscased(ord(c)) for c in safe)


@given(
    st.text(alphabet="abkisAKISı\u212a\u017fßΣσς中文阻抗ＳＴＭ３２ _-", max_size=60),
    st.lists(st.text(alphabet="abkisı\u017fσς中文阻抗", min_size=1, max_size=4), max_size=4),
)
@settings(max_examples=300, deadline=None)
def test_fast_and_folding_matches_agree(text: str, terms: list[str]) -> None:
    """The regex a text gets matches exactly what the case-insensitive one matches."""
    view, key = prepare(text), tuple(terms)
    reference, used = _patterns(key, True), pattern_for(view, key)
    if reference is None:
        assert used is None
        return
    assert used is not None
    assert [m.span() for m in used.finditer(view.norm)] == [
        m.span() for m in reference.finditer(view.norm)
    ]


def test_cjk_test_without_regex_agrees_on_every_code_point() -> None:
    from clawkb.retrieve.snippet import _CJK, _is_cjk

    for c in map(chr, range(0x30000)):
        assert _is_cjk(c) == bool(_CJK.match(c)), hex(ord(c))


@given(
    st.text(alphabet="abcab中文中阻抗 _-", max_size=80),
    st.lists(st.text(alphabet="abc中文阻抗", min_size=1, max_size=4), max_size=6),
)
@example("abab", ["ab"])  # adjacent matches
@example("aaaa", ["aa", "a"])
@example("中文中文中", ["中文", "文中"])  # overlapping terms
@example("abcabc", ["abc", "bc", "ca", "b"])  # nested terms
@example("abcd ab", ["ab", "abc"])  # the longest term at a position wins
@example("中文", ["中", "中文"])
@settings(max_examples=500, deadline=None)
def test_literal_search_finds_what_the_regex_finds(text: str, terms: list[str]) -> None:
    """Overlapping, nested and repeated terms: the same spans as the regex, in order."""
    key = tuple(terms)
    pat = _patterns(key, False)
    want = [m.span() for m in pat.finditer(text)] if pat is not None else []
    assert _literal_spans(text, _highlighted(key)) == want
