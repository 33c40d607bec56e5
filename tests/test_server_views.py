"""The server's reader views share what does not change between writes: one embedder,
and a dense search copy the writer has already brought up to date."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from clawkb.embed.run import embed_kb, embed_new, kb_embedder
from clawkb.index.dense import DenseIndex, _read_meta
from clawkb.kb import KnowledgeBase
from clawkb.server.runtime import Runtime


def _alpha_kb(tmp_path: Path, *, static: bool = True, embed: bool = False) -> Path:
    """A KB of one file (set up for the static model), indexed (and embedded)."""
    home, docs = tmp_path / "kb", tmp_path / "docs"
    home.mkdir()
    docs.mkdir()
    if static:
        (home / "config.yaml").write_text("embedding: static\n", "utf-8")
    (docs / "a.md").write_text("# Alpha\n\nthe uart driver of the alpha board\n", "utf-8")
    with KnowledgeBase.open(home, create=True) as kb:
        kb.index([docs])
        if embed:
            embed_kb(kb)
    return home


def test_views_share_one_embedder_and_find_the_dense_copy_ready(tmp_path: Path) -> None:
    pytest.importorskip("static_model")
    home = _alpha_kb(tmp_path, embed=True)
    docs = tmp_path / "docs"
    runtime = Runtime(home)
    try:
        runtime.warm()
        seen: list[object] = []

        def look() -> None:
            seen.append(runtime.read_sync(kb_embedder))

        threads = [threading.Thread(target=look) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert len(seen) == 3 and seen[0] is seen[1] is seen[2]

        (docs / "b.md").write_text("# Beta\n\nthe spi flash of the beta board\n", "utf-8")

        def write(kb: KnowledgeBase) -> None:
            kb.index([docs])
            embed_new(kb)

        runtime.submit(write, "index").result(120)
        # the writer refreshed the dense copy before any reader asked for it
        with KnowledgeBase.open(home) as kb:
            sig = kb_embedder(kb).signature()
            dense = DenseIndex(home / "index" / "dense", kb.conn, sig)
            assert _read_meta(dense.folder / "meta.json")["stamp"] == dense.stamp()
        res = runtime.read_sync(lambda kb: kb.search("spi flash beta", limit=3))
        assert res.hits and res.hits[0].anchor.path.endswith("b.md")
        assert runtime.read_sync(kb_embedder) is seen[0]  # a renewed view, the same model
    finally:
        runtime.close()


def test_the_mcp_kb_embeds_through_the_servers_worker(tmp_path: Path) -> None:
    """`/mcp` inside `serve` has its own KB; its queries go to the embedding worker the
    views share, so no model is loaded in the server process (issue 20)."""
    pytest.importorskip("static_model")
    from clawkb.embed.worker import WorkerEmbedder

    home = _alpha_kb(tmp_path)
    runtime = Runtime(home)  # no vectors yet: no worker started
    mcp_kb = KnowledgeBase.open(home)
    try:
        runtime.lend_embedder(mcp_kb)
        with KnowledgeBase.open(home) as kb:  # vectors appear while the server runs
            embed_kb(kb)
        res = mcp_kb.search("uart driver alpha", limit=3, mode="hybrid")
        assert res.hits and res.hits[0].anchor.path.endswith("a.md")
        worker = runtime.read_sync(kb_embedder)
        assert isinstance(worker, WorkerEmbedder)
        assert runtime.shared_embedder(mcp_kb) is worker  # the one the MCP KB used
        assert kb_embedder(mcp_kb).signature() == worker.signature()
    finally:
        mcp_kb.close()
        runtime.close()


def test_views_of_ended_reader_threads_are_closed(tmp_path: Path) -> None:
    """The reader thread pool lets idle threads go and starts new ones; the views of
    ended threads (a connection, an index, a spare each) are closed, not kept for
    the life of the server."""
    home = _alpha_kb(tmp_path, static=False)
    runtime = Runtime(home)
    try:
        views: list[KnowledgeBase] = []
        for _ in range(6):  # one short-lived thread after another, as a pool under bursts
            t = threading.Thread(target=lambda: views.append(runtime.read_sync(lambda kb: kb)))
            t.start()
            t.join(60)
        assert len(views) == 6 and len({id(v) for v in views}) == 6
        assert len(runtime._slots) == 1  # only the last thread's view is still open
        for old in views[:-1]:
            with pytest.raises(Exception, match="closed"):
                old.conn.execute("SELECT 1")
        hits = runtime.read_sync(lambda kb: kb.search("uart alpha", limit=3).hits)
        assert hits and hits[0].anchor.path.endswith("a.md")
    finally:
        runtime.close()
