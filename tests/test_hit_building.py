"""Matched terms take shortcuts (character sets, lazily normalised headings): same answer."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from clawkb.retrieve.hits import _matched
from clawkb.retrieve.snippet import prepare
from clawkb.store.repo import ChunkRow
from clawkb.text import normalize

ROOT = Path(__file__).resolve().parents[1]
CHARS = "阻抗差分线上电时序abc_1 "


def _row(text: str, title: str, heading: tuple[str, ...]) -> ChunkRow:
    return ChunkRow(1, 1, "a.md", title, "x", 0, text, heading, 1, 1, None, "text", None, {})


@given(
    st.text(alphabet=CHARS, max_size=50),
    st.text(alphabet=CHARS, max_size=8),
    st.lists(st.text(alphabet=CHARS, max_size=4), max_size=2),
    st.lists(st.text(alphabet=CHARS, min_size=1, max_size=3), max_size=20, unique=True),
)
@settings(max_examples=400, deadline=None)
def test_matched_terms_equal_the_plain_definition(
    text: str, title: str, heading: list[str], terms: list[str]
) -> None:
    row = _row(text, title, tuple(heading))
    view = prepare(text)
    head = normalize(" ".join((title, *heading)))
    want = tuple(t for t in terms if t in view.norm or t in head)
    assert _matched(tuple(terms), view, row) == want


def test_ranking_only_hits_keep_ranking_and_confidence(tmp_path: Path) -> None:
    """``snippets=False`` (evaluation): same ranking, scores, anchors and confidence."""
    from clawkb.kb import KnowledgeBase

    with KnowledgeBase.open(tmp_path / "kb", create=True) as kb:
        kb.index([str(ROOT / "examples" / "notes")])
        for q in ("DDR 走线阻抗", "上电时序", "UART console baud rate", "板子上电后不开机怎么排查"):
            full = kb.search(q, limit=40)
            light = kb.search(q, limit=40, snippets=False)
            assert len(full.hits) > 1
            assert [(h.anchor, h.score, h.rank) for h in light.hits] == [
                (h.anchor, h.score, h.rank) for h in full.hits
            ]
            assert light.confidence == full.confidence
            assert light.hits[0].matched_terms == full.hits[0].matched_terms != ()
            assert all(h.snippet == "" and h.highlights == () for h in light.hits)
            assert all(h.matched_terms == () for h in light.hits[1:])
