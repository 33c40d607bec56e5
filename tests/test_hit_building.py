"""Matched terms take shortcuts (character sets, lazily normalised headings): same answer."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from clawkb.retrieve.hits import _matched
from clawkb.retrieve.snippet import prepare
from clawkb.store.repo import ChunkRow
from clawkb.text import normalize

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
