"""Exact identifiers stay on top in every mode once vectors exist (retrieve/exact.py).

Real KBs with real e5-small vectors: the project's own example notes and a slice
of the ESP-IDF programming guide (tests/data/esp-idf-slice, English pages).
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from clawkb.kb import KnowledgeBase
from clawkb.retrieve.exact import anchors

ROOT = Path(__file__).resolve().parents[1]
SLICE = ROOT / "tests" / "data" / "esp-idf-slice"
MODES = ("lexical", "dense", "hybrid", "auto")


def _golden(kind: str) -> list[tuple[str, str]]:
    with open(SLICE / "golden.tsv", encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    return [(r["query"], r["expect"]) for r in rows if r["kind"] == kind]


def _embedded(home: Path, folder: Path) -> KnowledgeBase:
    pytest.importorskip("onnxruntime")
    from clawkb.embed.run import embed_kb

    kb = KnowledgeBase.open(home, create=True)
    kb.index([folder])
    embed_kb(kb)
    return kb


@pytest.fixture(scope="module")
def notes(tmp_path_factory):
    kb = _embedded(tmp_path_factory.mktemp("notes") / "kb", ROOT / "examples" / "notes")
    yield kb
    kb.close()


@pytest.fixture(scope="module")
def esp(tmp_path_factory):
    kb = _embedded(tmp_path_factory.mktemp("esp") / "kb", SLICE / "en")
    yield kb
    kb.close()


def test_anchors_are_identifier_like_runs_only():
    def found(q: str) -> list[str]:
        return [t for a in anchors(q) for t in a.tokens]

    assert found("0x4002_3800") == ["0x40023800"]  # both spellings index this form
    assert found("GPIOB_PUPDR") == ["gpiob_pupdr"]
    assert found("ObserverEvent") == ["observerevent"]
    assert found("how to call esp_wifi_init() early") == ["esp_wifi_init"]
    assert found("如何配置 CONFIG_FOO_BAR？") == ["config_foo_bar"]
    assert found("-Wno-dangling-reference (C++ only)") == ["wno-dangling-reference"]
    assert found('error "no confident match" in logs') == ["no", "confident", "match"]
    assert found("drivers/net/eth.c") == ["drivers/net/eth.c"]
    # natural language: nothing to pin
    assert found("what is the u.s. population in 2010") == []
    assert found("the 3rd of May at 10am, e.g. on a Tuesday") == []


def _has(hit, needles: tuple[str, ...]) -> bool:
    text = hit.text.lower()
    return any(n in text for n in needles)


@pytest.mark.parametrize("mode", MODES)
def test_register_address_is_first_in_every_mode(notes, mode):
    opts = {"mode": mode} if mode != "auto" else {}
    res = notes.search("0x4002_3800", limit=10, **opts)
    assert res.hits, mode
    needles = ("0x4002_3800", "0x40023800")
    assert _has(res.hits[0], needles), (mode, [h.anchor.path for h in res.hits])
    # no passage lacking the address outranks one that has it
    flags = [_has(h, needles) for h in res.hits]
    assert flags == sorted(flags, reverse=True), (mode, flags)


@pytest.mark.parametrize("kind", ["ident", "ident_zh"])
@pytest.mark.parametrize("mode", MODES)
def test_identifier_query_finds_its_page_first(esp, mode, kind):
    opts = {"mode": mode} if mode != "auto" else {}
    for query, expect in _golden(kind):
        res = esp.search(query, limit=5, **opts)
        assert res.hits and res.hits[0].anchor.path.endswith(expect), (
            mode,
            query,
            [h.anchor.path for h in res.hits],
        )


def test_auto_mode_keeps_lexical_weight_on_an_exact_match(esp):
    res = esp.search("ESP_PING_PROF_TTL", limit=5, explain=True, early_return=0)
    fusion = next(s for s in res.stages if s["stage"] == "fusion")
    assert "w_lexical=1.0" in fusion["note"], fusion["note"]
    assert "exact" in fusion["note"]


def test_chinese_heading_finds_its_english_page(esp):
    """zh2en on the slice: a Chinese section heading over the English pages (default mode)."""
    rows = _golden("zh2en")
    found = 0
    for query, expect in rows:
        res = esp.search(query, limit=10)
        pages = list(dict.fromkeys(h.anchor.path for h in res.hits))
        found += any(p.endswith(expect) for p in pages[:3])
    assert len(rows) == 10 and found >= 9, found


def test_bare_means_identifiers_and_nothing_else():
    from clawkb.retrieve.exact import bare

    assert bare("esp_wifi_init")
    assert bare("0x4002_3800 GPIOB_PUPDR")
    assert bare("esp_wifi_init()")
    assert not bare("BLE_ATT_ERR_INSUFFICIENT_RES 怎么配置")
    assert not bare("how to set CONFIG_SMP")
    assert not bare("hello world")


def test_identifier_led_weighs_the_words_around_the_spelling(esp):
    from clawkb.retrieve.exact import identifier_led

    stats = esp.lexical
    assert identifier_led(stats, "ESP_PING_PROF_TTL")
    # words no English passage holds say nothing about this KB
    assert identifier_led(stats, "ESP_PING_PROF_TTL 是做什么用的？")
    # a real question whose words carry more than the identifier does
    assert not identifier_led(stats, "ping session statistics timeout interval packets TTL")
    assert not identifier_led(stats, "what is the ping interval")


def test_identifier_led_query_gives_dense_a_small_vote(esp):
    """A bare identifier the index does not hold as one token (only its pieces): lexical
    keeps its full weight and dense steps down, so dense neighbours full of other
    identifiers cannot bury the pieces' match."""
    from clawkb.retrieve.adaptive import MIN_WEIGHT

    res = esp.search("ESP_PING_PROF_UNHEARD_OF_NAME", limit=5, explain=True, early_return=0)
    fusion = next(s for s in res.stages if s["stage"] == "fusion")
    assert "w_lexical=1.0" in fusion["note"], fusion["note"]
    assert f"w_dense={MIN_WEIGHT}" in fusion["note"], fusion["note"]
    res = esp.search("how do I measure ping round trip time", limit=5, explain=True, early_return=0)
    fusion = next(s for s in res.stages if s["stage"] == "fusion")
    assert "w_dense=1.0" in fusion["note"], fusion["note"]


