"""The row-text version of a Milvus collection (backends/milvus_schema.py, milvus_sync.py).

A row's ``terms`` repeat the chunk's title by the title weight; rows written by
another version keep their old text. On real Milvus Lite files: a search on a
collection whose rows carry another version (or none: made before it was kept)
is refused in one line saying the collection must be rebuilt, and ``sync``
rewrites the KB's rows, records the version, and searches work again.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import clawkb  # noqa: F401  (before pymilvus: keeps gRPC fork handlers off)

pytest.importorskip("pymilvus", reason="the milvus extra is not installed: pip install '.[milvus]'")

from clawkb.backends.milvus_kb import kb_backend, sync_kb
from clawkb.backends.milvus_rows import build_rows, lexical_terms
from clawkb.backends.milvus_schema import (
    ROW_TEXT_PREFIX,
    ROW_TEXT_VERSION,
    UNKNOWN_ROW_TEXT,
    build_schema,
    client,
    collection_properties,
    index_params,
    require_pymilvus,
    row_text_problem,
)
from clawkb.backends.milvus_source import forget
from clawkb.backends.milvus_sync import source_id
from clawkb.backends.settings import MilvusSettings
from clawkb.errors import IndexError_
from clawkb.kb import KnowledgeBase
from milvus_helpers import make_kb_home, write_corpus


def _settings(kb: KnowledgeBase) -> MilvusSettings:
    s = kb_backend(kb)
    assert s is not None
    return s


def _terms(s: MilvusSettings, src: str) -> dict[int, str]:
    rows = client(s).query(
        s.collection, filter=f'source == "{src}"', output_fields=["chunk_id", "terms"], limit=16384
    )
    return {int(r["chunk_id"]): str(r["terms"]) for r in rows}


def _local_terms(kb: KnowledgeBase, ids: list[int]) -> dict[int, str]:
    rows = build_rows(kb.conn, source_id(kb), ids, None)
    return {int(r["chunk_id"]): str(r["terms"]) for r in rows}


def _refused(kb: KnowledgeBase) -> str:
    forget(_settings(kb))  # a new process: the properties are read again
    with pytest.raises(IndexError_) as err:
        kb.search("USART2 PA2", mode="lexical")
    return str(err.value)


def test_stale_rows_are_refused_then_rewritten_by_sync(tmp_path: Path) -> None:
    lite = str(tmp_path / "lite.db")
    docs = write_corpus(tmp_path / "docs")
    kb = KnowledgeBase.open(make_kb_home(tmp_path / "kb", lite, "rt", dense=False), create=True)
    kb.index([docs])
    s, src = _settings(kb), source_id(kb)
    props = collection_properties(s)
    assert props[ROW_TEXT_PREFIX + src] == ROW_TEXT_VERSION and row_text_problem(props) is None
    assert kb.search("USART2 PA2", mode="lexical").hits

    # rows of an older version: another title weight, recorded as such
    ids = kb.repo.all_chunk_ids()
    old = build_rows(kb.conn, src, ids, None)
    for r in old:
        r["terms"] = "stale"
    client(s).upsert(s.collection, old)
    client(s).alter_collection_properties(s.collection, {ROW_TEXT_PREFIX + src: "0/title*1"})
    msg = _refused(kb)
    assert "\n" not in msg and "must be rebuilt" in msg and "'0/title*1'" in msg
    assert ROW_TEXT_VERSION in msg and "clawkb sync" in msg

    rep = sync_kb(kb)  # the KB's sync path rebuilds: every row rewritten
    assert rep.rebuilt and rep.full and rep.upserted == len(ids)
    assert _terms(s, src) == _local_terms(kb, ids)
    assert collection_properties(s)[ROW_TEXT_PREFIX + src] == ROW_TEXT_VERSION
    forget(s)
    hits = kb.search("USART2 PA2", mode="lexical").hits
    assert hits and hits[0].anchor.path.endswith("uart.md")
    again = sync_kb(kb)
    assert not again.rebuilt and again.upserted == 0
    kb.close()


def test_a_collection_without_versions_marks_every_other_source_until_it_syncs(
    tmp_path: Path,
) -> None:
    lite = str(tmp_path / "lite.db")
    a = KnowledgeBase.open(
        make_kb_home(tmp_path / "a", lite, "legacy", dense=False, auto_sync=False), create=True
    )
    b = KnowledgeBase.open(
        make_kb_home(tmp_path / "b", lite, "legacy", dense=False, auto_sync=False), create=True
    )
    a.index([write_corpus(tmp_path / "da")])
    b.index([write_corpus(tmp_path / "db", {"can.md": "# CAN\n\nFDCAN1 bit timing 采样点.\n"})])
    s = _settings(a)
    # a collection as clawkb made it before the row-text version was kept
    pm = require_pymilvus()
    c = client(s)
    legacy = {"clawkb.schema": "2", "clawkb.model": "none", "clawkb.dim": "0",
              "clawkb.signature": ""}  # fmt: skip
    from clawkb.text import TOKENIZER_VERSION

    legacy["clawkb.tokenizer"] = TOKENIZER_VERSION
    c.create_collection(
        s.collection, schema=build_schema(pm, 0),
        index_params=index_params(c, s, 0, 1.2, 0.75), properties=legacy,
    )  # fmt: skip
    for kb in (a, b):
        c.upsert(s.collection, build_rows(kb.conn, source_id(kb), kb.repo.all_chunk_ids(), None))
    assert "before clawkb kept" in _refused(a)

    assert sync_kb(a).rebuilt
    props = collection_properties(s)
    assert props[ROW_TEXT_PREFIX + source_id(a)] == ROW_TEXT_VERSION
    assert props[ROW_TEXT_PREFIX + source_id(b)] == UNKNOWN_ROW_TEXT
    msg = _refused(a)  # b's rows were written by a clawkb that kept no version
    assert source_id(b) in msg and "must be rebuilt" in msg

    assert sync_kb(b).rebuilt
    assert row_text_problem(collection_properties(s)) is None
    assert _terms(s, source_id(b)) == _local_terms(b, b.repo.all_chunk_ids())
    forget(s)
    assert a.search("FDCAN1", mode="lexical").hits  # b's rows, searched from a
    a.close()
    b.close()


def test_lexical_terms_repeat_the_title_by_the_recorded_weight() -> None:
    from clawkb.backends.milvus_schema import TITLE_REPEAT

    assert ROW_TEXT_VERSION.endswith(f"title*{TITLE_REPEAT}")
    once = lexical_terms(1, "Clock", "[]", "text", "body words here")
    assert once.split().count(once.split()[0]) == TITLE_REPEAT
