"""An identifier finds the passage that spells it, however the source wrote it.

The text broke it (line wrap, soft hyphen, markup escape): it still counts as an
exact match (retrieve/exact.py, ``broken``; tests/data/broken-identifiers). The
source named it only in a directive (``.. doxygendefine::``) or a list body under
``.. list::``: the RST parser keeps it (tests/data/esp-idf-api-slice, real pages).
Real KBs, lexical mode (no model needed)."""

from __future__ import annotations

import csv
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


API = Path(__file__).resolve().parent / "data" / "esp-idf-api-slice"


def _api_rows() -> list[tuple[str, str]]:
    with open(API / "golden.tsv", encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    return [(r["query"], r["expect"]) for r in rows]


@pytest.fixture(scope="module")
def api(tmp_path_factory):
    kb = KnowledgeBase.open(tmp_path_factory.mktemp("api") / "kb", create=True)
    kb.index([API / "en"])
    yield kb
    kb.close()


def test_api_reference_names_are_found_where_the_page_spells_them(api):
    """Real pages: a macro named only by ``.. doxygendefine::``, a field list written
    right under ``.. list::``. The first hit is the page and holds the name itself."""
    rows = _api_rows()
    assert len(rows) >= 20
    for query, page in rows:
        (name,) = (a.text for a in anchors(query))
        hit = api.search(query, mode="lexical", limit=3).hits[0]
        assert hit.anchor.path.replace("\\", "/").endswith(page), query
        assert name.lower() in api.chunk(hit.anchor.id).text.lower(), query
