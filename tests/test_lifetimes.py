"""What a long-running server makes per view and per generation goes when they retire
(issue 20: server RSS flat after warm-up).

A server opens a new :class:`KnowledgeBase` per reader view after every write;
each carries a retriever, a result cache, loaded vectors and memos. These check
that such a KB is freed as soon as it is dropped (by reference counting, not at
a later full garbage collection) and that the index files of retired
generations are not left mapped.
"""

from __future__ import annotations

import gc
import random
import sys
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from clawkb.kb import KnowledgeBase


def _docs(folder: Path, n: int, rev: int = 0) -> None:
    folder.mkdir(exist_ok=True)
    for i in range(n):
        (folder / f"d{i}.md").write_text(
            f"# Doc {i}\n\n## Part\n\nalpha beta word{i} gamma rev{rev}\n", "utf-8"
        )


@contextmanager
def _no_gc() -> Iterator[None]:
    enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _view_is_freed(home: Path, **search: object) -> bool:
    """Search on a second KB over the writer's connection (a server's renewed view),
    drop it, and tell whether it went without the garbage collector."""
    with KnowledgeBase.open(home) as base:
        base.search("word1", limit=3)
        with _no_gc():
            view = KnowledgeBase(base.home, base.conn, base.config)
            view.search("word2 alpha", limit=3, **search)  # type: ignore[arg-type]
            gone = weakref.ref(view)
            view.lexical.close()
            del view
            return gone() is None


def test_a_dropped_view_is_freed_without_the_garbage_collector(tmp_path: Path) -> None:
    home = tmp_path / "kb"
    _docs(tmp_path / "docs", 6)
    with KnowledgeBase.open(home, create=True) as kb:
        kb.index([tmp_path / "docs"])
    assert _view_is_freed(home)


def test_a_dropped_view_with_vectors_is_freed_without_the_garbage_collector(
    tmp_path: Path,
) -> None:
    pytest.importorskip("static_model")
    from clawkb.embed.run import embed_new

    home = tmp_path / "kb"
    home.mkdir()
    (home / "config.yaml").write_text("embedding: static\n", "utf-8")
    _docs(tmp_path / "docs", 6)
    with KnowledgeBase.open(home, create=True) as kb:
        kb.index([tmp_path / "docs"])
        embed_new(kb)
    assert _view_is_freed(home, mode="hybrid")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/maps")
def test_retired_generations_are_not_left_mapped(tmp_path: Path) -> None:
    pytest.importorskip("anyio")
    from clawkb.server.runtime import Runtime

    home, docs = tmp_path / "kb", tmp_path / "docs"
    _docs(docs, 8)
    with KnowledgeBase.open(home, create=True) as kb:
        kb.index([docs])
    index = home / "index" / "lexical"

    def mapped() -> tuple[set[str], int]:
        segs, deleted = set(), 0
        with open("/proc/self/maps") as fh:
            for line in fh:
                if str(index) in line:
                    deleted += line.rstrip().endswith("(deleted)")
                    seg = line.split(str(index) + "/", 1)[1].split("/", 1)[0]
                    segs.add(seg)
        return segs, deleted

    rt = Runtime(home)
    try:
        peak = 0
        for g in range(20):
            _docs(docs, 8, rev=g + 1)
            rt.submit(lambda kb: kb.index([docs], wait=30), "index").result()
            query = f"word{g % 8} rev{g + 1}"
            hits = rt.read_sync(lambda kb, q=query: kb.search(q, limit=3).hits)
            assert hits and hits[0].anchor.path.endswith(f"d{g % 8}.md")
            segs, deleted = mapped()
            live = {p.name for p in index.glob("seg-*")}
            assert deleted == 0, f"generation {g}: files deleted while still mapped"
            assert segs <= live, f"generation {g}: retired segments mapped: {segs - live}"
            peak = max(peak, len(segs))
        # 20 generations, yet only the live segments (merged as they accumulate) are mapped
        assert peak < 20
    finally:
        rt.close()


