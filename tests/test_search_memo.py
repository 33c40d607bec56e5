"""What a search keeps between queries is forgotten when the store or the index changes.

A search re-uses, until something writes: the store's change sequence and
tokenizer version (the freshness check), the ids of memory chunks it hides
(:class:`clawkb.store.memo.StoreMemo`) and the document frequencies of query
terms (:mod:`clawkb.retrieve.term_stats`). These tests write through another
connection, another KnowledgeBase object and the same one, and check every
search sees the change.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np

from clawkb import KnowledgeBase
from clawkb.index.segment import hash_terms
from clawkb.kb import TextRecord
from clawkb.memory import Memory
from clawkb.retrieve import term_stats
from clawkb.store.memo import StoreMemo


def test_store_memo_forgets_values_after_any_write(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    a = sqlite3.connect(path)
    a.execute("PRAGMA journal_mode=WAL")
    a.execute("CREATE TABLE t (v INTEGER)")
    a.commit()
    b = sqlite3.connect(path)
    memo = StoreMemo(a)
    calls: list[int] = []

    def count() -> int:
        calls.append(1)
        return int(a.execute("SELECT COUNT(*) FROM t").fetchone()[0])

    memo.check()
    assert memo.get("n", count) == 0 and memo.get("n", count) == 0
    memo.check()  # nothing written: the value is kept
    assert memo.get("n", count) == 0 and len(calls) == 1
    b.execute("INSERT INTO t VALUES (1)")  # another connection
    b.commit()
    memo.check()
    assert memo.get("n", count) == 1 and len(calls) == 2
    a.execute("INSERT INTO t VALUES (2)")  # this connection
    a.commit()
    memo.check()
    assert memo.get("n", count) == 2 and len(calls) == 3
    memo.clear()
    memo.check()
    assert memo.get("n", count) == 2 and len(calls) == 4
    a.close()
    b.close()


def _texts(n: int, start: int = 0) -> list[TextRecord]:
    return [
        TextRecord(path=f"d{i}", text=f"UART{i % 3} baud rate note {i}: 串口 波特率 配置 {i}")
        for i in range(start, start + n)
    ]


def test_searches_see_writes_by_another_kb_and_by_their_own(tmp_path: Path) -> None:
    home = tmp_path / "kb"
    with KnowledgeBase.open(home, create=True) as kb:
        kb.index_texts(_texts(5))
    with KnowledgeBase.open(home) as reader, KnowledgeBase.open(home) as writer:
        assert len(reader.search("baud", limit=50).hits) == 5  # memos filled
        writer.index_texts(_texts(3, start=5))  # another connection, another index object
        assert len(reader.search("baud", limit=50).hits) == 8
        Memory(writer, lambda: 1_700_000_000.0).store("baud of the debug UART", namespace="n")
        plain = reader.search("baud", limit=50)
        assert len(plain.hits) == 8
        assert all(not h.anchor.path.startswith("memory://") for h in plain.hits)
        mem = reader.search("baud", limit=50, include_memory=True)
        assert sum(h.anchor.path.startswith("memory://") for h in mem.hits) == 1
        # the reader's own writes
        Memory(reader, lambda: 1_700_000_000.0).store("baud noted twice", namespace="m")
        reader.index_texts(_texts(2, start=8))
        again = reader.search("baud", limit=50)
        assert len(again.hits) == 10
        assert all(not h.anchor.path.startswith("memory://") for h in again.hits)


def test_cached_doc_freqs_equal_the_index_after_adds_and_merges(tmp_path: Path) -> None:
    terms = ["uart0", "uart1", "baud", "串口", "波特", "note", "absent-term", "uart0"]
    with KnowledgeBase.open(tmp_path / "kb", create=True) as kb:
        kb.index_texts(_texts(4))
        seen = []
        for batch in range(12):  # each batch a new segment; merges happen along the way
            got = term_stats.doc_freqs(kb.lexical, terms)
            want = kb.lexical.doc_freqs(hash_terms(terms))
            assert got.dtype == np.int64 and got.tolist() == want.tolist(), batch
            seen.append(tuple(s.name for s in kb.lexical.segments))
            kb.index_texts(_texts(3, start=4 + 3 * batch))
        assert len(set(seen)) == len(seen)  # the segment set changed every time
        assert term_stats.doc_freqs(kb.lexical, ["baud"]).tolist() == [40]
