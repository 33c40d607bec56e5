"""The single writer of an ingest run: prepared documents into the store, in batches.

Workers (:mod:`clawkb.ingest.prepare`) hand over finished rows; this module
only decides what each one means for the stored version and writes a whole
batch in one transaction — documents one statement each, every chunk of the
batch in one ``executemany``, the change log in one ``INSERT … SELECT``. A
killed run loses at most the batch in flight; the next run redoes it (its
files still differ from the store by size, time, hash or parser version).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from clawkb.ingest.prepare import Prepared, stored_versions
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
    waiting: list[Prepared] = []  # new documents, inserted together
    waiting_paths: set[str] = set()
    done: _Stored = []
    reparsed: list[str] = []  # parser names of unchanged files stored again
    with repo.transaction() as conn:
        now = time.time()
        for p in items:
            if p.path in waiting_paths:  # a second copy in this batch: store the first
                changes += _insert(repo, waiting, root, olds, done, report)
                waiting_paths.clear()
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
            elif p.status == "same" or (
                old and old.content_hash == p.digest and stored_versions(old) == _versions(p)
            ):
                if p.status == "same" and old:
                    repo.touch_document(old.id, p.size, p.mtime_ns)
                report.unchanged += 1
            elif old is None:
                waiting.append(p)
                waiting_paths.add(p.path)
            else:
                # The delete must see every chunk stored before it (the path may
                # have come earlier in this batch): insert what is waiting first.
                changes += _insert(repo, waiting, root, olds, done, report)
                waiting_paths.clear()
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
                    versions=(p.parser_version, p.chunker_version),
                )
                if old.content_hash == p.digest:  # same bytes: a newer parser or chunker
                    reparsed.append(p.parser)
                olds[p.path] = _row(doc_id, p, root)
                changes += repo.insert_chunk_values([(doc_id, p.rows)])
                report.chunks_added += len(p.rows)
                done.append((doc_id, p, True))
        changes += _insert(repo, waiting, root, olds, done, report)
        for doc_id, p, _ in done:
            report.warnings.extend((p.path, w) for w in p.warnings)
            if not p.rows and p.size > 0:
                report.warnings.append((p.path, NO_TEXT))
            if p.parsed is not None:
                for hook in hooks:
                    hook.stored(repo, doc_id, p.path, p.parsed)
    for _, _, updated in done:
        report.updated += updated
        report.added += not updated
    for name in reparsed:  # counted once the transaction committed
        report.reparsed += 1
        report.reparsed_by[name] = report.reparsed_by.get(name, 0) + 1
    return changes


#: A non-empty file that gave nothing to search (deeply nested markup, a PDF without text).
NO_TEXT = "no searchable text found: indexed with 0 chunks"


def _versions(p: Prepared) -> tuple[str, str, str]:
    return p.parser, p.parser_version, p.chunker_version


def _row(doc_id: int, p: Prepared, root: str) -> DocRow:
    return DocRow(doc_id, p.path, root, p.digest, p.size, p.mtime_ns, p.title, None, *_versions(p))


def _insert(
    repo: Repository,
    waiting: list[Prepared],
    root: str,
    olds: dict[str, DocRow],
    done: _Stored,
    report: IndexReport,
) -> int:
    """Insert the waiting new documents and all their chunks (two statements)."""
    if not waiting:
        return 0
    ids = repo.insert_documents(
        [
            (
                p.path,
                root,
                p.digest,
                p.size,
                p.mtime_ns,
                p.parser,
                p.title,
                p.encoding,
                p.meta_json,
                p.parser_version,
                p.chunker_version,
            )
            for p in waiting
        ]
    )
    n = repo.insert_chunk_values([(doc_id, p.rows) for doc_id, p in zip(ids, waiting, strict=True)])
    report.chunks_added += n
    for doc_id, p in zip(ids, waiting, strict=True):
        done.append((doc_id, p, False))
        olds[p.path] = _row(doc_id, p, root)
    waiting.clear()
    return n
