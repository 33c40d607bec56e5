"""A memory's row and its searchable document are written in one transaction:
a failure between the two leaves neither, on a real KB file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import clawkb.ingest.pipeline as ingest_pipeline
from clawkb import KnowledgeBase
from clawkb.memory import Memory
from clawkb.store import memory_repo

TEXT = "The LX board I2C1 needs 4.7k pull-ups"


def _open(home: Path) -> KnowledgeBase:
    return KnowledgeBase.open(home, create=True)


@pytest.mark.parametrize("when", ["before", "after"])
def test_failed_document_write_leaves_no_memory_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, when: str
) -> None:
    """The document write fails before (nothing written) or after (its rows written,
    then an error): either way neither the memory row nor its document survives."""
    real = ingest_pipeline.write_batch

    def failing(*args: Any, **kwargs: Any) -> int:
        if when == "after":
            real(*args, **kwargs)
        raise OSError(28, "No space left on device")

    home = tmp_path / "kb"
    with _open(home) as kb:
        mem = Memory(kb)
        monkeypatch.setattr(ingest_pipeline, "write_batch", failing)
        with pytest.raises(OSError, match="No space"):
            mem.store(TEXT, namespace="bringup")
        monkeypatch.setattr(ingest_pipeline, "write_batch", real)
        assert mem.list() == []
        assert kb.search("pull-ups", include_memory=True).hits == []

    with _open(home) as kb:  # what is on disk, read by a fresh connection
        assert memory_repo.count(kb.conn, 2e9) == {}
        paths = [r[0] for r in kb.conn.execute("SELECT path FROM documents")]
        assert not [p for p in paths if p.startswith("memory://")]
        rec = Memory(kb).store(TEXT, namespace="bringup").record  # a retry works
        hits = Memory(kb).recall("pull-ups", namespace="bringup").hits
        assert [h.memory.id for h in hits if h.memory] == [rec.id]


def test_successful_store_is_row_and_document(tmp_path: Path) -> None:
    with _open(tmp_path / "kb") as kb:
        rec = Memory(kb).store(TEXT, namespace="bringup").record
        assert memory_repo.get(kb.conn, rec.id) is not None
        assert kb.repo.document(rec.path) is not None
        hits = kb.search("pull-ups", include_memory=True).hits
        assert [h.anchor.path for h in hits] == [rec.path]
