"""Section titles matched in the model's space (retrieve/titles.py) and the fusion rules around it.

A real KB of the committed ESP-IDF slice (English pages), real e5-small
vectors: a Chinese section title must bring back the English section with
that title through the title channel, and a question must not get the channel.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from clawkb.kb import KnowledgeBase
from clawkb.retrieve.adaptive import channel_weights, kb_other_language
from clawkb.retrieve.crossling import merge_dense
from clawkb.retrieve.fusion import Channel
from clawkb.retrieve.titles import channel, sections

ROOT = Path(__file__).resolve().parents[1]
SLICE = ROOT / "tests" / "data" / "esp-idf-slice"


def test_sections_group_runs_of_one_heading_path():
    rows = [
        (1, 10, "Doc", json.dumps(["Doc", "Intro"])),
        (2, 10, "Doc", json.dumps(["Doc", "Intro"])),  # same section, same start
        (3, 10, "Doc", json.dumps(["Doc", "Usage"])),
        (4, 11, "Other", json.dumps(["Other", "Usage"])),  # one title, two sections
        (5, 12, "Plain", "[]"),  # no heading path: heads no section, even with a title
    ]
    sec = sections(rows)
    got = {t: s.tolist() for t, s in zip(sec.titles, sec.starts, strict=True)}
    assert got == {"Intro": [1], "Usage": [3, 4]}


def test_channel_gate_and_order():
    from clawkb.retrieve.titles import Sections

    sec = Sections(["A", "B", "C"], [np.array([1]), np.array([2, 3]), np.array([4])])
    mat = np.eye(3, dtype=np.float32)
    dense = Channel(np.array([3, 9], np.int64), np.array([0.5, 0.4]))
    # the query is title B: B's sections come first, the one dense ranks higher first
    got = channel(sec, mat, np.array([0.1, 0.9, 0.6], np.float32), dense)
    assert got is not None
    ch, trace = got
    assert ch.ids.tolist() == [3, 2, 4] and trace["titles"] == 2
    # no title closer to the query than the best passage: no channel
    assert channel(sec, mat, np.array([0.1, 0.2, 0.3], np.float32), dense) is None
    # hidden passages are never listed
    ch2, _ = channel(sec, mat, np.array([0.1, 0.9, 0.6], np.float32), dense,
                     hidden=np.array([3]))  # fmt: skip
    assert 3 not in ch2.ids.tolist()


def test_dense_keeps_full_weight_and_lexical_keeps_it_over_other_language_passages():
    base = {"cjk": 0.0, "coverage": 1.0, "translated": 0.0, "agreement": 0.0, "margin": 0.0}
    assert channel_weights({**base, "translated": 0.9}) == (1.0, 1.0)  # no step back
    w_lex, _ = channel_weights(base)  # English question, channels disagree: lexical demoted
    assert w_lex < 0.5
    assert channel_weights({**base, "kb_other": 0.8})[0] == 1.0  # English over Chinese docs


def test_merge_dense_keeps_both_searches():
    a = Channel(np.array([1, 2, 3], np.int64), np.array([0.9, 0.8, 0.7]))
    b = Channel(np.array([4, 1, 5], np.int64), np.array([0.95, 0.85, 0.6]))
    m = merge_dense(a, b)
    assert m.ids.tolist()[0] == 1  # in both lists
    assert set(m.ids.tolist()) <= {1, 2, 3, 4, 5} and len(m.ids) == 3
    assert dict(zip(m.ids.tolist(), m.scores.tolist(), strict=True))[1] == pytest.approx(0.9)


@pytest.fixture(scope="module")
def esp(tmp_path_factory):
    pytest.importorskip("docutils")
    pytest.importorskip("onnxruntime")
    from clawkb.embed.run import embed_kb

    kb = KnowledgeBase.open(tmp_path_factory.mktemp("titles") / "kb", create=True)
    en = SLICE / "en"  # three pages keep the embedding short
    kb.index([en / "api-reference/peripherals/clk_tree.rst", en / "api-reference/system/mm_sync.rst",
              en / "api-guides/tracing/custom-trace-library.rst"])  # fmt: skip
    embed_kb(kb)
    assert list((kb.home / "index").glob("titles-*.npz"))  # built by embed, not by a search
    yield kb
    kb.close()


def _fusion(res) -> str:
    return str(next(s for s in res.stages if s["stage"] == "fusion")["note"])


def test_language_share_of_the_kb(esp):
    assert kb_other_language(esp.lexical, query_chinese=False) < 0.5  # English pages
    assert kb_other_language(esp.lexical, query_chinese=True) > 0.5


def test_chinese_title_finds_the_english_section(esp):
    # 加锁与重入 is "Locking and Reentrancy": no word of it is in the English pages,
    # and the dense channel ranks another page first; the title channel finds the section
    q = "加锁与重入"
    res = esp.search(q, limit=5, mode="hybrid", explain=True, early_return=0)
    assert " titles " in _fusion(res)
    top = res.hits[0] if res.hits else res.nearest[0]
    assert top.anchor.heading_path[-1] == "Locking and Reentrancy"
    assert top.explanation["channels"]["titles"]["rank"] == 1
    off = esp.search(q, limit=5, mode="hybrid", explain=True, early_return=0, titles=False)
    assert " titles " not in _fusion(off)
    first = off.hits[0] if off.hits else off.nearest[0]
    assert first.anchor.heading_path[-1] != "Locking and Reentrancy"


def test_a_question_gets_no_title_channel(esp):
    q = "how many bytes of padding does the trace header add before each packet"
    res = esp.search(q, limit=5, mode="hybrid", explain=True, early_return=0)
    assert " titles " not in _fusion(res)


def test_the_title_channel_needs_a_source_with_titles(esp):
    from clawkb.retrieve.pipeline import retriever_for
    from clawkb.retrieve.query import Query
    from clawkb.retrieve.source import LocalSource

    class NoTitles(LocalSource):
        capabilities = LocalSource.capabilities - {"titles"}

    assert "titles" in LocalSource.capabilities
    retriever_for(esp).cache.clear()  # the searches above cached this query
    q = Query.make("加锁与重入", limit=5, mode="hybrid", explain=True, options={"early_return": 0})
    assert " titles " in _fusion(esp.run_query(q))
    assert " titles " not in _fusion(esp.run_query(q, source=NoTitles(esp)))


def test_lead_takes_the_best_title_in_the_other_script():
    from clawkb.retrieve.titles import LEAD_MARGIN, Sections, lead, put_first

    sec = Sections(["GPIO", "通用输入输出", "Clock Tree"],
                   [np.array([1]), np.array([2, 5]), np.array([3])])  # fmt: skip
    mat = np.eye(3, dtype=np.float32)
    dense = Channel(np.array([5, 9], np.int64), np.array([0.5, 0.4]))
    q = np.array([0.9, 0.6, 0.1], np.float32)  # closest to "GPIO", then to its translation
    # an English query: the Chinese title leads, not the same-script "GPIO";
    # of the two sections it heads, the one the dense channel ranks first
    assert lead(sec, mat @ q, dense, query_chinese=False) == [(5, "通用输入输出")]
    # a Chinese query: the best Latin-script title, then the runner-up ("Clock Tree",
    # 0.1) only when it beats the best passage too (MARGIN: not here, 0.1 < 0.5)
    assert lead(sec, mat @ q, dense, query_chinese=True) == [(1, "GPIO")]
    near = Channel(dense.ids, np.array([0.05, 0.04]))
    assert lead(sec, mat @ q, near, query_chinese=True) == [(1, "GPIO"), (3, "Clock Tree")]
    # the title must be about as close to the query as the best passage
    low = Channel(dense.ids, np.array([0.6 - LEAD_MARGIN + 0.01, 0.4]))
    assert lead(sec, mat @ q, low, query_chinese=False) == []
    assert lead(sec, mat @ q, dense, query_chinese=False, hidden=np.array([2, 5])) == []
    # a clear pairing (the best other-script title LEAD_GAP above the next) leads from
    # further below the best passage (LEAD_FLOOR), a close call does not
    from clawkb.retrieve.titles import LEAD_FLOOR, LEAD_GAP

    two = Sections(["GPIO", "通用输入输出", "时钟树"], sec.starts)
    below = Channel(dense.ids, np.array([0.6 - (LEAD_MARGIN + LEAD_FLOOR) / 2, 0.4]))
    clear = np.array([0.9, 0.6, 0.6 - 2 * LEAD_GAP], np.float32)
    close = np.array([0.9, 0.6, 0.6 - LEAD_GAP / 2], np.float32)
    assert lead(two, clear, below, query_chinese=False) == [(5, "通用输入输出")]
    assert lead(two, close, below, query_chinese=False) == []
    # put first: above the fused top, or added when no channel listed it
    from clawkb.retrieve.fusion import Fused

    fused = [Fused(7, 0.03), Fused(5, 0.02)]
    assert [f.chunk_id for f in put_first(fused, 5)] == [5, 7]
    assert [f.chunk_id for f in put_first([Fused(7, 0.03)], 4)] == [4, 7]
    both = put_first([Fused(7, 0.03), Fused(5, 0.02), Fused(6, 0.01)], [6, 4])
    assert [f.chunk_id for f in both] == [6, 4, 7, 5]
    assert both[0].score > both[1].score > both[2].score


def test_a_chinese_title_leads_with_its_english_section(esp):
    # 传输端口 is "Transport Port", a sibling of "Encoder Port" on the same page: as one
    # fused list among three the title channel's first rank is outvoted; the lead
    # (retrieve/titles.lead) puts that section first
    for q, want in (("传输端口", "Transport Port"), ("驱动程序的行为", "Driver Behaviour")):
        res = esp.search(q, limit=5, mode="hybrid", explain=True, early_return=0)
        top = res.hits[0] if res.hits else res.nearest[0]
        assert top.anchor.heading_path[-1] == want, q
        assert top.explanation["channels"]["titles"]["lead"] is True
        assert f"lead={want!r}" in _fusion(res)
        off = esp.search(q, limit=5, mode="hybrid", early_return=0, title_lead=False)
        first = off.hits[0] if off.hits else off.nearest[0]
        assert first.anchor.heading_path[-1] != want, q


def test_the_runner_up_title_follows_the_lead(esp, monkeypatch):
    # "API 参考" is "API Reference"; e5-small puts "API Usage" a hair closer. Both
    # titles beat every passage, so both lead (titles.lead, RUNNERS), the best first
    from clawkb.retrieve import titles
    from clawkb.retrieve.pipeline import retriever_for

    res = esp.search("API 参考", limit=5, mode="hybrid", explain=True, early_return=0)
    assert "lead='API Usage' lead='API Reference'" in _fusion(res)
    top = res.hits or res.nearest
    assert [h.anchor.heading_path[-1] for h in top[:2]] == ["API Usage", "API Reference"]
    assert all(h.explanation["channels"]["titles"]["lead"] is True for h in top[:2])
    retriever_for(esp).cache.clear()
    monkeypatch.setattr(titles, "RUNNERS", 1)  # the best title alone
    one = esp.search("API 参考", limit=5, mode="hybrid", explain=True, early_return=0)
    retriever_for(esp).cache.clear()
    assert "lead='API Usage'" in _fusion(one) and "lead='API Reference'" not in _fusion(one)


def test_a_clear_pairing_leads_from_below_the_best_passage(esp, monkeypatch):
    # 模块时钟 is "Module Clocks": its title is .03 below the best passage (the plain
    # lead's gate misses it) but .04 ahead of every other English title: it leads
    from clawkb.retrieve import titles
    from clawkb.retrieve.pipeline import retriever_for

    retriever_for(esp).cache.clear()
    res = esp.search("模块时钟", limit=5, mode="hybrid", explain=True, early_return=0)
    assert "lead='Module Clocks'" in _fusion(res)
    top = res.hits[0] if res.hits else res.nearest[0]
    assert top.anchor.heading_path[-1] == "Module Clocks"
    assert top.explanation["channels"]["titles"]["lead"] is True
    retriever_for(esp).cache.clear()
    monkeypatch.setattr(titles, "LEAD_GAP", 1.0)  # no pairing is clear enough
    off = esp.search("模块时钟", limit=5, mode="hybrid", explain=True, early_return=0)
    retriever_for(esp).cache.clear()
    assert "lead=" not in _fusion(off)
