"""Large batches are inverted by worker processes; results must equal the serial build."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from clawkb.ingest import sync
from clawkb.kb import KnowledgeBase, TextRecord

WORDS = [
    "ddr",
    "阻抗",
    "走线",
    "stm32f401re",
    "0x4001_3000",
    "config_smp",
    "uart",
    "boot",
    "电源",
    "时序",
    "i2c1_scl",
]


def _records(n: int) -> list[TextRecord]:
    rng = random.Random(11)
    return [
        TextRecord(
            path=f"doc{i}", text=" ".join(rng.choice(WORDS) for _ in range(12)) + f" uniq{i}"
        )
        for i in range(n)
    ]


def _results(kb: KnowledgeBase) -> list[list[tuple[str, float]]]:
    out = []
    for q in ("ddr 阻抗", "0x40013000", "uniq4321", "时序 boot", "i2c1_scl uart"):
        res = kb.search(q, limit=8)
        out.append([(h.anchor.path, round(h.score, 4)) for h in res.hits])
    return out


def test_parallel_build_equals_serial(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    recs = _records(sync.PARALLEL_MIN_CHUNKS + 500)
    monkeypatch.setenv("CLAWKB_INDEX_WORKERS", "1")
    with KnowledgeBase.open(tmp_path / "serial", create=True) as kb:
        kb.index_texts(recs)
        serial = _results(kb)
        assert len(kb.lexical.segments) == 1
    monkeypatch.setenv("CLAWKB_INDEX_WORKERS", "2")
    with KnowledgeBase.open(tmp_path / "parallel", create=True) as kb:
        kb.index_texts(recs)
        # one segment per worker, merged into one as the run ends (consolidation)
        assert kb.lexical.docs_written == len(recs)
        assert len(kb.lexical.segments) == 1 and kb.lexical.segments[0].name == "seg-000003"
        assert _results(kb) == serial
        assert kb.search("uniq4321").hits[0].anchor.path == "doc4321"
        live = sum(s.n_live for s in kb.lexical.segments)
        assert live == kb.status()["chunks"]


def test_a_run_ends_consolidated_and_a_small_run_merges_nothing_big(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An indexing run that wrote the whole KB in several batches ends with one
    segment; a later small run keeps its own segment (no merge of the big one
    on its path) until enough was written for a merge to pay."""
    monkeypatch.setenv("CLAWKB_INDEX_WORKERS", "1")
    monkeypatch.setenv("CLAWKB_INDEX_BATCH_CHUNKS", "200")  # batches of 200: a segment each
    recs = _records(900)
    with KnowledgeBase.open(tmp_path / "kb", create=True) as kb:
        kb.index_texts(recs[:800])
        assert kb.lexical.docs_written == 800
        assert [s.n_live for s in kb.lexical.segments] == [800]
        kb.index_texts(recs[800:850])
        assert [s.n_live for s in kb.lexical.segments] == [800, 50]
        kb.index_texts(recs[850:])
        assert [s.n_live for s in kb.lexical.segments] == [800, 50, 50]
        assert kb.search("uniq877").hits[0].anchor.path == "doc877"
