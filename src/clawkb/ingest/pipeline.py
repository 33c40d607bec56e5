"""Incremental, crash-safe ingest: files (or in-memory records) into the store.

Per file: stat → (size, mtime) unchanged? skip : read → content hash unchanged?
skip : parse → chunk → rows. A file stored by another parser, parser version or
chunker version than it would get now is parsed again whatever its stat and
hash say (:func:`~clawkb.ingest.prepare.needs_reparse`), and counted in
:attr:`IndexReport.reparsed`. Reading, parsing and chunking run in worker
processes (``ingest_workers``; :mod:`clawkb.ingest.prepare`), the store is
written by this process alone, one transaction per batch of files
(:mod:`clawkb.ingest.writer`). The lexical index is synced from the log in
batches, so a killed run loses at most the batch in flight and the next run
resumes. A file that fails keeps its previously indexed content.
"""

from __future__ import annotations

import itertools
import json
import os
import pickle
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Protocol, TypeVar, cast

from clawkb.config import Config
from clawkb.index.lexical import LexicalIndex
from clawkb.ingest.chunker import ChunkConfig
from clawkb.ingest.discover import Found, Problem, discover
from clawkb.ingest.prepare import (
    FileSettings,
    FileTask,
    Prepared,
    RecordRow,
    needs_reparse,
    prepare_file,
    prepare_records,
)
from clawkb.ingest.sync import sync_lexical
from clawkb.ingest.workers import WorkerPool, default_workers
from clawkb.ingest.writer import write_batch
from clawkb.parsers.registry import ParserRegistry, default_registry
from clawkb.store import runs_repo
from clawkb.store.repo import DocRow, Repository
from clawkb.types import JSON, ParsedDocument

_PREPARE_FILES = "clawkb.ingest.prepare:prepare_files"
_PREPARE_RECORDS = "clawkb.ingest.prepare:prepare_records"
#: Largest worker task (the byte budget may cut it sooner).
FILES_PER_TASK = 16
RECORDS_PER_TASK = 512
#: Fewer tasks than this run in this process: starting workers costs ~0.5 s.
POOL_MIN_TASKS = 4

Progress = Callable[[int, int, str], None]
#: One worker task: the arguments of a ``prepare_*`` function.
_Task = TypeVar("_Task", bound=tuple[object, ...])


class IngestHook(Protocol):
    """Extension point for a feature that derives data from each stored file.

    ``chunk_config`` may change how one document is chunked (return ``config``
    itself otherwise). ``stored`` runs inside the document's write transaction,
    right after its chunks are inserted, so derived rows commit or roll back
    with them; rows keyed on ``documents.id`` with ``ON DELETE CASCADE``
    disappear when the document is removed. Used by :mod:`clawkb.hardware`.
    """

    def chunk_config(self, path: str, parsed: ParsedDocument, config: ChunkConfig) -> ChunkConfig:
        """The chunking settings for this document."""
        ...

    def stored(self, repo: Repository, doc_id: int, path: str, parsed: ParsedDocument) -> None:
        """Called once per (re)stored file, inside its transaction."""
        ...


@dataclass(frozen=True, slots=True)
class TextRecord:
    """An in-memory document (no file): ``path`` is its key and its anchor path."""

    path: str
    text: str
    title: str = ""
    metadata: Mapping[str, object] = field(default_factory=dict)


@dataclass
class IndexReport:
    added: int = 0
    updated: int = 0
    removed: int = 0
    unchanged: int = 0
    failed: int = 0
    skipped: int = 0
    chunks_added: int = 0
    chunks_removed: int = 0
    seconds: float = 0.0
    resumed: bool = False
    errors: list[tuple[str, str]] = field(default_factory=list)
    skipped_files: list[tuple[str, str]] = field(default_factory=list)
    #: (path, message) for files indexed with a caveat (e.g. PDF pages that need OCR)
    warnings: list[tuple[str, str]] = field(default_factory=list)
    #: unchanged files stored again because their parser (or its version, or the
    #: chunker's) differs from the one that stored them; counted in ``updated`` too
    reparsed: int = 0
    reparsed_by: dict[str, int] = field(default_factory=dict)  # by the new parser's name

    def reparse_summary(self) -> str | None:
        """``re-parsed 3 files: parser changed (rst 2, html 1)``, or None."""
        if not self.reparsed:
            return None
        ranked = sorted(self.reparsed_by.items(), key=lambda kv: (-kv[1], kv[0]))
        parts = ", ".join(f"{name or '?'} {n}" for name, n in ranked)
        noun = "file" if self.reparsed == 1 else "files"
        return f"re-parsed {self.reparsed} {noun}: parser changed ({parts})"

    def to_dict(self) -> dict[str, JSON]:
        d: dict[str, JSON] = asdict(self)
        d["errors"] = [{"path": p, "reason": r} for p, r in self.errors]
        d["skipped_files"] = [{"path": p, "reason": r} for p, r in self.skipped_files]
        d["warnings"] = [{"path": p, "message": m} for p, m in self.warnings]
        return d


