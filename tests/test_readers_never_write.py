"""Readers never write (issue 20, item 3).

Real KB folders, real reader threads and a real writer process (the same
under a running `clawkb serve`: tests/test_kill_under_serve.py and the soak,
bench/soak.py): a search that finds the index behind the store serves what
is published and says so; only writers take the write lock; a reader whose
snapshot predates a newer generation is not told the store is an older copy;
segment files open from many threads without ``ast``.
"""

from __future__ import annotations

import ast
import random
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from clawkb.index.lexical import LexicalIndex
from clawkb.kb import KnowledgeBase
from clawkb.store import db
from safety_helpers import indexed_kb, unique, write_doc

CLAWKB = str(Path(sys.executable).parent / "clawkb")


def _kb(tmp_path: Path, n: int = 40) -> tuple[Path, Path, list[int]]:
    home, ids = indexed_kb(tmp_path, n)
    return home, tmp_path / "notes", ids


def test_only_writers_take_the_write_lock_while_readers_search(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reader threads search while another process indexes: no reader
    thread ever takes the write lock, no search fails, none comes back empty."""
    home, notes, ids = _kb(tmp_path)
    takers: list[str] = []
    real = KnowledgeBase.write_lock

    def recording(self: KnowledgeBase, *a: Any, **kw: Any) -> Any:
        takers.append(threading.current_thread().name)
        return real(self, *a, **kw)

    monkeypatch.setattr(KnowledgeBase, "write_lock", recording)
    stop = threading.Event()
    errors: list[str] = []
    counts = {"searches": 0, "empty": 0, "older": 0}

    def reader() -> None:
        rng = random.Random()
        with KnowledgeBase.open(home) as kb:
            while not stop.is_set():
                i = rng.choice(ids)
                try:
                    res = kb.search(unique(i), limit=3, mode="lexical")
                except Exception as exc:  # counted: the test asserts there are none
                    errors.append(f"{type(exc).__name__}: {exc}")
                    continue
                counts["searches"] += 1
                if not any(h.anchor.path.endswith(f"doc{i:03d}.md") for h in res.hits):
                    counts["empty"] += 1
                counts["older"] += any("older copy" in w for w in res.warnings)
                time.sleep(0.005)  # leave the writer process some CPU

    threads = [threading.Thread(target=reader, name=f"reader-{n}") for n in range(3)]
    for t in threads:
        t.start()
    try:
        rng = random.Random(5)
        # a writer process rewrites files (its store commits run ahead of the
        # index publish for a moment each time)
        for round_ in range(2):
            for i in rng.sample(ids, 10):
                write_doc(notes, i, round_ + 1, rng)
            done = subprocess.run(
                [CLAWKB, "--kb", str(home), "index", str(notes)],
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert done.returncode == 0, done.stderr
    finally:
        stop.set()
        for t in threads:
            t.join(60)
    assert not errors, errors[:5]
    assert counts["searches"] > 20 and counts["empty"] == 0 and counts["older"] == 0, counts
    assert not [name for name in takers if name.startswith("reader-")], set(takers)


def test_a_pinned_reader_is_not_told_the_store_is_an_older_copy(tmp_path: Path) -> None:
    """A reader in a read transaction (a server view) keeps its generation when a
    writer publishes a newer one; the newer one is not an "older copy" of the store."""
    home, notes, _ = _kb(tmp_path, 12)
    with KnowledgeBase.open(home) as reader, KnowledgeBase.open(home) as writer:
        assert reader.search(unique(3)).hits
        db.begin_read(reader.conn)
        generation = reader.lexical.manifest.generation
        (notes / "late.md").write_text("# Late\n\nlatecomerword arrives\n")
        writer.index([notes])
        res = reader.search(unique(3))
        assert not any("older copy" in w or "repaired" in w for w in res.warnings), res.warnings
        assert res.hits and res.hits[0].anchor.path.endswith("doc003.md")
        assert reader.lexical.manifest.generation == generation  # the snapshot's own
        db.end_read(reader.conn)
        assert reader.search("latecomerword").hits  # unpinned: the newest generation


def test_a_reader_behind_the_store_serves_the_published_index(tmp_path: Path) -> None:
    """The store is ahead of the index (a writer died between its commit and the
    publish): a read returns the published results with a warning, without writing;
    a writer (here a background repair under the lock) catches the index up."""
    home, notes, _ = _kb(tmp_path, 12)
    script = (
        "import os, sys\n"
        "from clawkb.kb import KnowledgeBase\n"
        "import clawkb.ingest.pipeline as p\n"
        "def die(*a, **k):\n"
        "    os._exit(9)\n"
        "p.sync_lexical = die\n"  # killed after the store commit, before the publish
        "with KnowledgeBase.open(sys.argv[1]) as kb:\n"
        "    kb.index([sys.argv[2]])\n"
    )
    (notes / "late.md").write_text("# Late\n\nstragglerword arrives\n")
    done = subprocess.run([sys.executable, "-c", script, str(home), str(notes)], timeout=120)
    assert done.returncode == 9
    with KnowledgeBase.open(home) as kb:
        before = kb.lexical.manifest.generation
        res = kb.search(unique(4))
        assert res.hits and res.hits[0].anchor.path.endswith("doc004.md")
        assert any("behind the store" in w for w in res.warnings), res.warnings
        assert kb.lexical.manifest.generation == before  # the reader did not write
    # the repair ran on its own thread under the lock; the KB waited for it on close
    with KnowledgeBase.open(home) as kb:
        res = kb.search("stragglerword")
        assert res.hits and not res.warnings


def test_segments_open_without_ast(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``np.load`` parses .npy headers with ``ast.literal_eval``, which is not
    thread-safe on CPython 3.11; the index reads its headers without it, and
    many threads open the same index at once without an error."""
    home, _, _ = _kb(tmp_path, 30)

    def refuse(*_: Any) -> Any:
        raise AssertionError("ast.literal_eval called while opening the index")

    monkeypatch.setattr(ast, "literal_eval", refuse)
    problems: list[str] = []

    def opener() -> None:
        for _ in range(15):
            idx = LexicalIndex(home / "index" / "lexical", writable=False)
            if idx.damaged:
                problems.append(idx.damaged)
            idx.close()

    threads = [threading.Thread(target=opener) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not problems, problems[:3]
