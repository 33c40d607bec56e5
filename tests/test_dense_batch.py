"""Several query vectors in one call: the vector index, the embedders, the pipeline.

A cross-lingual query's dense channel searches the query and its glossary
translation; both go through the model in one batch and through the vector
index in one call. Real KBs, the real static model (and e5-small where the
model runs).
"""

from __future__ import annotations

import numpy as np
import pytest

from clawkb.embed.run import embed_kb
from clawkb.index import dense as dense_mod
from clawkb.index.dense import DenseIndex, exact_top, exact_top_many
from clawkb.kb import KnowledgeBase, TextRecord
from clawkb.retrieve import adaptive
from clawkb.retrieve.crossling import DENSE_GATE, pick_dense
from clawkb.retrieve.fusion import Channel

pytest.importorskip("static_model")
from clawkb.embed.static import StaticEmbedder
from test_vectors import _records


@pytest.fixture()
def kb(tmp_path):
    with KnowledgeBase.open(tmp_path / "kb", create=True) as kb:
        yield kb


QUERIES = ["topic 3 section", "主题 2", "part 11"]


@pytest.mark.parametrize("small", [True, False])
def test_exact_top_many_equals_one_query_at_a_time(monkeypatch, small):
    rng = np.random.default_rng(3)
    mat = rng.normal(size=(500, 16)).astype(np.float32)
    qs = rng.normal(size=(3, 16)).astype(np.float32)
    if not small:  # the BLAS path: one matrix product for all queries
        monkeypatch.setattr(dense_mod, "SMALL_EXACT", 0)
    got = exact_top_many(mat, qs, 20)
    assert len(got) == 3
    for q, (top, scores) in zip(qs, got, strict=True):
        want_top, want_scores = exact_top(mat, q, 20)
        assert top.tolist() == want_top.tolist()
        np.testing.assert_allclose(scores, want_scores, rtol=1e-5)
        brute = np.argsort(-(mat @ q), kind="stable")[:20]
        assert top.tolist() == brute.tolist()
    assert exact_top_many(mat[:0], qs, 5)[0][0].size == 0


@pytest.mark.parametrize("ann", [False, True])
def test_search_many_equals_search(kb, ann):
    if ann:
        pytest.importorskip("hnswlib")
    kb.index_texts(_records(120))
    emb = StaticEmbedder()
    embed_kb(kb, embedder=emb)
    index = DenseIndex(
        kb.home / "index" / "dense", kb.conn, emb.signature(), ann_threshold=50 if ann else 10**9
    )
    index.refresh()
    assert index.uses_ann is ann
    qs = emb.embed_queries(QUERIES)
    many = index.search_many(qs, 10)
    for q, (ids, scores) in zip(qs, many, strict=True):
        one_ids, one_scores = index.search(q, 10)
        assert ids.tolist() == one_ids.tolist()
        np.testing.assert_allclose(scores, one_scores, rtol=1e-6)
    allowed = np.array(sorted(index.ids.tolist())[:7], np.int64)
    for q, (ids, _) in zip(qs, index.search_many(qs, 10, allowed=allowed), strict=True):
        assert set(ids.tolist()) == set(allowed.tolist())
        assert ids.tolist() == index.search(q, 10, allowed=allowed)[0].tolist()


def test_embed_queries_default_and_static_match_single_queries():
    emb = StaticEmbedder()
    batch = emb.embed_queries(QUERIES)
    assert batch.shape == (3, emb.dim) and batch.dtype == np.float32
    for row, text in zip(batch, QUERIES, strict=True):
        np.testing.assert_allclose(row, emb.embed_query(text), atol=1e-6)
    assert emb.embed_queries([]).shape == (0, emb.dim)

    class OnlyOne(StaticEmbedder):  # a plugin that implements embed_query alone
        embed_queries = StaticEmbedder.__mro__[1].embed_queries  # the interface default

    plain = OnlyOne().embed_queries(QUERIES)
    np.testing.assert_allclose(plain, batch, atol=1e-6)


def test_e5_query_batch_is_one_model_call_close_to_single_queries():
    pytest.importorskip("onnxruntime")
    from clawkb.embed.e5 import E5Small

    emb = E5Small(workers=1)
    texts = ["串口没有输出怎么办", "serial port no output"]
    calls = []
    forward = emb._forward
    emb._forward = lambda seqs: calls.append(len(seqs)) or forward(seqs)  # type: ignore[method-assign]
    batch = emb.embed_queries(texts)
    assert calls == [2]  # both queries in one padded batch
    assert batch.shape == (2, 384)
    np.testing.assert_allclose(np.linalg.norm(batch, axis=1), 1.0, rtol=1e-5)
    for row, text in zip(batch, texts, strict=True):
        # int8 activations are quantised per batch: close, not identical
        assert float(row @ emb.embed_query(text)) > 0.99