def test_title_vectors_forget_titles_the_kb_no_longer_has(tmp_path: Path) -> None:
    """Files renamed round after round (new section titles each time): the title
    vectors kept in memory and in the file stay near the KB's current titles."""
    pytest.importorskip("static_model")
    import numpy as np

    from clawkb.embed.base import get_embedder
    from clawkb.embed.titles import STALE_MIN, STALE_SHARE, _Vectors

    embedder = get_embedder("static")
    path = tmp_path / "titles.npz"
    current = [f"Section {i}" for i in range(100)]
    most = 0
    for rnd in range(12):
        current = current[20:] + [f"Renamed {rnd} {i}" for i in range(20)]
        vec = _Vectors(path, "m")  # each round a new view loads the file, as a server's do
        mat = vec.matrix(current, embedder)
        assert mat.shape[0] == len(current)
        most = max(most, len(vec.known))
        fresh = np.asarray(embedder.embed_documents(current[-3:]), np.float32)
        assert np.allclose(mat[-3:], fresh, atol=1e-6)
    bound = max(len(current) + STALE_MIN, len(current) / (1 - STALE_SHARE)) + 20
    assert most <= bound  # 12 rounds renamed 240 titles; without forgetting: 340 kept
    with np.load(path) as f:
        assert len(f["titles"]) <= bound


def _rewrite(folder: Path, i: int, rng: random.Random, rev: int) -> None:
    words = " ".join(rng.choices(_VOCAB, k=120))
    (folder / f"d{i}.md").write_text(
        f"# Doc {i}\n\n## Part\n\nunique{i}x {words} rev{rev}\n\n## More\n\n{words[::-1]}\n",
        "utf-8",
    )


_VOCAB = [f"v{k}" for k in range(300)]


