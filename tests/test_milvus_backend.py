"""The Milvus backend against the real Milvus Lite binary (one db file per module)."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import clawkb  # noqa: F401  (before pymilvus: keeps gRPC fork handlers off)

pytest.importorskip("pymilvus", reason="the milvus extra is not installed: pip install '.[milvus]'")

from clawkb.backends import surrogate
from clawkb.backends.milvus_kb import kb_backend, kb_search, sync_kb
from clawkb.backends.milvus_schema import client
from clawkb.backends.milvus_sync import remote_chunk_ids, source_id
from clawkb.index.segment import hash_terms
from clawkb.kb import KnowledgeBase
from clawkb.retrieve.filters import Filters
from clawkb.retrieve.hits import hit_dict
from clawkb.retrieve.query import Query
from clawkb.retrieve.source import LocalSource
from clawkb.text import tokenize
from milvus_helpers import make_kb_home, write_corpus

PROBE_STRINGS = ["时钟配置", "0x4001_3000", "v5.15.32", "STM32F401RE", "CONFIG_SMP", "I2C_SCL"]


@pytest.fixture(scope="module")
def lite(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(tmp_path_factory.mktemp("milvus") / "shared.db")


@pytest.fixture(scope="module")
def kb(tmp_path_factory: pytest.TempPathFactory, lite: str) -> KnowledgeBase:
    base = tmp_path_factory.mktemp("kb1")
    docs = write_corpus(base / "docs", extra=40)
    home = make_kb_home(base / "kb", lite, "main")
    k = KnowledgeBase.open(home, create=True)
    rep = k.index([docs])
    assert rep.warnings == []
    return k


def anchors(kb: KnowledgeBase) -> set[str]:
    return {r[0] for r in kb.conn.execute("SELECT anchor FROM chunks")}


def milvus_anchors(kb: KnowledgeBase) -> set[str]:
    s = kb_backend(kb)
    assert s is not None
    rows = client(s).query(
        s.collection,
        filter=f'source == "{source_id(kb)}"',
        output_fields=["anchor"],
        limit=16384,
    )
    return {r["anchor"] for r in rows}


def test_surrogate_words_are_fixed_width_letters_and_invert_to_the_term_hash() -> None:
    for text in PROBE_STRINGS:
        tokens = tokenize(text)
        words = surrogate.encode(tokens)
        assert len(words) == len(tokens)
        assert all(re.fullmatch(r"[a-p]{16}", w) for w in words)
        assert [surrogate.decode_word(w) for w in words] == hash_terms(tokens).tolist()
        assert surrogate.glossary(tokens) == dict(zip(words, tokens, strict=True))
    everything = [t for s in PROBE_STRINGS for t in tokenize(s)]
    assert len(set(surrogate.encode(everything))) == len(set(everything))
    with pytest.raises(ValueError):
        surrogate.decode_word("abc")


def lexical_search(kb: KnowledgeBase, query: str, limit: int) -> Any:
    """The local pipeline, lexical, the query's own tokens (no glossary expansion)."""
    q = Query.make(query, limit=limit, mode="lexical", options={"glossary": False})
    return kb.run_prepared(q, source=LocalSource(kb))


@pytest.mark.parametrize(
    "query",
    [
        "时钟",
        "钟配",
        "配置",
        "0x4001_3000",
        "4001",
        "3000",
        "v5.15.32",
        "15",
        "CONFIG",
        "SMP",
        "I2C",
    ],
)
def test_milvus_matches_exactly_the_chunks_local_search_matches(
    kb: KnowledgeBase, query: str
) -> None:
    """The surrogate round trip: CJK bigrams and identifier parts reach Milvus as the
    same terms, so Milvus BM25 matches the same chunks as the local index."""
    s = kb_backend(kb)
    assert s is not None
    local = lexical_search(kb, query, limit=200)
    remote = kb_search(kb, s, query, limit=200, mode="lexical", options={"glossary": False})
    assert local.hits, query
    assert {h.anchor.id for h in remote.hits} == {h.anchor.id for h in local.hits}
    assert remote.query_tokens == local.query_tokens == tokenize(query)


