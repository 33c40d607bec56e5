"""A query that is a section title returns that section (retrieve/headings.py).

A real lexical KB of a slice of the ESP-IDF programming guide (reStructuredText):
generic titles such as "Overview" or "API Reference" occur in several pages and
inside longer headings; each must bring back a section with exactly that title.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from clawkb.kb import KnowledgeBase
from clawkb.retrieve.headings import headings_of, match
from clawkb.text import tokenize

ROOT = Path(__file__).resolve().parents[1]
SLICE = ROOT / "tests" / "data" / "esp-idf-slice" / "en"
NOTES = ROOT / "examples" / "notes"


@pytest.fixture(scope="module")
def esp(tmp_path_factory):
    pytest.importorskip("docutils")
    kb = KnowledgeBase.open(tmp_path_factory.mktemp("esp") / "kb", create=True)
    kb.index([SLICE])
    yield kb
    kb.close()


def _titles(kb: KnowledgeBase) -> dict[str, set[str]]:
    """Every heading in the KB, with the files that have it."""
    out: dict[str, set[str]] = {}
    for path, heads in kb.conn.execute(
        "SELECT d.path, c.heading_path FROM chunks c JOIN documents d ON d.id = c.doc_id"
    ):
        import json

        hp = json.loads(heads)
        for h in hp:
            out.setdefault(h, set()).add(path)
    return out


def test_match_is_f1_of_both_coverages():
    def q(text: str) -> list[dict[str, float]]:
        return [dict.fromkeys(tokenize(text), 1.0)]

    w: dict[str, float] = {}  # every token weighs 1
    assert match(q("Summary"), ["Summary"], w) == pytest.approx(1.0)
    longer = match(q("Summary"), ["Summary of changes"], w)
    assert 0 < longer < 1
    assert match(q("Summary"), ["API Reference"], w) == 0.0
    # a partial query against the full heading scores below the full query
    assert match(q("API"), ["API Reference"], w) < match(q("API Reference"), ["API Reference"], w)


def test_match_floor_needs_both_coverages():
    def q(text: str) -> list[dict[str, float]]:
        return [dict.fromkeys(tokenize(text), 1.0)]

    w: dict[str, float] = {}
    assert match(q("Summary"), ["Summary"], w, floor=0.8) == pytest.approx(1.0)
    # the query is a small part of a longer heading
    assert match(q("Summary"), ["Summary of changes"], w, floor=0.8) == 0.0
    # the heading is a small part of a longer query (a question that mentions it)
    question = q("how much flash memory does the board have")
    assert match(question, ["Flash memory"], w) > 0
    assert match(question, ["Flash memory"], w, floor=0.8) == 0.0
    # nearly the title: one word of four missing still reaches the floor
    assert match(q("Flash Encryption Process"), ["Flash Encryption Process Overview"], w, 0.7) > 0


def test_glued_parent_heading_counts_only_when_the_passage_starts_it():
    path = ("Clock Tree", "Introduction")
    assert headings_of(path, "Clock Tree\n==========\n\nIntroduction\n----\nText") == [
        "Introduction",
        "Clock Tree",
    ]
    assert headings_of(path, "Introduction\n----\nText about Clock Tree") == ["Introduction"]


def test_section_titles_generic_or_not_return_their_own_section(esp):
    titles = _titles(esp)
    generic = {t for t, files in titles.items() if len(files) >= 2}
    assert {"Overview", "API Reference"} <= generic, generic
    missed_on, missed_off = [], []
    for title in sorted(titles):
        # the stage as shipped (on, with its match floor), and off
        for off, missed in (({}, missed_on), ({"headings": False}, missed_off)):
            hits = esp.search(title, mode="lexical", limit=5, snippets=False, **off).hits
            # the section itself, or the passage that starts it (a heading-only
            # section glued to its first subsection)
            top = headings_of(hits[0].anchor.heading_path, hits[0].text) if hits else []
            if title not in top:
                missed.append((title, top))
    assert missed_on == []
    # the stage is what does it: plain BM25F puts a page's other sections above
    # the section a page title names ("Clock Tree" -> its "API Usage" section)
    assert "Clock Tree" in {t for t, _ in missed_off}, missed_off


@pytest.fixture(scope="module")
def notes(tmp_path_factory):
    kb = KnowledgeBase.open(tmp_path_factory.mktemp("notes") / "kb", create=True)
    kb.index([NOTES])
    yield kb
    kb.close()


def _top(kb: KnowledgeBase, query: str, **opts) -> tuple[str, str]:
    hit = kb.search(query, mode="lexical", limit=5, snippets=False, **opts).hits[0]
    return Path(hit.anchor.path).name, hit.anchor.heading_path[-1]


def test_a_title_typed_lands_on_its_section_by_default(notes):
    """The stage is on by default: a (nearly) typed title finds its section, English or
    Chinese, where plain BM25F puts a shorter heading with the same words first."""
    query = "40-pin 扩展排针定义"  # the heading is "40-pin 扩展排针（J10）定义"
    assert _top(notes, query, headings=False) == ("gpio-header.md", "排针定义表")
    assert _top(notes, query) == ("gpio-header.md", "40-pin 扩展排针（J10）定义")


def test_a_question_that_mentions_heading_words_is_not_lifted(notes):
    """A question shares words with a heading but is not that heading: the floor keeps
    the ranking the channels gave; without the floor the heading's passage jumps ahead."""
    question = "How much flash memory does the STM32F401RE have?"

    def ids(**opts) -> list[str]:
        hits = notes.search(question, mode="lexical", limit=5, snippets=False, **opts).hits
        return [h.anchor.id for h in hits]

    assert ids() == ids(headings=False)
    lifted = _top(notes, question, headings_floor=0.0)
    assert lifted == ("registers.md", "STM32F401RE memory map and registers")
    assert _top(notes, question) != lifted
