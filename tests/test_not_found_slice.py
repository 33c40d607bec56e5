""" "No match" on real engineering docs with vectors on (issue 19 item 5).

A KB of four committed ESP-IDF pages (tests/data/esp-idf-slice, English) embedded
with the shipped model. Their golden queries — Chinese headings of their sections,
identifiers alone and inside Chinese questions — are answered; generated nonsense,
an off-topic question and the headings of the two pages left out of the KB get
"no match". The same construction as bench/notfound_rates.py, on a slice.
"""

from __future__ import annotations

import csv
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from clawkb.kb import KnowledgeBase

pytest.importorskip("onnxruntime")

SLICE = Path(__file__).resolve().parent / "data" / "esp-idf-slice"
#: Pages left out of the KB: their headings are the unanswerable questions.
LEFT_OUT = ("api-reference/protocols/icmp_echo.rst", "api-reference/system/mm_sync.rst")
NONSENSE = [
    "xqzv wplk jjrrtt",
    "覥縴蟔摷",
    "asdfgasdfg",
    "How long should I bake a sourdough loaf?",
    "红烧肉怎么做才好吃？",
]


def _golden() -> list[dict[str, str]]:
    with open(SLICE / "golden.tsv", encoding="utf-8") as fh:
        return list(csv.DictReader(fh, delimiter="\t"))


ANSWERABLE = [
    g["query"]
    for g in _golden()
    if g["expect"] not in LEFT_OUT and g["kind"] in ("zh2en", "ident", "ident_zh")
]
IDENTIFIER = [
    g["query"] for g in _golden() if g["expect"] not in LEFT_OUT and g["kind"].startswith("ident")
]
UNANSWERABLE = [
    g["query"] for g in _golden() if g["expect"] in LEFT_OUT and g["kind"] in ("zh2en", "en2zh")
]


@pytest.fixture(scope="module")
def kb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KnowledgeBase]:
    from clawkb.embed.run import embed_kb

    root = tmp_path_factory.mktemp("slice")
    docs = root / "en"
    for page in (SLICE / "en").rglob("*.rst"):
        rel = page.relative_to(SLICE / "en").as_posix()
        if rel not in LEFT_OUT:
            (docs / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(page, docs / rel)
    with KnowledgeBase.open(root / "kb", create=True) as kb:
        kb.index([docs])
        embed_kb(kb)
        yield kb


def test_the_slice_has_both_kinds() -> None:
    assert len(ANSWERABLE) >= 15 and len(IDENTIFIER) >= 8 and len(UNANSWERABLE) == 4


def test_answerable_queries_are_answered(kb: KnowledgeBase) -> None:
    # the target is 95 % (bench/notfound_rates.py: 144 held-out queries per language);
    # on 17 queries one Chinese heading of an English section may miss
    abstained = [q for q in ANSWERABLE if kb.search(q, limit=3).abstained]
    assert len(abstained) <= 1, f"no match for answerable queries: {abstained}"
    assert not set(IDENTIFIER) & set(abstained)  # a named identifier the KB holds: answered


@pytest.mark.parametrize("q", NONSENSE)
def test_nonsense_is_no_match(kb: KnowledgeBase, q: str) -> None:
    res = kb.search(q, limit=3)
    assert res.abstained and not res.hits, [h.title for h in res.hits]


@pytest.mark.xfail(
    strict=True,
    reason="known gap (bench/results/notfound-rates.md, left_out): a heading of a page the"
    " KB lacks is answered by a neighbouring page ('Memory Synchronization Driver' by"
    " 'Asynchronous Memory Copy')",
)
def test_headings_of_left_out_pages_are_no_match(kb: KnowledgeBase) -> None:
    answered = {q: [h.title for h in r.hits] for q in UNANSWERABLE
                if not (r := kb.search(q, limit=3)).abstained}  # fmt: skip
    assert not answered, f"answered although their page is not in the KB: {answered}"
