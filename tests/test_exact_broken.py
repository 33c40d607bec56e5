"""An identifier the text broke (line wrap, soft hyphen, markup escape) still counts as
an exact match (retrieve/exact.py, ``broken``). Real KB over tests/data/broken-identifiers."""

from __future__ import annotations

from pathlib import Path

import pytest

from clawkb.kb import KnowledgeBase
from clawkb.retrieve.exact import Anchor, anchors, spelled_in

DOCS = Path(__file__).resolve().parent / "data" / "broken-identifiers" / "docs"


@pytest.fixture(scope="module")
def kb(tmp_path_factory):
    kb = KnowledgeBase.open(tmp_path_factory.mktemp("broken") / "kb", create=True)
    kb.index([DOCS])
    yield kb
    kb.close()


def _anchor(name: str) -> Anchor:
    (a,) = anchors(name)
    return a


def test_spelled_in_allows_only_what_text_production_inserts():
    a = _anchor("ESP_BT_VS_PCA_OCF")
    assert spelled_in(a, "send ESP_BT_VS_\n    PCA_OCF now")  # wrapped with its indent
    assert spelled_in(a, "ESP\\_BT\\_VS\\_PCA\\_OCF")  # Markdown escapes
    assert spelled_in(a, "esp_bt_vs_\u00adpca_ocf")  # a soft hyphen (HTML &shy;), any case
    assert not spelled_in(a, "ESP_BT_VS_PCA_REQ_OCF")  # another name
    assert not spelled_in(a, "ESP_BT_VS_PCA_OCF_EXT")  # inside a longer name
    assert not spelled_in(a, "ESP BT VS PCA OCF")  # the separators are part of the spelling


@pytest.mark.parametrize(
    ("query", "page"),
    [
        ("ESP_BT_VS_DTM_RX_TEST_START_OCF", "hci-wrapped.txt"),
        ("ESP_BT_VS_PCA_OCF", "hci-wrapped.txt"),
        ("ESP_BT_VS_LMP_DBG_ENABLE_OCF", "hci-soft-hyphen.md"),
        ("ESP_BT_VS_LMP_DBG_ENABLE_OCF 是做什么用的？", "hci-soft-hyphen.md"),
    ],
)
def test_broken_spelling_is_first(kb, query, page):
    res = kb.search(query, mode="lexical", limit=5, explain=True)
    assert Path(res.hits[0].anchor.path).name == page
    exact = next(s for s in res.stages if "exact" in str(s))
    assert "broken" in str(exact)


def test_a_name_no_passage_spells_reorders_nothing(kb):
    # every part is in the KB, but no passage spells the name, broken or whole
    res = kb.search("ESP_BT_VS_PCA_DTM_OCF", mode="lexical", limit=5, explain=True)
    assert res.hits and "broken" not in str(res.stages)
