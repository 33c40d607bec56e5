"""A write costs each server process about once, not once per reader view (issue 20):
the views share the lexical generation and the dense copy of one data state, a
view pinned to an older snapshot keeps its own, a commit that changes no vector
rewrites nothing, and the dense copy's lock is waited for in short steps."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

from clawkb.index import dense as dense_mod
from clawkb.index.dense import DenseIndex, _read_meta
from clawkb.kb import KnowledgeBase
from clawkb.server.runtime import Runtime
from clawkb.store import db, vectors_repo
from clawkb.store.locking import FileLock
from kb_helpers import dense_copy


def _note(folder: Path, i: int) -> None:
    (folder / f"n{i:02d}.md").write_text(
        f"# Note {i}\n\nThe board{i} drives uart{i} at {9600 * (i + 1)} baud.\n\n"
        f"## Power {i}\n\nRail {i} feeds sensor{i} with {i}.{i} volts.\n",
        encoding="utf-8",
    )


def _kb(tmp_path: Path, *, static: bool = False) -> tuple[Path, Path]:
    home, docs = tmp_path / "kb", tmp_path / "docs"
    home.mkdir()
    docs.mkdir()
    if static:
        (home / "config.yaml").write_text("embedding: static\n", "utf-8")
    for i in range(5):
        _note(docs, i)
    with KnowledgeBase.open(home, create=True) as kb:
        kb.index([docs])
    return home, docs


def _hits(res: object) -> list[tuple[str, float]]:
    return [(h.anchor.path, h.score) for h in res.hits]  # type: ignore[attr-defined]


def test_reader_threads_after_a_write_load_the_generation_once(tmp_path: Path) -> None:
    home, docs = _kb(tmp_path)
    runtime = Runtime(home, writer_process=False)
    n = 4
    start, wrote = threading.Barrier(n + 1), threading.Barrier(n + 1)
    seen: dict[int, list[object]] = {k: [] for k in range(n)}
    found: dict[int, list[tuple[str, float]]] = {}

    def reader(k: int) -> None:
        seen[k].append(runtime.read_sync(lambda kb: kb.lexical))
        start.wait(30)
        wrote.wait(60)
        seen[k].append(runtime.read_sync(lambda kb: kb.lexical))
        found[k] = runtime.read_sync(lambda kb: _hits(kb.search("sensor7 volts", limit=3)))

    threads = [threading.Thread(target=reader, args=(k,)) for k in range(n)]
    try:
        for t in threads:
            t.start()
        start.wait(30)
        opened = runtime.lexical_share.opened
        _note(docs, 7)
        runtime.submit(lambda kb: kb.index([docs]), "index").result(60)
        wrote.wait(60)
        for t in threads:
            t.join(60)
        # the four views renewed after the write: one open of the new generation
        assert runtime.lexical_share.opened == opened + 1
        before = {id(seen[k][0]) for k in range(n)}
        after = {id(seen[k][1]) for k in range(n)}
        assert len(before) == 1 and len(after) == 1 and before != after
        with KnowledgeBase.open(home) as kb:  # the same hits and scores as a KB of its own
            alone = _hits(kb.search("sensor7 volts", limit=3))
        assert alone and alone[0][0].endswith("n07.md")
        assert all(found[k] == alone for k in range(n))
    finally:
        runtime.close()


def test_a_view_pinned_before_a_write_keeps_its_generation(tmp_path: Path) -> None:
    home, docs = _kb(tmp_path)
    runtime = Runtime(home, writer_process=False)
    inside, renewed = threading.Event(), threading.Event()
    old: dict[str, object] = {}

    def pinned(kb: KnowledgeBase) -> None:  # a long read that spans a write and a renewal
        old["lexical"] = kb.lexical
        inside.set()
        assert renewed.wait(60)
        old["hits"] = _hits(kb.search("sensor7 volts", limit=3))

    t = threading.Thread(target=lambda: runtime.read_sync(pinned))
    try:
        t.start()
        assert inside.wait(60)
        _note(docs, 7)
        runtime.submit(lambda kb: kb.index([docs]), "index").result(60)
        new = runtime.read_sync(lambda kb: (kb.lexical, _hits(kb.search("sensor7 volts", limit=3))))
        renewed.set()
        t.join(60)
        assert new[0] is not old["lexical"]
        assert new[1] and new[1][0][0].endswith("n07.md")
        assert not any(path.endswith("n07.md") for path, _ in old["hits"])  # type: ignore[attr-defined]
        # the older generation goes once no view holds it
        t2 = threading.Thread(target=lambda: runtime.read_sync(lambda kb: None))
        t2.start()
        t2.join(60)
        assert old["lexical"].lease is None  # type: ignore[attr-defined]
        assert new[0].lease is not None  # type: ignore[attr-defined]
    finally:
        runtime.close()


def test_views_share_the_dense_copy_and_a_stamp_only_change_rewrites_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("static_model")
    from clawkb.embed.run import embed_kb, embed_new

    home, docs = _kb(tmp_path, static=True)
    with KnowledgeBase.open(home) as kb:
        embed_kb(kb)
    a, b, old = (KnowledgeBase.open(home) for _ in range(3))
    try:
        first = dense_copy(a)
        second = dense_copy(b)
        assert second.mat is first.mat and second.ids is first.ids  # loaded once
        db.begin_read(old.conn)  # a view pinned before the next writes
        pinned = dense_copy(old)
        before_ids = pinned.ids.tolist()

        def no_lock(folder: Path) -> object:
            raise AssertionError("the copy's lock was taken for a stamp-only change")

        files = [first.folder / n for n in ("ids.npy", "vecs.npy", "meta.json")]
        stats = [(f.stat().st_ino, f.stat().st_mtime_ns) for f in files]
        _note(docs, 8)  # a write that adds text but no vector
        with KnowledgeBase.open(home) as kb:
            kb.index([docs])
        with monkeypatch.context() as m:
            m.setattr(dense_mod, "_cache_lock", no_lock)
            now = dense_copy(a)
            assert now._stamp == now.stamp() != _read_meta(now.folder / "meta.json")["stamp"]
            assert dense_copy(b).mat is now.mat
        assert [(f.stat().st_ino, f.stat().st_mtime_ns) for f in files] == stats

        with KnowledgeBase.open(home) as kb:  # now new vectors
            embed_new(kb)
            live = vectors_repo.linked_ids(kb.conn, now.mkey)
        fresh = dense_copy(b)
        assert fresh.ids.tolist() == live and len(live) > len(before_ids)
        older = DenseIndex(old.home / "index" / "dense", old.conn, pinned.signature)
        older.refresh()  # on the pinned snapshot: the vectors it had, not the new ones
        assert older.ids.tolist() == before_ids
        assert np.array_equal(np.asarray(older.mat), np.asarray(pinned.mat))
    finally:
        db.end_read(old.conn)
        for kb in (a, b, old):
            kb.close()


def test_the_copys_lock_is_waited_for_in_short_steps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process holds the copy's lock for a moment: the wait starts with a
    1-ms pause and never sleeps longer than 10 ms (it polled every 50 ms)."""
    import clawkb.store.locking as locking

    folder = tmp_path / "copy"
    folder.mkdir()
    other = FileLock(folder / ".lock")
    assert other.try_acquire()  # as another process would (a lock per open file)
    pauses: list[float] = []

    def sleep(s: float) -> None:
        pauses.append(s)
        if len(pauses) == 7:
            other.release()

    monkeypatch.setattr(locking.time, "sleep", sleep)
    with dense_mod._cache_lock(folder):
        assert not FileLock(folder / ".lock").try_acquire()  # held here now
    assert pauses[:5] == [0.001, 0.002, 0.004, 0.008, 0.01]
    assert len(pauses) == 7 and max(pauses) <= dense_mod.LOCK_POLL


