"""The staged pipeline through ``KnowledgeBase.search``: modes, explain, rewrite,
cache, budgets, early return, merge, filters, rerank and abstain (real SQLite,
real static model, real HTTP servers on 127.0.0.1)."""

from __future__ import annotations

import os
import time

import pytest

from clawkb.embed.run import embed_kb
from clawkb.embed.static import StaticEmbedder
from clawkb.kb import KnowledgeBase, TextRecord
from clawkb.retrieve.filters import Filters, parse_time
from clawkb.retrieve.pipeline import retriever_for
from clawkb.retrieve.result import SearchResult
from clawkb.retrieve.rewrite import word_weights
from clawkb.text import tokenize
from dense_helpers import embedding_server

pytest.importorskip("static_model")

DOCS = [
    TextRecord(
        path="ddr.md",
        text="# DDR layout\n\n## Impedance\n\nSingle-ended 50 ohm, differential 100 ohm.",
        title="DDR",
    ),
    TextRecord(
        path="usb.md",
        text="# USB\n\nUSB 2.0 data lines are a 90 ohm differential pair.",
        title="USB",
    ),
    TextRecord(
        path="cook.md",
        text="# Pasta\n\nBoil spaghetti for ten minutes in salted water.",
        title="Pasta",
    ),
    TextRecord(
        path="power.md",
        text="# Power\n\nThe 3V3 rail is fed by an LDO regulator 稳压器.",
        title="Power",
    ),
]


def open_kb(tmp_path, config: str = "embedding: static\n") -> KnowledgeBase:
    home = tmp_path / "kb"
    home.mkdir(exist_ok=True)
    (home / "config.yaml").write_text(config, "utf-8")
    return KnowledgeBase.open(home, create=True)


@pytest.fixture()
def kb(tmp_path):
    kb = open_kb(tmp_path)
    kb.index_texts(DOCS)
    yield kb
    kb.close()


def paths(res) -> list[str]:
    return [h.anchor.path for h in res.hits]


def test_lexical_search_is_the_pipeline_with_dense_off(kb):
    res = kb.search("differential ohm", limit=3)
    assert type(res) is SearchResult and res.mode == "lexical"
    terms = tokenize("differential ohm")  # a word and its stem share one unit of weight
    ids, scores, _ = kb.lexical.search(terms, k=3, term_weights=word_weights(terms))
    assert res.chunk_ids == ids.tolist()  # the raw BM25F top-k, in order
    assert [h.score for h in res.hits] == pytest.approx(scores.tolist())
    assert [s["stage"] for s in res.stages] == ["rewrite", "lexical", "fusion"]
    embed_kb(kb)
    auto = kb.search("differential ohm", limit=3)
    assert type(auto) is SearchResult and auto.mode == "hybrid"
    assert kb.search("differential ohm", mode="lexical").mode == "lexical"


def test_modes_and_explain_traces(kb):
    embed_kb(kb)
    dense = kb.search("boil spaghetti water", mode="dense", limit=2)
    assert dense.mode == "dense" and paths(dense)[0] == "cook.md"
    hyb = kb.search(
        "differential pair ohm",
        mode="hybrid",
        limit=3,
        explain=True,
        early_return=0,
        adaptive=False,
    )
    top = hyb.hits[0].explanation
    assert set(top["channels"]) == {"lexical", "dense"}
    for trace in top["channels"].values():
        assert set(trace) == {"rank", "raw", "norm", "contribution"}
        assert trace["contribution"] == pytest.approx(1.0 / (20 + trace["rank"]), abs=1e-6)
    assert top["final"] == pytest.approx(
        sum(t["contribution"] for t in top["channels"].values()), abs=1e-5
    )
    assert [s["stage"] for s in hyb.stages] == ["rewrite", "lexical", "dense", "fusion"]
    lin = kb.search("differential pair ohm", mode="hybrid", fusion="linear", w_dense=0.0, limit=4)
    lex = kb.search("differential pair ohm", mode="lexical", limit=4)
    assert paths(lin)[: len(lex.hits)] == paths(lex)  # β = 0: lexical order