def test_bigram_does_not_match_its_characters_apart(kb: KnowledgeBase) -> None:
    s = kb_backend(kb)
    assert s is not None
    res = kb_search(kb, s, "钟配", limit=10, mode="lexical")
    # every chunk with 钟 or 配 matches, but only clock.md has the bigram: it ranks first
    assert Path(res.hits[0].anchor.path).name == "clock.md"
    assert res.hits[0].score > res.hits[1].score


def test_modes_give_the_local_hit_schema_and_explain_channels(kb: KnowledgeBase) -> None:
    local = hit_dict(lexical_search(kb, "UART baud 波特率", limit=3).hits[0])
    for mode in ("lexical", "dense", "hybrid"):
        res = kb.search("UART baud 波特率", mode=mode, limit=3, explain=True, early_return=0)
        assert res.mode == mode and res.hits
        d = hit_dict(res.hits[0])
        assert set(d) - {"explanation"} == set(local)
        exp = d["explanation"]
        assert exp["backend"] == "milvus"
        want = {"lexical", "dense"} if mode == "hybrid" else {mode}
        assert want <= set(exp["channels"])
        for ch in exp["channels"].values():
            assert ch["rank"] >= 1
    top = kb.search("UART baud 波特率", mode="lexical", limit=1).hits[0]
    assert top.anchor.path.endswith("uart.md") and top.anchor.line_start >= 1
    assert ("baud" in top.matched_terms and "[baud]" in top.snippet.lower()) or top.highlights


def test_filters_compile_to_milvus_expressions(kb: KnowledgeBase) -> None:
    q = "寄存器 register mode"
    only = kb.search(q, limit=50, filters=Filters(path_globs=("*/note00?.md",)), mode="lexical")
    names = {Path(h.anchor.path).name for h in only.hits}
    assert names and all(re.fullmatch(r"note00\d\.md", n) for n in names)
    rel = kb.search(q, limit=50, filters=Filters(path_globs=("note01*",)), mode="lexical")
    assert rel.hits and all(Path(h.anchor.path).name.startswith("note01") for h in rel.hits)
    typed = kb.search(q, limit=5, filters=Filters(doc_types=("pdf",)), mode="lexical")
    assert typed.hits == []
    md = kb.search(q, limit=5, filters=Filters(doc_types=(".md",)), mode="lexical")
    assert md.hits
    future = kb.search(q, limit=5, filters=Filters(since=time.time() + 3600), mode="lexical")
    assert future.hits == []
    past = kb.search(q, limit=5, filters=Filters(since=time.time() - 3600), mode="lexical")
    assert past.hits


def test_memory_namespace_filter_and_hidden_by_default(kb: KnowledgeBase) -> None:
    kb.memory.store("the lab bench PSU is set to 3.3V for the nucleo", namespace="bench")
    sync_kb(kb)
    s = kb_backend(kb)
    assert s is not None
    plain = kb_search(kb, s, "bench PSU nucleo", limit=10, mode="lexical")
    assert all(not h.anchor.path.startswith("memory://") for h in plain.hits)
    mine = kb_search(kb, s, "bench PSU nucleo", limit=10, mode="lexical", namespace="bench")
    assert mine.hits and all(h.anchor.path.startswith("memory://bench/") for h in mine.hits)
    other = kb_search(kb, s, "bench PSU nucleo", limit=10, mode="lexical", namespace="x")
    assert other.hits == []


