"""``nfkc`` / ``normalize`` take shortcuts; they must equal ``unicodedata`` exactly."""

from __future__ import annotations

import unicodedata

from hypothesis import given, settings
from hypothesis import strategies as st

from clawkb.text.normalize import _WIDE, _narrow, nfkc, normalize

WIDE = [chr(c) for c in (0x3000, *range(0xFF01, 0xFF5F))]


def test_wide_forms_map_to_their_whole_decomposition() -> None:
    for ch in map(chr, range(0x3000, 0x10000)):
        wide = _WIDE.fullmatch(ch) is not None
        assert wide == (ch in WIDE), hex(ord(ch))
        if wide:  # the shortcut is exact only for a one-character decomposition
            assert unicodedata.decomposition(ch) == f"<wide> {ord(_narrow(ch)):04X}"


# full-width forms beside what they could interact with: combining marks (reordering,
# composition), Hangul jamo, ligatures, other compatibility forms, CJK and ASCII
ALPHABET = (
    "".join(WIDE[::3])
    + "ａＡ０，：；（）\u3000"
    + ("ae\u0301\u0327\u0300\u1100\u1161\u11a8가ﬁ①㎏½Ω\u212b中文阻抗。、《》 _-Straße")
)


@given(st.text(alphabet=ALPHABET, max_size=40))
@settings(max_examples=500, deadline=None)
def test_nfkc_equals_unicodedata(text: str) -> None:
    assert nfkc(text) == unicodedata.normalize("NFKC", text)
    assert normalize(text) == unicodedata.normalize("NFKC", text).casefold()


@given(st.text(max_size=30))
@settings(max_examples=300, deadline=None)
def test_nfkc_equals_unicodedata_on_any_text(text: str) -> None:
    assert nfkc(text) == unicodedata.normalize("NFKC", text)
