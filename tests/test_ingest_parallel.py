"""Parallel ingest (issue 14 item 3): worker processes must change nothing but speed.

Real worker processes, real SQLite, real parsers on real files: a KB built with
two workers holds the same documents, chunk ids and anchors and answers every
query with the same ids and scores as one built in a single process; bad files
are reported per file; a worker that dies fails only its own task.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from clawkb.ingest import pipeline
from clawkb.ingest.pipeline import FILES_PER_TASK, POOL_MIN_TASKS, RECORDS_PER_TASK
from clawkb.ingest.workers import WorkerDied, WorkerPool
from clawkb.kb import KnowledgeBase, TextRecord

WORDS = ["ddr", "阻抗", "走线", "stm32f401re", "0x4001_3000", "config_smp", "uart", "boot", "电源"]
QUERIES = ("ddr 阻抗", "0x40013000", "uniq77", "电源 boot", "uart config_smp", "走线")


def _write_tree(root: Path, n: int) -> None:
    rng = random.Random(5)
    for i in range(n):
        d = root / f"g{i % 4}"
        d.mkdir(parents=True, exist_ok=True)
        body = "\n\n".join(" ".join(rng.choice(WORDS) for _ in range(30)) for _ in range(3))
        if i % 3:
            (d / f"n{i:03d}.md").write_text(f"# Note {i}\n\n{body} uniq{i}\n", encoding="utf-8")
        else:
            (d / f"n{i:03d}.txt").write_text(f"{body} uniq{i}\n", encoding="utf-8")
    (root / "bad.md").write_bytes(b"\x00\x01\x02binary\x00" * 50)  # binary content in a .md
    (root / "bad.json").write_text('{"a": [1, 2,', encoding="utf-8")  # broken JSON


def _snapshot(kb: KnowledgeBase) -> tuple[list[tuple], list[list[tuple[int, float]]]]:
    rows = kb.conn.execute(
        "SELECT c.id, d.path, c.anchor, c.ordinal, c.content_hash FROM chunks c"
        " JOIN documents d ON d.id = c.doc_id ORDER BY c.id"
    ).fetchall()
    results = []
    for q in QUERIES:
        ids, scores = kb.search_ids(q, limit=10)
        results.append([(int(i), float(s)) for i, s in zip(ids, scores, strict=True)])
    return rows, results


def _build_files(home: Path, corpus: Path, workers: int, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("CLAWKB_INGEST_WORKERS", str(workers))
    monkeypatch.delenv("CLAWKB_INDEX_WORKERS", raising=False)
    started: list[int] = []

    class CountedPool(WorkerPool):
        def __init__(self, n: int, window: int = 2) -> None:
            started.append(n)
            super().__init__(n, window)

    monkeypatch.setattr(pipeline, "WorkerPool", CountedPool)
    with KnowledgeBase.open(home, create=True) as kb:
        assert kb.config.ingest_workers == workers
        ticks: list[tuple[int, int]] = []
        report = kb.index([corpus], progress=lambda done, total, _path: ticks.append((done, total)))
        assert started == ([] if workers == 1 else [workers])
        total = report.added + report.failed
        assert ticks == [(i, total) for i in range(1, total + 1)]  # progress counts every file
        return report, _snapshot(kb)


def test_two_workers_build_the_same_kb_from_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    corpus = tmp_path / "corpus"
    n = FILES_PER_TASK * (POOL_MIN_TASKS + 2)  # enough tasks for the pool to start
    _write_tree(corpus, n)
    r1, snap1 = _build_files(tmp_path / "one", corpus, 1, monkeypatch)
    r2, snap2 = _build_files(tmp_path / "two", corpus, 2, monkeypatch)
    assert r1.added == r2.added == n
    assert r1.failed == r2.failed == 2
    assert sorted(r1.errors) == sorted(r2.errors)
    reasons = {Path(p).name: why for p, why in r2.errors}
    assert set(reasons) == {"bad.md", "bad.json"} and all(reasons.values())
    assert snap1 == snap2  # same chunk ids, anchors, and search ids + scores
    assert all(snap1[1]), "every query finds something"


def test_two_workers_build_the_same_kb_from_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(9)
    recs = [
        TextRecord(path=f"r{i}", text=" ".join(rng.choice(WORDS) for _ in range(40)) + f" uniq{i}")
        for i in range(RECORDS_PER_TASK * (POOL_MIN_TASKS + 1) + 17)
    ]
    recs.append(TextRecord(path="r5", text="a second record with the same path replaces it"))
    snaps = []
    # Small index batches: the index is synced (on the same workers, with parse
    # tasks still in flight) several times during the run.
    monkeypatch.setenv("CLAWKB_INDEX_BATCH_CHUNKS", "1100")
    monkeypatch.delenv("CLAWKB_INDEX_WORKERS", raising=False)
    for workers in (1, 2):
        monkeypatch.setenv("CLAWKB_INGEST_WORKERS", str(workers))
        with KnowledgeBase.open(tmp_path / f"w{workers}", create=True) as kb:
            report = kb.index_texts(iter(recs))  # a generator: read as the run goes
            assert report.added == len(recs) - 1 and report.updated == 1
            snaps.append(_snapshot(kb))
            assert kb.search("second record").hits[0].anchor.path == "r5"
            again = kb.index_texts(recs)  # r5 changes twice again, the rest is unchanged
            assert again.unchanged == len(recs) - 2 and again.updated == 2 and again.added == 0
    assert snaps[0] == snaps[1]


def test_streams_sharing_the_workers_get_their_own_answers() -> None:
    with WorkerPool(2, window=2) as pool:
        outer = pool.imap("builtins:len", [("x" * i,) for i in range(20)])
        got = [next(outer)[1] for _ in range(3)]  # tasks 3.. are in flight now
        assert pool.map("builtins:abs", [(-5,), (-6,), (-7,)]) == [5, 6, 7]
        got += [r for _, r in outer]
        assert got == list(range(20))


def test_an_update_run_in_parallel_replaces_changed_files_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    corpus = tmp_path / "corpus"
    n = FILES_PER_TASK * (POOL_MIN_TASKS + 1)
    _write_tree(corpus, n)
    monkeypatch.setenv("CLAWKB_INGEST_WORKERS", "2")
    with KnowledgeBase.open(tmp_path / "kb", create=True) as kb:
        kb.index([corpus])
        changed = sorted(corpus.rglob("n0*.md"))[:5]
        for p in changed:
            p.write_text(
                p.read_text(encoding="utf-8") + "\n\nfreshword appended\n", encoding="utf-8"
            )
        (corpus / "bad.json").write_text('{"fixed": true}', encoding="utf-8")
        report = kb.index([corpus])
        assert report.updated == 5 and report.added == 1 and report.failed == 1
        assert report.unchanged == n - 5
        found = {h.anchor.path for h in kb.search("freshword", limit=20).hits}
        assert found == {p.as_posix() for p in changed}
        chunks, anchors = kb.conn.execute(
            "SELECT COUNT(*), COUNT(DISTINCT anchor) FROM chunks"
        ).fetchone()
        assert chunks == anchors
        live = sum(s.n_live for s in kb.lexical.segments)
        assert live == chunks


def test_a_dying_worker_fails_only_its_task_and_is_replaced() -> None:
    with WorkerPool(2, window=2) as pool:
        tasks = [("builtins:len", ("abc",))] * 3 + [("os:_exit", (7,))]
        tasks += [("builtins:len", ("ab",))] * 4
        out = []
        for func, args in tasks:
            out.extend(r for _, r in pool.imap(func, [args]))
        assert out[:3] == [3, 3, 3] and out[4:] == [2, 2, 2, 2]
        assert isinstance(out[3], WorkerDied) and "status 7" in str(out[3])
        # in one stream too: tasks queued behind the lost one on its worker are redone
        code = ["x = 1"] * 3 + ["import os; os._exit(3)"] + ["y = 2"] * 5
        results = [r for _, r in pool.imap("builtins:exec", [(c,) for c in code])]
        assert isinstance(results[3], WorkerDied)
        assert results[:3] + results[4:] == [None] * 8


def test_the_pool_reads_its_input_only_a_window_ahead() -> None:
    consumed = 0

    def tasks():
        nonlocal consumed
        for i in range(50):
            consumed += 1
            yield ("x" * i,)

    with WorkerPool(2, window=2) as pool:
        it = pool.imap("builtins:len", tasks())
        assert next(it) == (("",), 0)
        assert consumed <= 2 * 2 + 1
        assert [r for _, r in it] == list(range(1, 50))


def test_a_task_error_is_returned_not_raised() -> None:
    with WorkerPool(1) as pool:
        out = [r for _, r in pool.imap("builtins:int", [("12",), ("twelve",), ("3",)])]
    assert out[0] == 12 and out[2] == 3
    assert isinstance(out[1], ValueError) and "twelve" in str(out[1])
