"""Stored vectors: batched, resumable, content-hash reuse, model signature, exact + HNSW."""

from __future__ import annotations

import json

import numpy as np
import pytest

from clawkb.embed.run import dense_status, embed_kb, reembed_kb
from clawkb.embed.static import StaticEmbedder
from clawkb.embed.vectors import embed_pending, model_key
from clawkb.errors import IndexError_
from clawkb.index.dense import DenseIndex, exact_top
from clawkb.kb import KnowledgeBase, TextRecord

pytest.importorskip("static_model")


class Interrupted(Exception):
    pass


class DyingStatic(StaticEmbedder):
    """The real static model, which dies on its ``die_at``-th call (a killed run)."""

    def __init__(self, die_at: int) -> None:
        super().__init__()
        self.calls, self.die_at, self.texts = 0, die_at, 0

    def embed_documents(self, texts):
        self.calls += 1
        if self.calls == self.die_at:
            raise Interrupted
        self.texts += len(texts)
        return super().embed_documents(texts)


def _records(n: int, prefix: str = "doc") -> list[TextRecord]:
    return [
        TextRecord(
            path=f"{prefix}{i}.md", text=f"# Part {i}\n\nsection {i} about topic {i % 7} 主题{i}"
        )
        for i in range(n)
    ]


@pytest.fixture()
def kb(tmp_path):
    kb = KnowledgeBase.open(tmp_path / "kb", create=True)
    yield kb
    kb.close()


def _vector_rows(kb) -> int:
    return int(kb.conn.execute("SELECT COUNT(*) FROM chunk_vectors").fetchone()[0])


def test_killed_run_keeps_finished_batches_and_resumes(kb):
    kb.index_texts(_records(20))
    with pytest.raises(Interrupted):
        embed_pending(kb.conn, DyingStatic(die_at=3), batch=4)
    assert _vector_rows(kb) == 8  # two committed batches survived
    again = DyingStatic(die_at=-1)
    rep = embed_pending(kb.conn, again, batch=4)
    assert again.texts == 12 and rep.embedded == 12 and rep.total == 20


def test_unchanged_text_is_never_embedded_again(kb):
    kb.index_texts(_records(6))
    first = DyingStatic(die_at=-1)
    embed_kb(kb, embedder=first)
    assert first.texts == 6
    # one document changes, one is added, the rest are re-indexed unchanged
    recs = _records(6)
    recs[2] = TextRecord(path="doc2.md", text="# Part 2\n\nnew words entirely 新内容")
    kb.index_texts([*recs, TextRecord(path="extra.md", text="# Extra\n\nmore")])
    second = DyingStatic(die_at=-1)
    rep = embed_kb(kb, embedder=second)
    assert second.texts == 2 and rep.total == 7
    # the vector of the replaced text was swept
    keys = kb.conn.execute("SELECT COUNT(*) FROM vectors").fetchone()[0]
    assert keys == 7


def test_duplicate_text_shares_one_vector(kb):
    kb.index_texts(
        [TextRecord(path=f"copy{i}.md", text="# Same\n\nidentical body") for i in range(3)]
    )
    emb = DyingStatic(die_at=-1)
    rep = embed_kb(kb, embedder=emb)
    assert emb.texts == 1 and rep.total == 3


def test_signature_recorded_and_mismatch_names_the_fix(kb):
    kb.index_texts(_records(3))
    embed_kb(kb, embedder=StaticEmbedder())
    stored = json.loads(
        kb.conn.execute("SELECT value FROM meta WHERE key='dense_signature'").fetchone()[0]
    )
    assert stored == {"model": "static", "dim": 64, "prefix": "none", "normalized": True}

    class Other(StaticEmbedder):
        name = "other-model"

    with pytest.raises(IndexError_, match=r"clawkb reindex --vectors"):
        embed_kb(kb, embedder=Other())
    with pytest.raises(IndexError_, match=r"static\|64\|none\|norm.*other-model"):
        from clawkb.retrieve.pipeline import retriever_for

        retriever_for(kb).set_embedder(Other())
        kb.search("topic", mode="dense")
    rep = reembed_kb(kb, embedder=Other())
    assert rep.model.startswith("other-model") and rep.total == 3


def test_exact_search_matches_brute_force(kb):
    kb.index_texts(_records(30))
    emb = StaticEmbedder()
    embed_kb(kb, embedder=emb)
    index = DenseIndex(kb.home / "index" / "dense", kb.conn, emb.signature())
    q = emb.embed_query("topic 3 主题")
    ids, scores = index.search(q, 5)
    assert len(ids) == 5 and np.all(np.diff(scores) <= 1e-7)
    brute = kb.conn.execute("SELECT chunk_id, key FROM chunk_vectors").fetchall()
    vec = {
        k: np.frombuffer(v, "<f4")
        for k, v in kb.conn.execute("SELECT key, vec FROM vectors").fetchall()
    }
    best = sorted(brute, key=lambda r: -float(vec[r[1]] @ q))[:5]
    assert set(ids.tolist()) == {r[0] for r in best}
    allowed = np.array(sorted(r[0] for r in brute)[:4])
    ids2, _ = index.search(q, 10, allowed=allowed)
    assert set(ids2.tolist()) == set(allowed.tolist())


def test_hnsw_above_threshold_reports_recall_in_status(kb):
    pytest.importorskip("hnswlib")
    kb.index_texts(_records(120))
    embed_kb(kb, embedder=StaticEmbedder())
    (kb.home / "config.yaml").write_text("retrieval:\n  ann_threshold: 50\n")
    kb.config = type(kb.config).load(kb.home)
    status = dense_status(kb)
    assert status is not None
    assert status["search"] == "hnsw" and status["vectors"] == 120
    assert 0.8 <= status["ann"]["recall@10"] <= 1.0
    index = DenseIndex(
        kb.home / "index" / "dense", kb.conn, StaticEmbedder().signature(), ann_threshold=50
    )
    q = StaticEmbedder().embed_query("topic 5")
    ann_ids, _ = index.search(q, 10)
    mat_ids, _ = exact_top(np.asarray(index.mat), q, 10)
    overlap = len(set(ann_ids.tolist()) & set(index.ids[mat_ids].tolist()))
    assert overlap >= 7


def test_deleted_chunks_leave_the_dense_index(kb):
    kb.index_texts(_records(5))
    emb = StaticEmbedder()
    embed_kb(kb, embedder=emb)
    index = DenseIndex(kb.home / "index" / "dense", kb.conn, emb.signature())
    assert len(index.search(emb.embed_query("topic"), 10)[0]) == 5
    kb.index_texts([TextRecord(path="doc0.md", text="# Part 0\n\nreplaced text")])
    ids, _ = index.search(emb.embed_query("topic"), 10)
    live = {r[0] for r in kb.conn.execute("SELECT id FROM chunks")}
    assert set(ids.tolist()) <= live and len(ids) == 4
    assert model_key(emb.signature()) == "static|64|none|norm"
