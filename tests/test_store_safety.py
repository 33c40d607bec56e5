"""Transactions, store identity and refusal of unusable stores (issue 9: must-have 3, defects 6, 11)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from clawkb.errors import SchemaTooNewError, StoreError
from clawkb.kb import KnowledgeBase
from clawkb.store import db


def test_a_failure_mid_ingest_rolls_back_and_the_next_write_works(tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "a.md").write_text("# A\n\nalpha text here\n")
    (notes / "b.md").write_text("# B\n\nbravo text here\n")
    kb = KnowledgeBase.open(tmp_path / "kb", create=True)  # one long-lived KB, like a server
    try:
        real = kb.repo.insert_chunk_values

        def explode(docs: list) -> int:
            real(docs)  # half of the batch's work is done ...
            raise RuntimeError("disk on fire")  # ... then the write fails

        kb.repo.insert_chunk_values = explode  # type: ignore[method-assign]
        with pytest.raises(RuntimeError, match="disk on fire"):
            kb.index([notes])
        assert not kb.conn.in_transaction
        assert kb.repo.document((notes / "b.md").as_posix()) is None  # rolled back whole
        kb.repo.insert_chunk_values = real  # type: ignore[method-assign]
        report = kb.index([notes])
        assert report.failed == 0
        assert [h.anchor.path for h in kb.search("bravo").hits] == [(notes / "b.md").as_posix()]
        stored = kb.memory.store("the next write works too")
        assert stored.created
    finally:
        kb.close()


def test_transaction_helper_commits_rolls_back_and_nests(tmp_path: Path) -> None:
    conn = db.connect(tmp_path, create=True)
    try:
        with db.transaction(conn):
            db.set_meta(conn, "k", "1")
        with pytest.raises(ValueError), db.transaction(conn):
            db.set_meta(conn, "k", "2")
            raise ValueError
        assert db.get_meta(conn, "k") == "1" and not conn.in_transaction
        with db.transaction(conn):
            db.set_meta(conn, "k", "3")
            with pytest.raises(KeyError), db.transaction(conn):  # a savepoint
                db.set_meta(conn, "k", "4")
                raise KeyError
        assert db.get_meta(conn, "k") == "3"
    finally:
        conn.close()


@pytest.mark.parametrize("content", [b"", b"this is a text file, not a database\n" * 10])
def test_a_store_file_that_is_not_sqlite_is_an_error_not_a_fresh_kb(
    tmp_path: Path, content: bytes
) -> None:
    home = tmp_path / "kb"
    home.mkdir()
    (home / "clawkb.sqlite").write_bytes(content)
    for create in (False, True):
        with pytest.raises(StoreError, match=r"clawkb\.sqlite"):
            KnowledgeBase.open(home, create=create)
    assert (home / "clawkb.sqlite").read_bytes() == content


def test_a_foreign_sqlite_database_is_refused(tmp_path: Path) -> None:
    home = tmp_path / "kb"
    home.mkdir()
    conn = sqlite3.connect(home / "clawkb.sqlite")
    conn.execute("CREATE TABLE photos (id INTEGER)")
    conn.commit()
    conn.close()
    with pytest.raises(StoreError, match="not a clawkb store"):
        KnowledgeBase.open(home)


def _rollback_journal_kb(home: Path, version: str) -> bytes:
    KnowledgeBase.open(home, create=True).close()
    conn = sqlite3.connect(home / "clawkb.sqlite")
    conn.execute("PRAGMA journal_mode=DELETE")
    conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (version,))
    conn.commit()
    conn.close()
    return (home / "clawkb.sqlite").read_bytes()


def test_a_future_schema_version_is_refused_without_touching_the_file(tmp_path: Path) -> None:
    home = tmp_path / "kb"
    before = _rollback_journal_kb(home, "99")
    with pytest.raises(SchemaTooNewError, match="schema version 99"):
        KnowledgeBase.open(home)
    assert (home / "clawkb.sqlite").read_bytes() == before  # still rollback-journal mode
    assert not (home / "clawkb.sqlite-wal").exists()


def test_every_kb_has_a_store_identity_recorded_in_the_index(tmp_path: Path) -> None:
    with KnowledgeBase.open(tmp_path / "kb", create=True) as kb:
        kb.index_texts([])
        assert len(kb.store_id) == 32
        with kb.writer():
            pass
        kb.reindex()
        assert kb.lexical.manifest.store_id == kb.store_id