class Ingestor:
    """Runs one indexing job; the caller holds the KB write lock."""

    def __init__(
        self,
        repo: Repository,
        lexical: LexicalIndex,
        config: Config,
        registry: ParserRegistry,
        hooks: Sequence[IngestHook] = (),
        keep_under: Sequence[str] = (),
    ) -> None:
        self.keep_under = tuple(p.rstrip("/") + "/" for p in keep_under)  # never swept as missing
        self.repo = repo
        self.lexical = lexical
        self.config = config
        self.registry = registry
        self.hooks = tuple(hooks)
        self.chunk_config = ChunkConfig(max_tokens=config.max_tokens, overlap=config.overlap)
        self._pending = 0
        #: the index's docs_written when this run started (consolidate at its end)
        self._run_written = 0
        self.workers = config.ingest_workers or default_workers()
        self._pool: WorkerPool | None = None
        # Text in flight (queued for, inside or coming back from workers) stays
        # near the memory budget: tasks are sized so the pool's window fits it.
        window = 2 * 2 * max(self.workers, 1)
        self._task_bytes = max(
            64 * 1024, min(1 << 20, int(config.ingest_queue_mb * 2**20 / window))
        )

    def _chunk_config_for(self, path: str, parsed: ParsedDocument) -> ChunkConfig:
        cfg = self.chunk_config
        for hook in self.hooks:
            cfg = hook.chunk_config(path, parsed, cfg)
        return cfg

    # -- files ------------------------------------------------------------
    def index_paths(
        self,
        roots: Sequence[str | os.PathLike[str]],
        progress: Progress | None = None,
        include: Sequence[str] = (),
    ) -> IndexReport:
        """Index ``roots``; ``include`` globs override the default ignores (discover.py)."""
        t0 = time.perf_counter()
        report = IndexReport()
        self._run_written = self.lexical.docs_written
        run_id = self._start_run([str(r) for r in roots], report)
        problems: list[Problem] = []
        skipped: list[Problem] = []
        try:
            for root in roots:
                root_path = Path(os.path.abspath(root))
                found = list(
                    discover(
                        root_path,
                        self.config.ignore,
                        problems,
                        include=include,
                        follow_symlinks=self.config.follow_symlinks,
                        skipped=skipped,
                    )
                )
                walk_root = root_path if root_path.is_dir() else root_path.parent
                seen = {f.path.as_posix() for f in found}
                self._index_files(found, walk_root.as_posix(), report, run_id, progress)
                if root_path.is_dir():
                    self._remove_missing(walk_root.as_posix(), seen, problems, report)
            for p in problems:  # a missing or unreadable path fails like a bad file
                report.errors.append((p.path, p.reason))
            report.failed += len(problems)
            report.skipped += len(skipped)
            report.skipped_files.extend((p.path, p.reason) for p in skipped)
            self._flush(force=True)
        finally:
            self._close_pool()
        report.seconds = time.perf_counter() - t0
        self._finish_run(run_id, report)
        return report

    def _index_files(
        self,
        found: Sequence[Found],
        root: str,
        report: IndexReport,
        run_id: int,
        progress: Progress | None,
    ) -> None:
        """Stat in this process (cheap, needs the store); read, parse and chunk the
        changed files in the workers; store their results in order, a batch at a time."""
        olds = self.repo.documents_under(root)
        total = len(found)
        done = 0

        def tick(path: str) -> None:
            nonlocal done
            done += 1
            if progress:
                progress(done, total, path)

        def tasks() -> Iterator[tuple[list[FileTask], FileSettings]]:
            batch: list[FileTask] = []
            size = 0
            for f in found:
                task = self._file_task(f.path.as_posix(), olds, report, run_id)
                if task is None:
                    tick(f.path.as_posix())
                    continue
                batch.append(task)
                size += task.size
                if len(batch) >= FILES_PER_TASK or size >= self._task_bytes:
                    yield batch, settings
                    batch, size = [], 0
            if batch:
                yield batch, settings

        settings = FileSettings(self.chunk_config, self.config.parse_timeout_s, self.hooks)
        pooled = self.registry is default_registry() and _picklable(settings)

        def here(batch: list[FileTask], settings: FileSettings) -> list[Prepared]:
            return [prepare_file(t, settings, self.registry) for t in batch]

        for (batch, _), result in self._prepare(tasks(), _PREPARE_FILES, here, pooled):
            if isinstance(result, BaseException):
                result = self._retry_files(batch, settings, result)
            self._pending += write_batch(
                self.repo, result, olds, root, report, hooks=self.hooks, run_id=run_id
            )
            for item in result:
                tick(item.path)
            self._flush()

    def _file_task(
        self, key: str, olds: dict[str, DocRow], report: IndexReport, run_id: int
    ) -> FileTask | None:
        """The work one file needs, or None when it is unchanged or failed already."""
        old = olds.get(key)
        try:
            st = os.stat(key)
        except OSError as exc:
            self._fail(report, run_id, key, f"cannot stat ({exc.strerror or exc})", old)
            return None
        # a stored version from another parser (version) is redone whatever the file says
        stale = old is not None and needs_reparse(old, self.registry, key)
        if (
            old
            and not stale
            and old.size == st.st_size
            and old.mtime_ns == st.st_mtime_ns
            and not old.error
        ):
            report.unchanged += 1
            return None
        limit = int(self.config.max_file_mb * 1024 * 1024)
        if st.st_size > limit:
            self._fail(
                report,
                run_id,
                key,
                f"file too large ({st.st_size / 1048576:.1f} MB > {self.config.max_file_mb:g} MB limit;"
                " raise max_file_mb in config.yaml)",
                old,
            )
            return None
        digest = old.content_hash if old and not stale else None
        return FileTask(key, st.st_size, st.st_mtime_ns, digest)

    def _retry_files(
        self, batch: list[FileTask], settings: FileSettings, exc: BaseException
    ) -> list[Prepared]:
        """A worker died on a batch: run its files one per task, so only the file that
        kills a worker fails (with the reason), never its neighbours."""
        pool = self._get_pool()
        out: list[Prepared] = []
        for (tasks, _), res in pool.imap(_PREPARE_FILES, [([t], settings) for t in batch]):
            got = _prepared(res)
            if isinstance(got, BaseException):
                out.append(
                    Prepared(tasks[0].path, "fail", f"the ingest worker failed on it: {got}")
                )
            else:
                out.extend(got)
        return out

    def _fail(
        self, report: IndexReport, run_id: int, key: str, reason: str, old: DocRow | None
    ) -> None:
        report.failed += 1
        report.errors.append((key, reason))
        with self.repo.transaction() as conn:
            if old:
                self.repo.mark_error(key, reason)
            runs_repo.record_failure(conn, run_id, key, reason, time.time())

    def _remove_missing(
        self, root: str, seen: set[str], problems: list[Problem], report: IndexReport
    ) -> None:
        """Drop documents under ``root`` the walk did not yield: deleted, newly ignored
        or excluded files alike; only what sits in an unreadable folder is kept."""
        unreadable = {p.path.rstrip("/") for p in problems}
        for path, doc in self.repo.documents_under(root).items():
            if path in seen or path.startswith(self.keep_under or ("\0",)):
                continue
            if path in unreadable or any(path.startswith(u + "/") for u in unreadable):
                continue  # it or its folder could not be read: keep what we have
            with self.repo.transaction():
                n = len(self.repo.chunks_of_doc(doc.id))
                self.repo.remove_document(doc)
            report.removed += 1
            report.chunks_removed += n
            self._pending += n

    # -- records ----------------------------------------------------------
    def index_records(
        self, records: Iterable[TextRecord], progress: Progress | None = None, *, sync: bool = True
    ) -> IndexReport:
        """Index in-memory documents; each task's records are stored in one transaction.

        ``sync=False`` only writes the store (the caller's transaction may still
        roll it back) and leaves the lexical index to the caller's next sync.
        """
        t0 = time.perf_counter()
        report = IndexReport()
        self._run_written = self.lexical.docs_written
        done = 0

        def tasks() -> Iterator[tuple[list[RecordRow], ChunkConfig]]:
            group: list[RecordRow] = []
            size = 0
            for r in records:
                group.append((r.path, r.text, r.title, r.metadata))
                size += len(r.text)
                if len(group) >= RECORDS_PER_TASK or size >= self._task_bytes:
                    yield group, self.chunk_config
                    group, size = [], 0
            if group:
                yield group, self.chunk_config

        try:
            for _, result in self._prepare(tasks(), _PREPARE_RECORDS, prepare_records, True):
                if isinstance(result, BaseException):
                    raise result
                olds = self.repo.documents_by_paths([p.path for p in result])
                self._pending += write_batch(self.repo, result, olds, "", report)
                if sync:
                    self._flush()
                if progress:
                    for p in result:
                        done += 1
                        progress(done, 0, p.path)
            if sync:
                self._flush(force=True)
        finally:
            self._close_pool()
        report.seconds = time.perf_counter() - t0
        return report

    # -- workers ----------------------------------------------------------
    def _prepare(
        self,
        tasks: Iterator[_Task],
        func: str,
        here: Callable[..., list[Prepared]],
        pooled: bool,
    ) -> Iterator[tuple[_Task, list[Prepared] | BaseException]]:
        """``(task, result)`` in task order: ``func`` in the worker pool, or ``here``
        in this process (one worker, a single task, or a task that cannot travel)."""
        first = list(itertools.islice(tasks, POOL_MIN_TASKS))
        if not pooled or self.workers < 2 or len(first) < POOL_MIN_TASKS:
            for t in itertools.chain(first, tasks):
                yield t, here(*t)
            return
        for t, result in self._get_pool().imap(func, itertools.chain(first, tasks)):
            yield t, _prepared(result)

    def _get_pool(self) -> WorkerPool:
        if self._pool is None:
            self._pool = WorkerPool(self.workers)
        return self._pool

    def _close_pool(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    # -- bookkeeping ------------------------------------------------------
    def _flush(self, force: bool = False) -> None:
        """Sync the index once enough changes wait (always when ``force``).

        ``index_batch_chunks`` is what one process inverts at a time: with the
        pool, a batch is that much per worker, so segments come out as large as
        in a one-process run (and need no more merging).
        """
        batch = self.config.index_batch_chunks * (self._pool.n if self._pool else 1)
        if force or self._pending >= batch:
            sync_lexical(self.repo, self.lexical, batch, pool=self._pool, workers=self.workers)
            self._pending = 0
        if force:  # the end of a run: merge what it wrote, if it wrote enough
            self.lexical.consolidate(self.lexical.docs_written - self._run_written)
            self._run_written = self.lexical.docs_written

    def _start_run(self, roots: list[str], report: IndexReport) -> int:
        with self.repo.transaction() as conn:
            run_id, resumed = runs_repo.start(conn, json.dumps(roots), time.time())
        if resumed:
            report.resumed = True
        return run_id

    def _finish_run(self, run_id: int, report: IndexReport) -> None:
        counts = {k: v for k, v in report.to_dict().items() if isinstance(v, int | float)}
        with self.repo.transaction() as conn:
            runs_repo.finish(conn, run_id, json.dumps(counts), time.time())


def _prepared(result: object) -> list[Prepared] | BaseException:
    """A pool answer to a ``prepare_*`` task: its list of results, or the exception it
    raised (the worker ran that function, so nothing else comes back)."""
    if isinstance(result, BaseException):
        return result
    return cast("list[Prepared]", result)


def _picklable(obj: object) -> bool:
    """Whether ``obj`` can travel to a worker (a custom hook may hold a connection)."""
    try:
        pickle.dumps(obj)
    except Exception:
        return False
    return True
