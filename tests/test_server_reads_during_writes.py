"""Searches on the server do not wait for a write in progress (issue 20: p99 under writes).

A server view that went stale (this process finished a write, or the running
write committed) is renewed without the readers-writer gate when the store and
the index it sees agree, or kept when it already holds every finished write; a
search waits for the gate only when neither can serve it. Real KB, real
runtime threads; the "long write" is a writer job that holds the gate until the
test lets it go.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from clawkb.kb import KnowledgeBase
from clawkb.server.runtime import Runtime

UART = "# UART\n\nThe debug console is UART2 at 1500000 baud.\n"


def _kb(tmp_path: Path) -> Path:
    home, docs = tmp_path / "kb", tmp_path / "docs"
    docs.mkdir()
    (docs / "uart.md").write_text(UART, "utf-8")
    with KnowledgeBase.open(home, create=True) as kb:
        kb.index([docs])
    return home


def _memories(kb: KnowledgeBase, word: str) -> list[str]:
    res = kb.search(word, limit=5, include_memory=True)
    return [h.text for h in res.hits if word in h.text]


def test_a_search_sees_finished_writes_without_waiting_for_the_running_one(
    tmp_path: Path,
) -> None:
    runtime = Runtime(_kb(tmp_path))
    release = threading.Event()
    holding = threading.Event()
    try:
        # one reader thread (so one view) for the whole test
        pool = ThreadPoolExecutor(1)

        def read(fn):  # type: ignore[no-untyped-def]
            return pool.submit(runtime.read_sync, fn)

        assert read(lambda kb: _memories(kb, "zorbleflux")).result(60) == []
        runtime.submit(lambda kb: kb.memory.store("zorbleflux is the lab's wifi name")).result(60)

        def long_write(kb: KnowledgeBase) -> None:  # holds the gate, nothing committed yet
            holding.set()
            release.wait(60)
            kb.memory.store("quintaglow is the backup wifi name")

        done = runtime.submit(long_write, "long")
        assert holding.wait(60)
        # the view predates the finished write: renewed without the gate, it sees it
        fut = read(lambda kb: _memories(kb, "zorbleflux"))
        got = fut.result(30)
        assert got and "zorbleflux" in got[0]
        assert not done.done()  # answered while the write was still running
        release.set()
        done.result(60)
        # once the write is done, the next search sees it (read-your-writes)
        assert read(lambda kb: _memories(kb, "quintaglow")).result(60)
        pool.shutdown()
    finally:
        release.set()
        runtime.close()


def test_a_view_is_kept_while_the_running_write_has_half_applied_changes(
    tmp_path: Path,
) -> None:
    """The running write committed to the store but has not updated the index: a view
    taken now would see the store ahead of the index, so the reader keeps its own
    (which holds every finished write) rather than wait or serve a mixed state."""
    home = _kb(tmp_path)
    runtime = Runtime(home)
    release = threading.Event()
    committed = threading.Event()
    try:
        pool = ThreadPoolExecutor(1)
        assert pool.submit(runtime.read_sync, lambda kb: kb.search("UART2").hits).result(60)

        def half_write(kb: KnowledgeBase) -> None:
            # a store change the index has not applied yet (the index is synced later)
            with kb.repo.transaction():
                kb.repo.remove_document(next(iter(kb.repo.documents_under(str(tmp_path)).values())))
            committed.set()
            release.wait(60)
            from clawkb.ingest.sync import sync_lexical

            with kb.writer():
                sync_lexical(kb.repo, kb.lexical, kb.config.index_batch_chunks)

        done = runtime.submit(half_write, "half")
        assert committed.wait(60)
        hits = pool.submit(runtime.read_sync, lambda kb: kb.search("UART2").hits).result(30)
        assert hits and hits[0].anchor.path.endswith("uart.md")  # the old, consistent view
        assert not done.done()
        release.set()
        done.result(60)
        assert pool.submit(runtime.read_sync, lambda kb: kb.search("UART2").hits).result(60) == []
        pool.shutdown()
    finally:
        release.set()
        runtime.close()