def test_synonym_rewrite_finds_other_language(tmp_path):
    kb = open_kb(tmp_path)
    kb.index_texts(DOCS)
    assert kb.search("意面", limit=3).hits == []  # not in the bundled glossary
    (kb.home / "synonyms.txt").write_text("意面 = spaghetti\n", "utf-8")
    res = kb.search("意面", limit=3)
    assert paths(res) == ["cook.md"]
    assert res.rewrites == [{"from": "意面", "to": "spaghetti", "weight": 0.5}]
    kb.close()


def test_glossary_expands_both_directions(tmp_path):
    kb = open_kb(tmp_path)
    kb.index_texts(DOCS)
    zh = kb.search("阻抗", limit=3)  # plain lexical path, bundled glossary
    assert paths(zh) == ["ddr.md"]
    en = kb.search("voltage regulator", limit=3)
    assert "power.md" in paths(en)
    piped = kb.search("阻抗", limit=3, mode="lexical", merge=False)
    assert [(e["from"], e["to"], e["source"]) for e in piped.rewrites] == [
        ("阻抗", "impedance", "glossary")
    ]
    off = kb.search("阻抗", limit=3, mode="lexical", glossary=False)
    assert off.hits == [] and off.rewrites == []
    kb.close()


def test_cache_hit_and_invalidation_on_index_change(kb):
    embed_kb(kb)
    first = kb.search("regulator rail", mode="hybrid")
    again = kb.search("regulator rail", mode="hybrid")
    assert again.stages == [{"stage": "cache", "ms": 0.0, "status": "hit"}]
    assert paths(again) == paths(first)
    kb.index_texts([TextRecord(path="ldo.md", text="# LDO\n\nregulator rail regulator rail notes")])
    fresh = kb.search("regulator rail", mode="hybrid")
    assert fresh.stages[0]["stage"] == "rewrite" and "ldo.md" in paths(fresh)


def test_dense_stage_over_budget_degrades_to_lexical(tmp_path):
    with embedding_server() as (url, state):
        kb = open_kb(
            tmp_path, f"embedding:\n  model: openai\n  options: {{base_url: '{url}', dim: 64}}\n"
        )
        kb.index_texts(DOCS)
        embed_kb(kb)
        state.delay_s = 1.0
        started = time.perf_counter()
        res = kb.search("differential ohm", mode="hybrid", budget_dense_ms=100, explain=True)
        assert time.perf_counter() - started < 0.9
        dense = next(s for s in res.stages if s["stage"] == "dense")
        assert dense["status"] == "timeout" and "skipped" in dense["note"]
        assert paths(res)[0] in ("usb.md", "ddr.md")
        assert set(res.hits[0].explanation["channels"]) == {"lexical"}
        kb.close()


def test_early_return_when_lexical_is_decisive(kb):
    embed_kb(kb)
    res = kb.search("spaghetti", mode="hybrid", early_return=0.3)
    assert [s["stage"] for s in res.stages] == ["rewrite", "lexical", "early_return", "fusion"]
    assert res.mode == "hybrid" and paths(res) == ["cook.md"]
    close = kb.search("ohm", mode="hybrid", early_return=0.9)
    assert "early_return" not in [s["stage"] for s in close.stages]


def test_section_merge_joins_adjacent_chunks(tmp_path):
    kb = open_kb(tmp_path, "embedding: static\nmax_tokens: 30\noverlap: 0\n")
    body = "\n".join(f"clock jitter budget line {i} adds margin." for i in range(12))
    kb.index_texts([TextRecord(path="clk.md", text=f"# Clocks\n\n## Jitter\n\n{body}\n")])
    rows = kb.repo.chunks_of_doc(kb.repo.document("clk.md").id)
    assert len(rows) >= 3
    merged = kb.search("clock jitter budget margin", mode="lexical", merge=True, limit=5)
    apart = kb.search("clock jitter budget margin", mode="lexical", merge=False, limit=5)
    assert len(merged.hits) < len(apart.hits)
    top = merged.hits[0]
    joined = [kb.chunk(a) for a in top.explanation["merged"]]
    assert len(joined) >= 2 and top.anchor.id == joined[0].anchor
    assert top.anchor.line_start == min(r.line_start for r in joined)
    assert top.anchor.line_end == max(r.line_end for r in joined)
    ordinals = sorted(r.ordinal for r in joined)
    assert ordinals == list(range(ordinals[0], ordinals[0] + len(ordinals)))  # adjacent only
    assert all(r.text in top.text for r in joined)
    kb.close()


