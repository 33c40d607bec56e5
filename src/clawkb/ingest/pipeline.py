"""Incremental, crash-safe ingest: files (or in-memory records) into the store.

Per file: stat → (size, mtime) unchanged? skip : read → content hash unchanged?
skip : parse → chunk → one transaction that replaces the document's chunks and
logs the changes. The lexical index is synced from the log in batches, so a
killed run loses at most the file in flight and the next run resumes.
A file that fails keeps its previously indexed content.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from clawkb.config import Config
from clawkb.errors import ClawkbError, ParseError, UnsupportedFileError
from clawkb.index.lexical import LexicalIndex
from clawkb.ingest.chunker import ChunkConfig, chunk_slices
from clawkb.ingest.decode import looks_binary, normalize_newlines
from clawkb.ingest.discover import Problem, discover
from clawkb.ingest.limits import parse_with_limit
from clawkb.ingest.sync import sync_lexical
from clawkb.parsers.registry import ParserRegistry
from clawkb.parsers.text import first_line_title, paragraph_slices
from clawkb.store import runs_repo
from clawkb.store.repo import DocRow, Repository, content_hash
from clawkb.types import Chunk, ParsedDocument

Progress = Callable[[int, int, str], None]


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
    metadata: dict[str, Any] = field(default_factory=dict)


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

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
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
        run_id = self._start_run([str(r) for r in roots], report)
        problems: list[Problem] = []
        skipped: list[Problem] = []
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
            seen: set[str] = set()
            for i, f in enumerate(found):
                path = f.path.as_posix()
                seen.add(path)
                self._index_file(f.path, walk_root.as_posix(), report, run_id)
                if progress:
                    progress(i + 1, len(found), path)
            if root_path.is_dir():
                self._remove_missing(walk_root.as_posix(), seen, problems, report)
        for p in problems:
            report.errors.append((p.path, p.reason))
        report.skipped += len(skipped)
        report.skipped_files.extend((p.path, p.reason) for p in skipped)
        self._flush(force=True)
        report.seconds = time.perf_counter() - t0
        self._finish_run(run_id, report)
        return report

    def _index_file(self, path: Path, root: str, report: IndexReport, run_id: int) -> None:
        key = path.as_posix()
        old = self.repo.document(key)
        try:
            st = path.stat()
        except OSError as exc:
            self._fail(report, run_id, key, f"cannot stat ({exc.strerror or exc})", old)
            return
        if old and old.size == st.st_size and old.mtime_ns == st.st_mtime_ns and not old.error:
            report.unchanged += 1
            return
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
            return
        parser = self.registry.for_path(key)
        try:
            with open(path, "rb") as fh:
                data = fh.read()
        except OSError as exc:
            self._fail(report, run_id, key, f"cannot read ({exc.strerror or exc})", old)
            return
        if parser is None and path.suffix == "" and data and not looks_binary(data):
            parser = self.registry.by_name("text")
        if parser is None:
            reason = (
                "binary file, skipped"
                if looks_binary(data)
                else f"no parser for '{path.suffix or path.name}'"
            )
            report.skipped += 1
            report.skipped_files.append((key, reason))
            return
        digest = content_hash(data)
        if old and old.content_hash == digest:
            with self.repo.transaction():
                self.repo.touch_document(old.id, st.st_size, st.st_mtime_ns)
            report.unchanged += 1
            return
        try:
            if looks_binary(data) and parser.name in ("text", "markdown"):
                raise UnsupportedFileError(key, "binary content, skipped")
            parsed = parse_with_limit(parser, data, key, self.config.parse_timeout_s)
            chunks = chunk_slices(parsed.slices, self._chunk_config_for(key, parsed))
            report.warnings.extend((key, w) for w in parsed.warnings)
        except ParseError as exc:
            self._fail(report, run_id, key, exc.reason, old)
            return
        except ClawkbError as exc:
            self._fail(report, run_id, key, str(exc), old)
            return
        except Exception as exc:  # a parser bug must not stop the run
            self._fail(
                report,
                run_id,
                key,
                f"parser {parser.name} crashed: {type(exc).__name__}: {exc}",
                old,
            )
            return
        self._store(
            key, root, digest, st.st_size, st.st_mtime_ns, parser.name, parsed, chunks, old, report
        )

    def _store(
        self,
        key: str,
        root: str,
        digest: str,
        size: int,
        mtime_ns: int,
        parser: str,
        parsed: ParsedDocument,
        chunks: list[Chunk],
        old: DocRow | None,
        report: IndexReport,
    ) -> None:
        with self.repo.transaction():
            if old:
                report.chunks_removed += self.repo.delete_chunks(old.id)
            title = parsed.title or Path(key).stem
            doc_id = self.repo.upsert_document(
                path=key,
                root=root,
                digest=digest,
                size=size,
                mtime_ns=mtime_ns,
                parser=parser,
                title=title,
                encoding=parsed.encoding,
                metadata=dict(parsed.metadata),
            )
            report.chunks_added += self.repo.insert_chunks(doc_id, key, chunks)
            for hook in self.hooks:
                hook.stored(self.repo, doc_id, key, parsed)
        if old:
            report.updated += 1
        else:
            report.added += 1
        self._pending += len(chunks) + (old is not None)
        self._flush()

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
        self, records: Iterable[TextRecord], progress: Progress | None = None
    ) -> IndexReport:
        t0 = time.perf_counter()
        report = IndexReport()
        done = 0
        for group in _groups(records, 2000):
            # One transaction per group: all of it or none of it is stored.
            with self.repo.transaction():
                for rec in group:
                    self._store_record(rec, report)
            self._flush()
            if progress:
                for rec in group:
                    done += 1
                    progress(done, 0, rec.path)
        self._flush(force=True)
        report.seconds = time.perf_counter() - t0
        return report

    def _store_record(self, rec: TextRecord, report: IndexReport) -> None:
        data = rec.text.encode("utf-8")
        digest = content_hash(data + rec.title.encode("utf-8"))
        old = self.repo.document(rec.path)
        if old and old.content_hash == digest:
            report.unchanged += 1
            return
        # Records are already text: split paragraphs directly, no decoding pass.
        lines = normalize_newlines(rec.text).split("\n")
        chunks = chunk_slices(paragraph_slices(lines), self.chunk_config)
        if old:
            report.chunks_removed += self.repo.delete_chunks(old.id)
        doc_id = self.repo.upsert_document(
            path=rec.path,
            root="",
            digest=digest,
            size=len(data),
            mtime_ns=0,
            parser="record",
            title=rec.title or first_line_title(lines),
            encoding="utf-8",
            metadata=dict(rec.metadata),
        )
        report.chunks_added += self.repo.insert_chunks(doc_id, rec.path, chunks)
        report.updated += bool(old)
        report.added += not old
        self._pending += len(chunks)

    # -- bookkeeping ------------------------------------------------------
    def _flush(self, force: bool = False) -> None:
        if self._pending and (force or self._pending >= self.config.index_batch_chunks):
            sync_lexical(self.repo, self.lexical, self.config.index_batch_chunks)
            self._pending = 0
        elif force:
            sync_lexical(self.repo, self.lexical, self.config.index_batch_chunks)

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


def _groups(items: Iterable[TextRecord], size: int) -> Iterator[list[TextRecord]]:
    group: list[TextRecord] = []
    for item in items:
        group.append(item)
        if len(group) >= size:
            yield group
            group = []
    if group:
        yield group
