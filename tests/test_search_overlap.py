"""The query embedding runs on a stage worker while the calling thread does the
lexical-side work of the later stages (``retrieve/pipeline.py``: ``_prepare``):
the answers are the ones computed without that head start, an error of the
embedding thread is raised as before, and a KB without vectors never starts the
thread (real SQLite, real static model)."""

from __future__ import annotations

import csv
import threading
import time
from pathlib import Path

import pytest

import clawkb.retrieve.pipeline as pipeline
import clawkb.retrieve.stages as stages
from clawkb.embed.run import embed_kb
from clawkb.kb import KnowledgeBase, TextRecord
from clawkb.retrieve.pipeline import retriever_for

pytest.importorskip("static_model")

SLICE = Path(__file__).resolve().parent / "data" / "esp-idf-slice"
#: pages whose text breaks identifiers (a line wrap, a soft hyphen): the exact
#: stage's prepared work reads passages for them
BROKEN = Path(__file__).resolve().parent / "data" / "broken-identifiers" / "docs"
DOCS = [
    TextRecord(path="gpio.md", title="GPIO",
               text="# GPIO\n\n## Pull-up\n\nSet GPIOB_PUPDR at 0x4002_040C to enable the pull-up."),
    TextRecord(path="cook.md", title="Pasta",
               text="# Pasta\n\nBoil spaghetti for ten minutes in salted water."),
]  # fmt: skip
NONSENSE = ["quantum chromodynamics of gluons", "红烧肉怎么做才好吃？", "xqzv wplk jjrrtt"]


def queries() -> list[str]:
    with open(SLICE / "golden.tsv", encoding="utf-8") as fh:
        golden = [g["query"] for g in csv.DictReader(fh, delimiter="\t")]
    return golden + NONSENSE + ["GPIOB_PUPDR", "0x4002_040C", "Pull-up"]


@pytest.fixture()
def kb(tmp_path):
    home = tmp_path / "kb"
    home.mkdir()
    (home / "config.yaml").write_text("embedding: static\nretrieval:\n  cache_size: 0\n", "utf-8")
    kb = KnowledgeBase.open(home, create=True)
    kb.index_texts(DOCS)
    yield kb
    kb.close()


def answer(res) -> tuple:
    hits = [(str(h.anchor), round(h.score, 9), h.explanation) for h in res.hits + res.nearest]
    decision = res.decision.to_dict() if res.decision is not None else None
    notes = [(s["stage"], s["note"]) for s in res.stages]
    return hits, res.abstained, res.confidence, decision, notes


def test_head_start_gives_the_same_answers(kb, monkeypatch):
    kb.index([SLICE / "en", SLICE / "zh_CN", BROKEN])
    embed_kb(kb)
    # early_return 0 for the broken spellings: their lexical top-1 alone may be decisive
    cases = [(q, {}) for q in queries()] + [
        (q, {"early_return": 0.0})
        for q in ("ESP_BT_VS_PCA_OCF", "ESP_BT_VS_LMP_DBG_ENABLE_OCF 怎么用")
    ]
    started = []
    start = pipeline.start
    monkeypatch.setattr(pipeline, "start", lambda fn, ms: started.append(1) or start(fn, ms))
    overlapped = [answer(kb.search(q, explain=True, **o)) for q, o in cases]
    assert len(started) >= len(cases) // 2  # most searches embedded their query on the worker
    assert any(a[1] for a in overlapped) and not all(a[1] for a in overlapped)
    assert any("'broken'" in str(a[4]) for a in overlapped)  # a broken spelling was found
    # without the head start every stage computes the same values itself
    monkeypatch.setattr(pipeline, "_prepare", lambda *a, **k: {})
    assert [answer(kb.search(q, explain=True, **o)) for q, o in cases] == overlapped


class EmbeddingFailed(RuntimeError):
    pass


def test_an_embedding_error_is_raised_by_the_search(kb, monkeypatch):
    embed_kb(kb)
    emb = retriever_for(kb).embedder

    def fail(texts):
        raise EmbeddingFailed("the model broke")

    monkeypatch.setattr(emb, "embed_queries", fail)
    retriever_for(kb).qvec_cache.clear()
    with pytest.raises(EmbeddingFailed, match="the model broke"):
        kb.search("how to enable the pull-up", early_return=0.0)
    monkeypatch.undo()
    assert kb.search(
        "how to enable the pull-up", early_return=0.0
    ).hits  # the worker is usable again


def test_no_vectors_no_worker(kb, monkeypatch):
    started = []
    monkeypatch.setattr(pipeline, "start", lambda fn, ms: started.append(1))
    for q in queries():
        res = kb.search(q)
        assert res.mode == "lexical"
    assert started == []


def test_the_budget_holds_when_every_worker_is_taken(kb):
    """Stages that overran keep their workers: the dense channel then waits in the
    queue, and the search still ends within its budget, lexical results only."""
    embed_kb(kb)
    release = threading.Event()
    held = [stages._POOL.submit(release.wait, 30) for _ in range(stages._POOL._max_workers)]
    try:
        began = time.perf_counter()
        res = kb.search("GPIOB_PUPDR pull-up", early_return=0.0, budget_dense_ms=200, explain=True)
        took = time.perf_counter() - began
        dense = next(s for s in res.stages if s["stage"] == "dense")
        assert dense["status"] == "timeout" and res.hits
        assert took < 5.0  # the budget (0.2 s), not the held workers (30 s)
    finally:
        release.set()
        for f in held:
            f.result()