def test_write_generations_do_not_grow_what_the_server_keeps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Many write generations through the server's runtime (files rewritten, indexed,
    searched after each write, as a soak's writer and readers do): once warm, the
    Python objects still alive after a generation (traced by tracemalloc) do not grow
    with the generations. Each write retires passages; a memo that kept them until
    its byte budget filled (memo aging, clawkb.memo.MAX_AGE, made small here so a few
    generations show it) or a view that outlived its generation grows this."""
    pytest.importorskip("anyio")

    from clawkb import memo
    from clawkb.server.runtime import Runtime

    monkeypatch.setattr(memo, "MAX_AGE", 4, raising=False)
    home, docs = tmp_path / "kb", tmp_path / "docs"
    docs.mkdir()
    rng = random.Random(5)
    for i in range(12):
        _rewrite(docs, i, rng, 0)
    with KnowledgeBase.open(home, create=True) as kb:
        kb.index([docs])
    rt = Runtime(home, writer_process=False)

    def generation(g: int) -> None:
        for i in rng.sample(range(12), 3):
            _rewrite(docs, i, rng, g)
        rt.submit(lambda kb: kb.index([docs], wait=30), "index").result()
        for q in (f"unique{g % 12}x", f"v{g % 7} v{g % 5 + 40} v{g % 3 + 90}"):
            hits = rt.read_sync(lambda kb, q=q: kb.search(q, limit=5).hits)
            assert hits
        assert hits is not None

    every = 10
    try:
        traced, _ = _traced_generations(generation, every=every)
    finally:
        rt.close()
    # (main at the time kept ~15 kB a generation here)
    per_generation = _kept_per_generation(traced, every)
    assert per_generation < 5 * 1024, (
        f"{per_generation:.0f} bytes kept per write generation after warm-up; traced {traced}"
    )


def test_title_vectors_saved_by_many_threads_at_once_stay_whole(tmp_path: Path) -> None:
    """Every reader view of a server may save the KB's title vectors; with one shared
    temporary name, two saves at once published a half-written file and searches
    failed (`BadZipFile`) until the next save."""
    import threading

    import numpy as np

    from clawkb.embed.titles import _Vectors

    path = tmp_path / "titles.npz"
    failures: list[str] = []

    def saver(k: int) -> None:
        for rnd in range(15):
            vec = _Vectors(path, "m")
            vec.known = {f"t{k}-{rnd}-{i}": np.full(64, i, np.float32) for i in range(300)}
            vec._save()

    def loader() -> None:
        for _ in range(60):
            try:
                with np.load(path, allow_pickle=False) as f:
                    if len(f["titles"]) != 300 or f["vecs"].shape != (300, 64):
                        failures.append("short file")
            except Exception as exc:  # a half-written file
                failures.append(f"{type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=saver, args=(k,)) for k in range(4)]
    saver(9)
    threads.append(threading.Thread(target=loader))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures
    assert len(_Vectors(path, "m").known) == 300
    assert not list(tmp_path.glob("*.tmp.npz"))


def test_a_worker_whose_writes_others_make_ages_what_it_keeps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``serve --workers``: a worker's views follow writes made by other processes (the
    worker that got the client's write requests, a terminal ``index``) and it may
    never write itself. Each new state of the KB its views renew onto is a write
    generation for it (memos age, free pages go back): on main it counted only its
    own writes, and its memos kept every retired passage until their byte budgets
    filled (12 + 8 + 4 MB in each such worker, round 11 of soak-rss.md). The
    writer here is another KnowledgeBase in this process, as another process would
    be: nothing in the runtime hears of its writes but the files."""
    pytest.importorskip("anyio")

    from clawkb import memo
    from clawkb.server import heap
    from clawkb.server.runtime import Runtime

    monkeypatch.setattr(memo, "MAX_AGE", 4, raising=False)
    monkeypatch.setattr(heap, "_seen", [None], raising=False)
    home, docs = tmp_path / "kb", tmp_path / "docs"
    docs.mkdir()
    rng = random.Random(9)
    for i in range(12):
        _rewrite(docs, i, rng, 0)
    other = KnowledgeBase.open(home, create=True)
    other.index([docs])
    rt = Runtime(home, writer_process=False)

    def generation(g: int) -> None:
        for i in rng.sample(range(12), 3):
            _rewrite(docs, i, rng, g)
        other.index([docs], wait=30)
        for q in (f"unique{g % 12}x", f"v{g % 7} v{g % 5 + 40} v{g % 3 + 90}"):
            hits = rt.read_sync(lambda kb, q=q: kb.search(q, limit=5).hits)
            assert hits

    measured, every = 60, 10
    try:
        traced, seen = _traced_generations(generation, measured=measured, every=every)
    finally:
        rt.close()
        other.close()
    per_generation = _kept_per_generation(traced, every)
    assert per_generation < 5 * 1024, (
        f"{per_generation:.0f} bytes kept per generation another process wrote; traced {traced}"
    )
    # every write of the other KB was seen as one generation here (not one per view)
    assert measured <= memo.generation() - seen <= 2 * measured


def _traced_generations(
    generation: Callable[[int], object], warm: int = 16, measured: int = 60, every: int = 10
) -> tuple[list[int], int]:
    """Run ``warm`` generations, then ``measured`` more under tracemalloc; the traced
    bytes after a collection every ``every`` generations, and the process's memo
    generation counter when the measured ones began."""
    import tracemalloc

    from clawkb import memo

    for g in range(1, warm + 1):
        generation(g)
    seen = memo.generation()
    traced = []
    tracemalloc.start(1)
    try:
        for g in range(warm + 1, warm + measured + 1):
            generation(g)
            if g % every == 0:
                gc.collect()
                traced.append(tracemalloc.get_traced_memory()[0])
    finally:
        tracemalloc.stop()
    return traced, seen


def _kept_per_generation(traced: list[int], every: int) -> float:
    """Bytes kept per generation: the first and last thirds of the checkpoints (taken
    every ``every`` generations), averaged, so one collection's leftovers do not decide."""
    third = len(traced) // 3
    early, late = sum(traced[:third]) / third, sum(traced[-third:]) / third
    return (late - early) / (every * (len(traced) - third))
