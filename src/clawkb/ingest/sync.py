"""Bring the lexical index up to date with the store's change log.

The store is the truth; the index records the last change sequence it
applied. Replaying is idempotent, so a crash at any point is repaired by the
next sync.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from clawkb.errors import IndexError_
from clawkb.index.lexical import LexicalIndex
from clawkb.index.segment import (
    DocFields,
    DocTexts,
    build_arrays,
    release_free_heap,
    write_segment,
)
from clawkb.ingest.workers import WorkerPool
from clawkb.store import db, pragmas
from clawkb.store.repo import Repository
from clawkb.text import tokenize

#: Below this many new chunks a batch is inverted in-process (workers cost ~0.2 s).
PARALLEL_MIN_CHUNKS = 4000
#: The same with the ingest run's worker pool, whose processes are already running.
POOL_MIN_CHUNKS = 2000

#: Largest peak RSS (KiB) any index worker of this process reported (benchmarks).
worker_peak_kb = 0


def doc_fields(chunk_id: int, title: str, heading_json: str, kind: str, text: str) -> DocFields:
    """Split a chunk into BM25F fields: title + heading path, body, code.

    Consecutive chunks of one document mostly share title and heading path,
    so the last one's title tokens are reused (the lists are shared: callers
    only read them).
    """
    head = _head_tokens(title, heading_json)
    toks = tokenize(text)
    if kind == "code":
        return DocFields(chunk_id, head, [], toks)
    return DocFields(chunk_id, head, toks, [])


def doc_texts(chunk_id: int, title: str, heading_json: str, kind: str, text: str) -> DocTexts:
    """:func:`doc_fields` untokenized: the index tokenizes and counts in one pass."""
    head = _head_text(title, heading_json)
    if kind == "code":
        return DocTexts(chunk_id, head, "", text)
    return DocTexts(chunk_id, head, text, "")


def _head_text(title: str, heading_json: str) -> str:
    """Title and heading path as one text (the title once if the path repeats it)."""
    if heading_json == "[]":
        return title
    heading = json.loads(heading_json)
    return " ".join([title, *heading]) if title not in heading else " ".join(heading)


#: (title, heading json, their tokens) of the last chunk seen by doc_fields.
_last_head: tuple[str, str, list[str]] = ("", "[]", [])


def _head_tokens(title: str, heading_json: str) -> list[str]:
    global _last_head
    last_title, last_heading, toks = _last_head
    if title == last_title and heading_json == last_heading:
        return toks
    toks = tokenize(_head_text(title, heading_json))
    _last_head = (title, heading_json, toks)
    return toks


def sync_lexical(
    repo: Repository,
    lexical: LexicalIndex,
    batch_chunks: int = 20000,
    progress: Callable[[int], None] | None = None,
    *,
    allow_rebuild: bool = True,
    pool: WorkerPool | None = None,
    workers: int | None = None,
) -> int:
    """Apply pending changes in batches; return the number of changes applied.

    Each batch is published as a new index generation. An index that cannot
    be replayed (damaged, from another store, ahead of the store after a
    restore, or behind a pruned log) is rebuilt instead.
    """
    if allow_rebuild and needs_rebuild(repo, lexical):
        rebuild_lexical(repo, lexical, batch_chunks, pool=pool, workers=workers)
        return 0
    applied = 0
    while True:
        changes = repo.changes_since(lexical.applied_seq, batch_chunks)
        if not changes:
            break
        last_seq = changes[-1][0]
        added: dict[int, bool] = {}
        deletes: list[int] = []
        for _, op, cid in changes:
            if op == "add":
                added[cid] = True
            else:
                added.pop(cid, None)
                deletes.append(cid)
        _apply_batch(repo, lexical, sorted(added), deletes, last_seq, pool, workers)
        applied += len(changes)
        if progress:
            progress(len(changes))
    if applied:
        _tidy_store(repo, lexical)
        release_free_heap()  # the batch's rows and merge buffers, before queries follow
    return applied


def index_problem(
    repo: Repository, lexical: LexicalIndex, *, store_id: str | None = None, top: int | None = None
) -> str | None:
    """Why the index cannot be brought up to date by replaying the log (or None).

    ``store_id`` and ``top`` (the store's latest change seq) may be passed
    when the caller has them, to keep the per-search check to no queries.
    """
    if lexical.damaged:
        return lexical.damaged
    if store_id is None:
        store_id = db.get_meta(repo.conn, "store_id")
    built_from = lexical.manifest.store_id
    if built_from and store_id and built_from != store_id:
        return (
            f"{lexical.folder}: the index was built from another store"
            f" (id {built_from[:8]}, the store is {store_id[:8]})"
        )
    if top is None:
        top = repo.max_seq()
    if lexical.applied_seq > top:
        return (
            f"{lexical.folder}: the index is ahead of the store (change {lexical.applied_seq} >"
            f" {top}): the store was replaced by an older copy"
        )
    return None


def needs_rebuild(repo: Repository, lexical: LexicalIndex) -> bool:
    if index_problem(repo, lexical) is not None:
        return True
    # The log was pruned past what this index saw (or a rebuild was cut
    # short): replaying cannot repair it.
    return lexical.applied_seq < repo.pruned_upto() or lexical.applied_seq < 0


def rebuild_lexical(
    repo: Repository,
    lexical: LexicalIndex,
    batch_chunks: int = 20000,
    *,
    pool: WorkerPool | None = None,
    workers: int | None = None,
) -> int:
    """Build a whole new index from every chunk in the store, then switch to it.

    The current index stays published (and searchable) until the new one is
    complete; if reading the store fails, the old index is left untouched.
    """
    with repo.read_snapshot():  # the chunk ids and the seq they correspond to
        ids = repo.all_chunk_ids()
        seq = repo.max_seq()
    lexical.begin_rebuild()
    try:
        for i in range(0, len(ids), batch_chunks):
            _apply_batch(repo, lexical, ids[i : i + batch_chunks], [], -1, pool, workers)
    except BaseException:
        lexical.abort_rebuild()
        raise
    lexical.store_id = db.get_meta(repo.conn, "store_id") or lexical.store_id
    lexical.finish_rebuild(seq)
    # Changes committed after the snapshot are replayed from the log.
    sync_lexical(repo, lexical, batch_chunks, allow_rebuild=False, pool=pool, workers=workers)
    _tidy_store(repo, lexical)
    return len(ids)


def _tidy_store(repo: Repository, lexical: LexicalIndex) -> None:
    """Prune the applied log, and retired chunks no generation in use still shows."""
    with repo.transaction():
        repo.prune_changes(lexical.applied_seq)
        repo.purge_retired(lexical.oldest_seq_in_use)


def _workers(pool: WorkerPool | None = None, workers: int | None = None) -> int:
    """Processes that invert one batch: ``CLAWKB_INDEX_WORKERS``, else the ingest
    pool's size, else the caller's ``workers`` setting, else up to 4 cores."""
    env = os.environ.get("CLAWKB_INDEX_WORKERS")
    if env:
        return max(1, int(env))
    if pool is not None:
        return pool.n
    if workers is not None:
        return max(1, workers)
    return max(1, min(os.cpu_count() or 1, 4))


def _apply_batch(
    repo: Repository,
    lexical: LexicalIndex,
    add_ids: Sequence[int],
    deletes: Sequence[int],
    seq: int,
    pool: WorkerPool | None = None,
    n_workers: int | None = None,
) -> None:
    """Invert new chunks (in parallel worker processes when the batch is large).

    With an ingest ``pool`` its persistent workers do it (no interpreter start
    per batch); otherwise fresh worker processes are started for the batch.
    """
    workers = _workers(pool, n_workers)
    db_file = _db_file(repo)
    least = PARALLEL_MIN_CHUNKS if pool is None else POOL_MIN_CHUNKS
    if workers < 2 or len(add_ids) < least or db_file is None:
        adds = (doc_texts(*row) for row in repo.index_rows(add_ids))
        lexical.apply(adds, deletes, seq)
        return
    # Each worker reads its share of rows itself, tokenizes, inverts and writes a
    # whole segment; the parent only registers the finished folders. Tokenizing
    # is the ingest bottleneck, so this scales with cores.
    step = -(-len(add_ids) // workers)
    parts = [list(add_ids[i : i + step]) for i in range(0, len(add_ids), step)]
    folders = lexical.reserve_segments(len(parts))
    global worker_peak_kb
    if pool is not None and workers <= pool.n:
        args = [(db_file, part, str(f)) for part, f in zip(parts, folders, strict=True)]
        try:
            peaks = pool.map("clawkb.ingest.sync:_build_task", args)
        except Exception as exc:
            raise IndexError_(f"an index worker failed: {exc}") from exc
        # each answer is _build_task's peak RSS (an int)
        worker_peak_kb = max([worker_peak_kb, *(p for p in peaks if isinstance(p, int))])
        lexical.apply((), deletes, seq, prebuilt=folders)
        return
    # Workers are fresh interpreters (`python -m clawkb.ingest.sync`), not forks:
    # they inherit neither the caller's memory nor its threads, and unlike the
    # spawn/forkserver start methods they never re-import the caller's script.
    procs = []
    for part, folder in zip(parts, folders, strict=True):
        cmd = [sys.executable, "-m", "clawkb.ingest.sync", db_file, str(folder)]
        proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        procs.append(proc)
        assert proc.stdin is not None
        proc.stdin.write(np.asarray(part, np.int64).tobytes())
        proc.stdin.close()
    failures = []
    for proc in procs:
        assert proc.stderr is not None and proc.stdout is not None
        with proc.stdout:
            out = proc.stdout.read().decode("utf-8", "replace").split()
        with proc.stderr:
            err = proc.stderr.read().decode("utf-8", "replace")
        if len(out) == 2 and out[0] == "peak_kb":
            worker_peak_kb = max(worker_peak_kb, int(out[1]))
        if proc.wait() != 0:
            failures.append(err.strip().splitlines()[-1:] or [f"exit {proc.returncode}"])
    if failures:
        raise IndexError_(f"an index worker failed: {failures[0][0]}")
    lexical.apply((), deletes, seq, prebuilt=folders)


def _db_file(repo: Repository) -> str | None:
    return pragmas.database_file(repo.conn)


def _worker_main(argv: list[str]) -> int:
    """Entry of an index worker: chunk ids (int64) on stdin, db file and folder as args."""
    db_file, folder = argv
    ids = np.frombuffer(sys.stdin.buffer.read(), np.int64).tolist()
    _build_worker(db_file, ids, folder)
    print("peak_kb", _own_peak_kb())
    return 0


def _own_peak_kb() -> int:
    """Peak RSS of this process image (VmHWM; unlike ru_maxrss it excludes the
    parent's memory that a fork briefly shared before exec)."""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def _build_task(db_file: str, ids: list[int], folder: str) -> int:
    """An ingest-pool task: one segment from ``ids``; returns the worker's peak RSS (KiB)."""
    _build_worker(db_file, ids, folder)
    return _own_peak_kb()


def _build_worker(db_file: str, ids: list[int], folder: str) -> None:
    conn = sqlite3.connect(f"file:{db_file}?mode=ro", uri=True, timeout=30.0)
    try:
        rows = Repository(conn).index_rows(ids)
        write_segment(Path(folder), *build_arrays(doc_texts(*r) for r in rows))
    finally:
        conn.close()


if __name__ == "__main__":
    sys.exit(_worker_main(sys.argv[1:]))
