"""``hit_rows`` gives the rows ``chunks_by_ids`` gives, with document columns kept per store state."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

from clawkb import KnowledgeBase
from clawkb.kb import TextRecord
from clawkb.memory import Memory
from clawkb.store.hit_rows import hit_rows


def _records(version: str) -> list[TextRecord]:
    out = []
    for i in range(6):  # several chunks per document: documents recur across hits
        body = "\n\n".join(
            f"## Part {j}\n\n{version} note {i}.{j}: UART{j} 波特率 {'x' * (400 + 37 * j)}"
            for j in range(5)
        )
        out.append(TextRecord(path=f"doc{i}.md", text=f"# Doc {i}\n\n{body}"))
    return out


def _all_ids(kb: KnowledgeBase) -> list[int]:
    return [r[0] for r in kb.conn.execute("SELECT id FROM chunks ORDER BY id")]


def test_same_rows_as_the_join_for_any_ids(tmp_path: Path) -> None:
    with KnowledgeBase.open(tmp_path / "kb", create=True) as kb:
        kb.index_texts(_records("v1"))
        Memory(kb, lambda: 1_700_000_000.0).store("UART note to self", namespace="n")
        ids = _all_ids(kb)
        assert len(ids) > 12
        rnd = random.Random(3)
        for _ in range(30):
            pick = [*rnd.sample(ids, rnd.randint(1, 12)), 10**9]  # and one that never was
            kb.memo.check()
            assert hit_rows(kb.repo, kb.memo, pick) == kb.repo.chunks_by_ids(pick)
        kb.memo.check()
        memory = hit_rows(kb.repo, kb.memo, ids)
        assert {r.trust for r in memory.values()} >= {"memory", None}


def test_document_changes_show_at_the_next_check(tmp_path: Path) -> None:
    home = tmp_path / "kb"
    with KnowledgeBase.open(home, create=True) as kb:
        kb.index_texts(_records("v1"))
        ids = _all_ids(kb)[:8]
        kb.memo.check()
        before = hit_rows(kb.repo, kb.memo, ids)
        other = sqlite3.connect(home / "clawkb.sqlite")
        other.execute("UPDATE documents SET title = 'Renamed', trust = 'official', domain = 'io'")
        other.commit()
        other.close()
        kb.memo.check()
        after = hit_rows(kb.repo, kb.memo, ids)
        assert after == kb.repo.chunks_by_ids(ids) != before
        assert {(r.title, r.trust, r.domain) for r in after.values()} == {
            ("Renamed", "official", "io")
        }


def test_a_reader_of_an_older_generation_gets_the_retired_rows(tmp_path: Path) -> None:
    home = tmp_path / "kb"
    with KnowledgeBase.open(home, create=True) as kb:
        kb.index_texts(_records("v1"))
    with KnowledgeBase.open(home) as reader:
        old = reader.search("v1 note", limit=20)
        assert old.hits
        with KnowledgeBase.open(home) as writer:
            writer.index_texts(_records("v2"))  # every chunk replaced
        reader.memo.check()
        rows = hit_rows(reader.repo, reader.memo, old.chunk_ids)
        assert rows == reader.repo.chunks_by_ids(old.chunk_ids)
        assert set(rows) == set(old.chunk_ids)
        assert all("v1 note" in r.text for r in rows.values())


def test_a_query_reads_each_chunk_once(tmp_path: Path) -> None:
    """The rank stages and the hits read overlapping rows: the query's scope keeps them."""
    from clawkb.retrieve.source import LocalSource, Scope

    with KnowledgeBase.open(tmp_path / "kb", create=True) as kb:
        kb.index_texts(_records("v1"))
        ids = _all_ids(kb)
        src, scope = LocalSource(kb), Scope()
        reads: list[str] = []
        kb.conn.set_trace_callback(lambda sql: reads.append(sql) if "FROM chunks" in sql else None)
        try:
            kb.memo.check()
            first = src.rows(ids[:8], scope)
            assert len(reads) == 1
            both = src.rows(ids[4:12], scope)  # only the four not read yet are asked for
            wanted = ",".join(str(i) for i in ids[8:12])
            assert len(reads) == 2 and reads[1].endswith(f"IN ({wanted})")
            src.rows(ids[:12], scope)
            assert len(reads) == 2
        finally:
            kb.conn.set_trace_callback(None)
        assert both == kb.repo.chunks_by_ids(ids[4:12])
        assert first == kb.repo.chunks_by_ids(ids[:8])
        assert src.rows(ids[:3], Scope()) == kb.repo.chunks_by_ids(ids[:3])  # a new query reads