def test_filters_apply_before_ranking_in_both_channels(tmp_path):
    src = tmp_path / "docs"
    src.mkdir()
    (src / "a.md").write_text(
        "---\nboard: rk3588\n---\n# A\n\nethernet phy reset timing\n", "utf-8"
    )
    (src / "b.txt").write_text("ethernet phy reset timing notes\n", "utf-8")
    (src / "c.md").write_text("# C\n\nethernet phy reset timing again\n", "utf-8")
    old = time.time() - 40 * 86400
    os.utime(src / "c.md", (old, old))
    kb = open_kb(tmp_path)
    kb.index([src])
    embed_kb(kb)
    for mode in ("lexical", "dense", "hybrid"):
        by_type = kb.search("ethernet phy", mode=mode, filters=Filters(doc_types=("txt",)))
        assert [p.rsplit("/", 1)[-1] for p in paths(by_type)] == ["b.txt"], mode
        by_meta = kb.search(
            "ethernet phy", mode=mode, filters=Filters(metadata=(("board", "rk3588"),))
        )
        assert [p.rsplit("/", 1)[-1] for p in paths(by_meta)] == ["a.md"], mode
        recent = kb.search("ethernet phy", mode=mode, filters=Filters(since=parse_time("30d")))
        assert sorted(p.rsplit("/", 1)[-1] for p in paths(recent)) == ["a.md", "b.txt"], mode
    with pytest.raises(Exception, match="bad time 'yesterday'"):
        parse_time("yesterday")
    kb.close()


def test_rerank_dense_and_endpoint_with_threshold(kb):
    res = kb.search("boil spaghetti", mode="lexical", rerank="dense", explain=True)
    assert res.hits[0].explanation["rerank"]["model"] == "dense"
    assert any(s["stage"] == "rerank" for s in res.stages)
    with embedding_server() as (url, state):
        r = retriever_for(kb)
        r.settings = r.settings.with_overrides({"rerank_options": {"base_url": url}})
        res = kb.search(
            "differential ohm", mode="lexical", rerank="endpoint", rerank_min_score=-1.0
        )
        assert state.requests[-1]["path"] == "/v1/rerank" and res.hits
        scores = [h.score for h in res.hits]
        assert scores == sorted(scores, reverse=True)
        strict = kb.search(
            "differential ohm", mode="lexical", rerank="endpoint", rerank_min_score=2.0
        )
        assert strict.hits == []


def test_abstain_keeps_nearest_passages_aside(kb):
    embed_kb(kb)
    res = kb.search("quantum chromodynamics lattice", mode="hybrid", limit=3)
    assert res.abstained and res.hits == [] and res.nearest
    assert res.message.startswith("no match")
    sure = kb.search("boil spaghetti salted water", mode="hybrid", limit=3)
    assert not sure.abstained and sure.confidence > 0.9  # P(answerable)
    assert StaticEmbedder().dim == 64


def test_linear_recency_prefers_recent_files(tmp_path):
    src = tmp_path / "docs"
    src.mkdir()
    for name, age_days in (("old.md", 400), ("new.md", 1)):
        (src / name).write_text("# Notes\n\nreset sequence for the ethernet phy\n", "utf-8")
        t = time.time() - age_days * 86400
        os.utime(src / name, (t, t))
    kb = open_kb(tmp_path)
    kb.index([src])
    opts = {"fusion": "linear", "w_recency": 1.0, "half_life_days": 30.0, "merge": False}
    res = kb.search("ethernet phy reset", mode="lexical", explain=True, **opts)
    assert [p.rsplit("/", 1)[-1] for p in paths(res)] == ["new.md", "old.md"]
    rec = [h.explanation["channels"]["recency"]["norm"] for h in res.hits]
    assert rec[0] == pytest.approx(0.5 ** (1 / 30), rel=1e-3) and rec[1] < 1e-3
    kb.close()