def test_pick_dense_gate():
    orig = Channel(np.array([7, 8], np.int64), np.array([0.9, 0.8]))
    worse = Channel(np.array([1, 2], np.int64), np.array([0.9 - DENSE_GATE - 0.01, 0.5]))
    better = Channel(np.array([1, 2], np.int64), np.array([0.88, 0.5]))
    empty = Channel(np.zeros(0, np.int64), np.zeros(0))
    got, text = pick_dense(orig, better, "wind tunnel")  # passes the gate: both searches fused
    assert text == "wind tunnel" and set(got.ids.tolist()) == {7, 1}
    assert pick_dense(orig, worse, "wind tunnel") == (orig, None)
    assert pick_dense(orig, None, "wind tunnel") == (orig, None)
    assert pick_dense(orig, orig, None) == (orig, None)
    assert pick_dense(orig, empty, "x") == (orig, None)
    assert pick_dense(None, better, "x") == (None, None)


class CountingLexical:
    """A lexical index that counts its top-k searches (the features' expensive part):
    ``searches`` over the whole index, ``restricted`` within given chunk ids."""

    def __init__(self, lexical) -> None:
        self.inner, self.searches, self.restricted, self.generation = lexical, 0, 0, 1

    def search(self, *a, **kw):
        if kw.get("allowed") is not None:
            self.restricted += 1
        else:
            self.searches += 1
        return self.inner.search(*a, **kw)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def test_query_signals_computed_once_per_query_and_index_generation(kb):
    from clawkb.retrieve.crossling import balance
    from clawkb.retrieve.rewrite import expand_query

    kb.index_texts(
        [
            TextRecord(path="tunnel.md", text="# Wind tunnel\n\nwind tunnel wall interference"),
            TextRecord(path="zh.md", text="# 笔记\n\n系统地研究了平台的效应问题"),
        ]
    )
    lex = CountingLexical(kb.lexical)
    rw = balance(kb.lexical, expand_query("是否系统地研究过风洞干扰效应？"))
    assert rw.n_glossary > 0
    want = adaptive.features(kb.lexical, rw.tokens, rw.weights, rw.n_glossary, {})
    x = adaptive.cross_lingual(lex, rw)
    first = lex.searches
    assert first == 2  # best passage for the own words and for the translations
    assert x > 0
    lexc = Channel(np.array([1], np.int64), np.array([1.0]))
    _, trace = adaptive.tune(lex, rw, {"lexical": lexc, "dense": lexc}, kb_settings(kb))
    assert lex.searches == first  # tune reuses the signals cross_lingual computed
    # its only search is the channel-dependent one: the dense top-k's language share
    assert lex.restricted == 1 and "dense_other" in trace
    assert trace["translated"] == want["translated"] and trace["cjk"] == want["cjk"]
    assert adaptive.cross_lingual(lex, rw) == x and lex.searches == first
    lex.generation = 2  # the index changed: computed again
    adaptive.cross_lingual(lex, rw)
    assert lex.searches == first + 2


def kb_settings(k):
    from clawkb.retrieve.settings import from_config

    return from_config(k.config)


def test_cross_lingual_hybrid_search_embeds_query_and_translation_in_one_call(tmp_path):
    pytest.importorskip("onnxruntime")
    from clawkb.retrieve.pipeline import QUERY_VECTORS, retriever_for

    # query vectors are cached per process: an earlier test may have embedded this query
    QUERY_VECTORS.clear()
    kb = KnowledgeBase.open(tmp_path / "xl", create=True)
    try:
        kb.index_texts(
            [
                TextRecord(
                    path="tunnel.md",
                    text="# Wind tunnel interference\n\nA systematic study of wind tunnel "
                    "wall interference on models of different sizes.",
                ),
                TextRecord(path="zh.md", text="# 研究笔记\n\n系统地研究了平台的效应问题。"),
            ]
        )
        embed_kb(kb)
        emb = retriever_for(kb).embedder
        batches: list[list[str]] = []
        singles: list[str] = []
        many, one = emb.embed_queries, emb.embed_query
        emb.embed_queries = lambda texts: batches.append(list(texts)) or many(texts)
        emb.embed_query = lambda text: singles.append(text) or one(text)
        q = "是否系统地研究过风洞干扰效应？"
        res = kb.search(q, limit=2, mode="hybrid", explain=True, early_return=0)
        assert batches == [[q, "wind tunnel"]] and singles == []
        note = next(s for s in res.stages if s["stage"] == "dense")["note"]
        assert "on the translation 'wind tunnel'" in note
        assert res.hits[0].anchor.path == "tunnel.md"
        # a monolingual query: one text, no translation
        kb.search("wind tunnel wall", limit=2, mode="hybrid", early_return=0)
        assert batches[-1] == ["wind tunnel wall"]
    finally:
        kb.close()