def test_views_of_one_data_state_share_results_and_a_write_separates_them(
    tmp_path: Path,
) -> None:
    """Hybrid results are cached per data state, not per view: a second view of the same
    state answers from the first one's entry; after a write the views compute afresh
    (a new state), and the answers are those of a KB of its own."""
    pytest.importorskip("static_model")
    from clawkb.embed.run import embed_kb, embed_new

    home, docs = _kb(tmp_path, static=True)
    with KnowledgeBase.open(home) as kb:
        embed_kb(kb)
    runtime = Runtime(home, writer_process=False)
    runtime.warm()
    steps = [threading.Event() for _ in range(4)]  # view 0, view 1, the write, view 0
    out: dict[int, list[tuple[list[tuple[str, float]], str, object]]] = {0: [], 1: []}

    def ask(kb: KnowledgeBase) -> tuple[list[tuple[str, float]], str, object]:
        res = kb.search("sensor7 volts", limit=3, mode="hybrid")
        status = next((s["status"] for s in res.stages if s["stage"] == "cache"), "miss")
        return _hits(res), status, kb.view_token

    def reader(k: int) -> None:  # view 0 asks first, then view 1; again after the write
        for wait, done in ((None, 0), (2, 3)) if k == 0 else ((0, 1), (3, None)):
            if wait is not None:
                assert steps[wait].wait(120)
            out[k].append(runtime.read_sync(ask))
            if done is not None:
                steps[done].set()

    def write(kb: KnowledgeBase) -> None:
        kb.index([docs])
        embed_new(kb)

    threads = [threading.Thread(target=reader, args=(k,)) for k in range(2)]
    try:
        for t in threads:
            t.start()
        assert steps[1].wait(120)
        _note(docs, 7)
        runtime.submit(write, "index").result(120)
        steps[2].set()
        for t in threads:
            t.join(120)
        (a0, a1), (b0, b1) = out[0], out[1]
        assert a0[2] is not None and a0[2] == b0[2]  # one data state, one token
        assert a0[1] == "miss" and b0[1] == "hit" and a0[0] == b0[0]
        assert a1[2] == b1[2] != a0[2]  # the write: a new state
        assert a1[1] == "miss" and b1[1] == "hit"
        with KnowledgeBase.open(home) as kb:
            alone = _hits(kb.search("sensor7 volts", limit=3, mode="hybrid"))
        assert a1[0] == b1[0] == alone and alone[0][0].endswith("n07.md")
        assert not any(p.endswith("n07.md") for p, _ in a0[0])
    finally:
        runtime.close()
