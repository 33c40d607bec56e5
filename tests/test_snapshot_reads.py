"""Snapshot reads: searchers never see a hole while a writer re-indexes (issue 9, defect 4).

Real KB folders, real reader threads and processes, a real writer looping
over re-index, delete/add and `reindex`; every file always exists and keeps
its unique word, so every search must find it.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import threading
import time
from pathlib import Path

from clawkb.kb import KnowledgeBase
from safety_helpers import make_corpus, search_loop, write_doc

HELPER = str(Path(__file__).parent / "safety_helpers.py")


def _writer_loop(home: Path, corpus: Path, ids: list[int], seconds: float) -> dict:
    rng = random.Random(3)
    rounds = reindexes = 0
    end = time.monotonic() + seconds
    with KnowledgeBase.open(home) as kb:
        while rounds < 4 or time.monotonic() < end:
            rounds += 1
            for i in rng.sample(ids, 8):
                write_doc(corpus, i, rounds, rng)
            kb.index([corpus], wait=60)
            if rounds % 3 == 0:
                kb.reindex()
                reindexes += 1
    return {"rounds": rounds, "reindexes": reindexes}


def test_readers_see_old_version_until_new_one_is_published(tmp_path: Path) -> None:
    corpus = tmp_path / "notes"
    ids = make_corpus(corpus, 40)
    home = tmp_path / "kb"
    with KnowledgeBase.open(home, create=True) as kb:
        kb.index([corpus])
    seconds = 6.0
    stop = tmp_path / "stop"
    procs = [
        subprocess.Popen(
            [sys.executable, HELPER, str(home), str(seconds + 30), json.dumps(ids), str(stop)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(3)
    ]
    results: list[dict] = []
    threads = [
        threading.Thread(
            target=lambda: results.append(search_loop(str(home), ids, seconds + 30, str(stop)))
        )
        for _ in range(3)
    ]
    for t in threads:
        t.start()
    writer = _writer_loop(home, corpus, ids, seconds)
    stop.touch()
    for t in threads:
        t.join()
    for p in procs:
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
        results.append(json.loads(out))
    assert writer["rounds"] >= 3 and writer["reindexes"] >= 1, writer
    done = sum(r["done"] for r in results)
    assert done > 50, results
    assert sum(r["errors"] for r in results) == 0, results
    assert sum(r["empty"] for r in results) == 0, results


def test_a_reader_holding_a_generation_keeps_its_files_and_rows(tmp_path: Path) -> None:
    """A reader's leased generation survives later publishes; it refreshes on the next search."""
    corpus = tmp_path / "notes"
    make_corpus(corpus, 5)
    home = tmp_path / "kb"
    with KnowledgeBase.open(home, create=True) as kb:
        kb.index([corpus])
    reader = KnowledgeBase.open(home)
    try:
        old = reader.lexical
        old_ids, _, _ = old.search(["needle001q"], k=3)
        assert len(old_ids) == 1
        rng = random.Random(1)
        with KnowledgeBase.open(home) as writer:
            for round_ in range(1, 4):
                write_doc(corpus, 1, round_, rng)
                writer.index([corpus])
            writer.reindex()
        # The old generation's segments and the old chunk row are still there.
        again, _, _ = old.search(["needle001q"], k=3)
        assert again.tolist() == old_ids.tolist()
        row = reader.repo.chunks_by_ids(old_ids.tolist())[int(old_ids[0])]
        assert "version0" in row.text
        # A search moves the reader to the newest generation.
        res = reader.search("needle001q")
        assert reader.lexical is not old
        assert next(h.text for h in res.hits if "needle001q" in h.text).count("version3") > 0
    finally:
        reader.close()
    # With the reader gone, the next writer deletes what only it used.
    with KnowledgeBase.open(home) as writer, writer.writer():
        pass
    retired = writer_count(home, "SELECT COUNT(*) FROM retired_chunks")
    assert retired == 0


def writer_count(home: Path, sql: str) -> int:
    import sqlite3

    conn = sqlite3.connect(home / "clawkb.sqlite")
    try:
        return int(conn.execute(sql).fetchone()[0])
    finally:
        conn.close()


def test_filters_of_an_older_generation_see_its_retired_chunks(tmp_path: Path) -> None:
    """Path filters and the memory filter apply to the chunks the reader's generation holds."""
    from clawkb.retrieve.filters import Filters
    from clawkb.retrieve.query import Query

    corpus = tmp_path / "notes"
    make_corpus(corpus, 4)
    home = tmp_path / "kb"
    with KnowledgeBase.open(home, create=True) as kb:
        kb.index([corpus])
        kb.memory.store("needle002q lives in a memory too")
    reader = KnowledgeBase.open(home)
    try:
        old = reader.lexical
        with KnowledgeBase.open(home) as writer:
            write_doc(corpus, 2, 1, random.Random(5))
            writer.index([corpus])
            # the memory's chunks are retired, the old generation still has them
            writer.memory.forget([m.id for m in writer.memory.list()])
        reader.lexical = old  # the pipeline reads the generation the reader holds
        res = reader.run_prepared(Query("needle002q", filters=Filters(path_globs=("*doc002.md",))))
        assert [h.anchor.path.endswith("doc002.md") for h in res.hits] == [True]
        plain = reader.run_prepared(Query("needle002q memory"))
        assert plain.hits and not any(h.anchor.path.startswith("memory://") for h in plain.hits)
    finally:
        reader.close()
