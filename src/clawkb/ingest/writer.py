"""The single writer of an ingest run: prepared documents into the store, in batches.

Workers (:mod:`clawkb.ingest.prepare`) hand over finished rows; this module
only decides what each one means for the stored version and writes a whole
batch in one transaction — documents one statement each, every chunk of the
batch in one ``executemany``, the change log in one ``INSERT … SELECT``. A
killed run loses at most the batch in flight; the next run redoes it (its
files still differ from the store by size, time or hash).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from clawkb.ingest.prepare import Prepared
from clawkb.store import runs_repo
from clawkb.store.repo import DocRow, Repository

if TYPE_CHECKING:
    from clawkb.ingest.pipeline import IndexReport, IngestHook

#: (doc id, prepared document, whether it replaced a stored version)
_Stored = list[tuple[int, Prepared, bool]]


def write_batch(
    repo: Repository,
    items: Sequence[Prepared],
    olds: dict[str, DocRow],
    root: str,
    report: IndexReport,
    *,
    hooks: Sequence[IngestHook] = (),
    run_id: int | None = None,
) -> int:
    """Store ``items`` (in order) in one transaction; return how many changes were logged.

    ``olds`` maps paths to their stored rows as read before the batch; it is
    updated as the batch stores documents, so a path that comes twice is an
    update the second time, exactly as it would be one file at a time.
    """
    changes = 0
    stored: _Stored = []  # documents whose chunks are not inserted yet
    done: _Stored = []
    with repo.transaction() as conn:
        now = time.time()
        for p in items:
            old = olds.get(p.path)
            if p.status == "skip":
                report.skipped += 1
                report.skipped_files.append((p.path, p.reason))
            elif p.status == "fail":
                report.failed += 1
                report.errors.append((p.path, p.reason))
                if old:
                    repo.mark_error(p.path, p.reason)
                if run_id is not None:
                    runs_repo.record_failure(conn, run_id, p.path, p.reason, now)
            elif p.status == "same" or (old and old.content_hash == p.digest):
                if p.status == "same" and old:
                    repo.touch_document(old.id, p.size, p.mtime_ns)
                report.unchanged += 1
            else:
                if old:
                    # The delete must see every chunk stored before it (a path may
                    # come twice in one batch): insert what is waiting first.
                    changes += _insert(repo, stored, done, report)
                    n = repo.delete_chunks(old.id)
                    report.chunks_removed += n
                    changes += n + 1
                doc_id = repo.upsert_document(
                    path=p.path,
                    root=root,
                    digest=p.digest,
                    size=p.size,
                    mtime_ns=p.mtime_ns,
                    parser=p.parser,
                    title=p.title,
                    encoding=p.encoding,
                    meta_json=p.meta_json,
                    new=old is None,
                )
                olds[p.path] = DocRow(
                    doc_id, p.path, root, p.digest, p.size, p.mtime_ns, p.title, None
                )
                report.warnings.extend((p.path, w) for w in p.warnings)
                stored.append((doc_id, p, old is not None))
        changes += _insert(repo, stored, done, report)
        for doc_id, p, _ in done:
            if p.parsed is not None:
                for hook in hooks:
                    hook.stored(repo, doc_id, p.path, p.parsed)
    for _, _, updated in done:
        report.updated += updated
        report.added += not updated
    return changes


def _insert(repo: Repository, stored: _Stored, done: _Stored, report: IndexReport) -> int:
    """Insert the waiting documents' chunks (one statement) and move them to ``done``."""
    n = repo.insert_chunk_values([(doc_id, p.rows) for doc_id, p, _ in stored])
    report.chunks_added += n
    done.extend(stored)
    stored.clear()
    return n