def test_exact_stage_reuses_its_fetch_only_when_it_holds_every_match(esp, monkeypatch):
    """One anchor of one token that few passages hold: the stage's fetch search already
    returned every passage holding it, and the order it gives is the one searching
    for them again gives; with a scope, or several anchors, it searches as before."""
    from clawkb.retrieve import exact
    from clawkb.retrieve.fusion import Fused
    from clawkb.text import tokenize

    kinds = ("ident", "ident_zh", "en2zh", "zh2en")
    queries = [q for kind in kinds for q, _ in _golden(kind)]
    queries.append("how is SOC_AHB_GDMA_SUPPORTED used with ESP_PING_PROF_TTL")
    shortcut = []
    real = exact._fetched_all
    monkeypatch.setattr(exact, "_fetched_all", lambda *a: shortcut.append(real(*a)) or shortcut[-1])
    for q in queries:
        ids, scores, _ = esp.lexical.search(tokenize(q), k=30)
        fused = [
            Fused(int(i), float(s), {}) for i, s in zip(ids.tolist(), scores.tolist(), strict=True)
        ]
        allowed = np.asarray(sorted(ids.tolist()), np.int64)
        got = exact.keep_on_top(esp.lexical, q, list(fused))
        scoped = exact.keep_on_top(esp.lexical, q, list(fused), allowed=allowed)
        with monkeypatch.context() as m:
            m.setattr(exact, "_fetched_all", lambda *a: None)
            want = exact.keep_on_top(esp.lexical, q, list(fused))
            want_scoped = exact.keep_on_top(esp.lexical, q, list(fused), allowed=allowed)
        assert [(f.chunk_id, f.score, f.trace) for f in got[0]] == [
            (f.chunk_id, f.score, f.trace) for f in want[0]
        ], q
        assert got[1] == want[1], q
        assert [(f.chunk_id, f.score) for f in scoped[0]] == [
            (f.chunk_id, f.score) for f in want_scoped[0]
        ]
    assert any(s is not None for s in shortcut)  # the common case took the shortcut
    assert any(s is None for s in shortcut)  # a scope or two anchors did not