def test_sync_replays_edits_and_deletes_and_is_idempotent(kb: KnowledgeBase) -> None:
    docs = Path(kb.home).parent / "docs"
    (docs / "uart.md").write_text("# UART\n\nUSART1 now runs at 921600 baud.\n", encoding="utf-8")
    (docs / "misc.md").unlink()
    rep = kb.index([docs])
    assert rep.warnings == []
    assert milvus_anchors(kb) == anchors(kb)
    st = kb.status()["backend"]
    assert st["synced"] and st["lag_changes"] == 0 and st["applied_seq"] == st["store_seq"]
    again = sync_kb(kb)
    assert again.applied == 0 and again.upserted == 0
    full = sync_kb(kb, full=True)
    assert full.full and full.upserted == 0 and full.deleted == 0
    assert milvus_anchors(kb) == anchors(kb)
    hits = kb.search("921600", mode="lexical").hits
    assert hits and hits[0].anchor.path.endswith("uart.md")
    gone = kb.search("配时 置钟", mode="lexical", limit=50).hits
    assert gone and not any(h.anchor.path.endswith("misc.md") for h in gone)


def test_two_kbs_with_disjoint_roots_share_one_collection(
    kb: KnowledgeBase, tmp_path: Path, lite: str
) -> None:
    other_docs = write_corpus(
        tmp_path / "other", {"can.md": "# CAN\n\nFDCAN1 bit timing 500 kbit/s 采样点 87.5%.\n"}
    )
    other = KnowledgeBase.open(make_kb_home(tmp_path / "kb2", lite, "main"), create=True)
    other.index([other_docs])
    assert source_id(other) != source_id(kb)
    both = kb.search("FDCAN1 采样点", mode="lexical").hits
    assert both and both[0].anchor.path.endswith("can.md")  # kb1 sees kb2's rows
    assert milvus_anchors(other) == anchors(other)
    before = milvus_anchors(kb)
    (other_docs / "can.md").unlink()
    other.index([other_docs])
    assert milvus_anchors(other) == set()
    assert milvus_anchors(kb) == before  # deletes are scoped to their source
    other.close()


def test_status_lag_before_the_first_sync(tmp_path: Path, lite: str) -> None:
    home = make_kb_home(tmp_path / "kb", lite, "lagged", auto_sync=False)
    k = KnowledgeBase.open(home, create=True)
    k.index([write_corpus(tmp_path / "d")])
    st = k.status()["backend"]
    assert st["kind"] == "milvus" and not st["synced"] and st["lag_changes"] > 0
    rep = sync_kb(k)
    assert rep.upserted == st["lag_changes"]
    assert k.status()["backend"]["synced"]
    ids = remote_chunk_ids(kb_backend(k), source_id(k))  # type: ignore[arg-type]
    assert ids == set(k.repo.all_chunk_ids())
    k.close()


def test_model_mismatch_with_the_collection_is_a_clear_error(tmp_path: Path, lite: str) -> None:
    from clawkb.errors import IndexError_

    home = make_kb_home(tmp_path / "kb", lite, "main")
    conf = (home / "config.yaml").read_text().replace("embedding: static", "embedding: e5-small")
    (home / "config.yaml").write_text(conf)
    k = KnowledgeBase.open(home, create=True)
    with pytest.raises(IndexError_) as err:
        sync_kb(k)
    assert "main" in str(err.value) and "e5-small" in str(err.value)
    k.close()


def test_vectors_sent_to_milvus_are_the_stored_ones(kb: KnowledgeBase) -> None:
    s = kb_backend(kb)
    assert s is not None
    cid = kb.repo.all_chunk_ids()[0]
    row = client(s).query(
        s.collection, filter=f'source == "{source_id(kb)}" and chunk_id == {cid}',
        output_fields=["dense"],
    )[0]  # fmt: skip
    stored = kb.conn.execute(
        "SELECT v.vec FROM chunk_vectors cv JOIN vectors v ON v.model = cv.model AND"
        " v.key = cv.key WHERE cv.chunk_id = ?",
        (cid,),
    ).fetchone()[0]
    assert np.allclose(np.asarray(row["dense"], np.float32), np.frombuffer(stored, "<f4"))


def test_pymilvus_extra_is_declared() -> None:
    text = (Path(__file__).parents[1] / "pyproject.toml").read_text()
    assert "pymilvus" in text and "milvus-lite" in text
    assert os.environ.get("CLAWKB_SKIP_MILVUS") is None
