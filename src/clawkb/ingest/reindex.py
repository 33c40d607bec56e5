"""`reindex` without blocking other writers for its whole length.

The new index is built from a snapshot of the store in a private folder
(``index/lexical-build-<token>/``) while holding only the ``reindex`` job
lock; readers keep searching the published index and other writers keep
writing. Then, under the write lock for a moment, the built segments are
moved into the index folder, corrected for whatever changed since the
snapshot (chunk ids added or deleted meanwhile: chunk ids are never reused,
so the two id sets tell exactly what differs) and published as one new
generation.
"""

from __future__ import annotations

import os
import secrets
import shutil
from pathlib import Path

import numpy as np

from clawkb.index.lexical import BM25FParams, LexicalIndex
from clawkb.index.segment import Segment
from clawkb.ingest.sync import _apply_batch, _tidy_store, doc_texts
from clawkb.store.repo import Repository

BUILD_PREFIX = "lexical-build-"


def remove_stale_builds(index_root: Path) -> None:
    """Builds left by a killed `reindex` (call while holding the reindex job lock)."""
    if index_root.is_dir():
        for child in index_root.iterdir():
            if child.is_dir() and child.name.startswith(BUILD_PREFIX):
                shutil.rmtree(child, ignore_errors=True)


def build_detached(
    repo: Repository, index_root: Path, params: BM25FParams, batch_chunks: int
) -> LexicalIndex:
    """A complete index of the store's current chunks in a private folder (no KB lock)."""
    folder = index_root / f"{BUILD_PREFIX}{secrets.token_hex(4)}"
    build = LexicalIndex(folder, params, writable=True)
    try:
        with repo.read_snapshot():
            ids = repo.all_chunk_ids()
        for i in range(0, len(ids), batch_chunks):
            _apply_batch(repo, build, ids[i : i + batch_chunks], [], -1)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return build


def adopt_build(repo: Repository, lexical: LexicalIndex, build: LexicalIndex) -> int:
    """Make ``build`` the published index (the caller holds the write lock)."""
    try:
        with repo.read_snapshot():
            now = np.asarray(repo.all_chunk_ids(), np.int64)
            seq = repo.max_seq()
        built = [np.asarray(s.chunk_ids)[s.live.astype(bool)] for s in build.segments]
        have = np.concatenate(built) if built else np.empty(0, np.int64)
        gone = np.setdiff1d(have, now)
        new = np.setdiff1d(now, have).tolist()
        lexical.begin_rebuild()
        staged: list[Segment] = []
        for folder in lexical.reserve_segments(len(build.segments)):
            src = build.segments[len(staged)].folder
            for f in src.iterdir():
                if f.name.startswith("live"):
                    f.unlink()  # a fresh build has no deletions: every doc is live
            os.replace(src, folder)
            staged.append(Segment(folder))
        if len(gone):
            for seg in staged:
                seg.delete(gone)
        lexical.stage(staged)
        if new:
            lexical.apply((doc_texts(*r) for r in repo.index_rows(new)), [], -1)
        lexical.store_id = _store_id(repo) or lexical.store_id
        lexical.finish_rebuild(seq)
    except BaseException:
        lexical.abort_rebuild()
        raise
    finally:
        shutil.rmtree(build.folder, ignore_errors=True)
    _tidy_store(repo, lexical)
    return len(now)


def _store_id(repo: Repository) -> str | None:
    from clawkb.store import db

    return db.get_meta(repo.conn, "store_id")
