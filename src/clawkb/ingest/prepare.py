"""The parallel half of ingest: bytes or text → store-ready rows, no database.

Everything here is a pure function of its arguments, so it runs the same in
the indexing process (one worker) and in the ingest worker processes
(:mod:`clawkb.ingest.workers`): read, hash, pick the parser, parse (isolated
parsers still fork their sandboxed worker, from whichever process runs
this), chunk, and turn the chunks into rows with anchors, hashes and JSON
columns. The single writer in :mod:`clawkb.ingest.writer` only inserts them.
Failures come back as data (:attr:`Prepared.status`), never as exceptions,
so one bad file cannot fail the batch it travels in.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from clawkb.errors import ClawkbError, ParseError, UnsupportedFileError
from clawkb.ingest.chunker import CHUNKER_VERSION, ChunkConfig, chunk_slices
from clawkb.parsers.base import DEFAULT_VERSION, parser_version
from clawkb.parsers.limits import parse_with_limit
from clawkb.parsers.registry import ParserRegistry, default_registry
from clawkb.parsers.text import first_line_title, is_text_name, paragraph_slices
from clawkb.store.repo import ChunkValues, DocRow, chunk_values, content_hash
from clawkb.text.decode import looks_binary, normalize_newlines
from clawkb.types import ParsedDocument

_dumps = json.JSONEncoder(ensure_ascii=False, default=str).encode


@dataclass(slots=True)
class Prepared:
    """One file or record, ready to store (``status`` "store") or the reason not to.

    ``status``: "store"; "same" (content hash unchanged: only touch the row);
    "skip" (no parser, binary: ``reason``); "fail" (``reason``).
    """

    path: str
    status: str
    reason: str = ""
    digest: str = ""
    size: int = 0
    mtime_ns: int = 0
    parser: str = ""
    #: the versions recorded with the document (:func:`clawkb.parsers.base.parser_version`)
    parser_version: str = ""
    chunker_version: str = CHUNKER_VERSION
    title: str = ""
    encoding: str | None = None
    meta_json: str = "{}"
    rows: list[ChunkValues] = field(default_factory=list)
    warnings: tuple[str, ...] = ()
    #: the parse result, kept for ingest hooks (None for records)
    parsed: ParsedDocument | None = None


@dataclass(frozen=True, slots=True)
class FileTask:
    """What the writer knows about one file before it is read."""

    path: str
    size: int
    mtime_ns: int
    old_digest: str | None  # content hash of the stored version, if any (None: parse anyway)


#: An in-memory document as a worker task carries it: (path, text, title, metadata).
RecordRow = tuple[str, str, str, Mapping[str, object]]


class ChunkingHook(Protocol):
    """The part of an :class:`~clawkb.ingest.pipeline.IngestHook` a worker uses."""

    def chunk_config(self, path: str, parsed: ParsedDocument, config: ChunkConfig) -> ChunkConfig:
        """The chunking settings for this document."""
        ...


@dataclass(frozen=True, slots=True)
class FileSettings:
    chunk: ChunkConfig
    parse_timeout_s: float
    hooks: tuple[ChunkingHook, ...] = ()


# -- records -------------------------------------------------------------------


def prepare_record(
    path: str, text: str, title: str, metadata: Mapping[str, object], cfg: ChunkConfig
) -> Prepared:
    data = text.encode("utf-8")
    digest = content_hash(data + title.encode("utf-8"))
    # Records are already text: split paragraphs directly, no decoding pass.
    lines = normalize_newlines(text).split("\n")
    chunks = chunk_slices(paragraph_slices(lines), cfg)
    return Prepared(
        path=path,
        status="store",
        digest=digest,
        size=len(data),
        parser="record",
        parser_version=DEFAULT_VERSION,
        title=title or first_line_title(lines),
        encoding="utf-8",
        meta_json=_dumps(dict(metadata)) if metadata else "{}",
        rows=chunk_values(path, chunks),
    )


def prepare_records(records: Sequence[RecordRow], cfg: ChunkConfig) -> list[Prepared]:
    """A worker task: many small records at once (one round trip)."""
    return [prepare_record(p, t, ti, m, cfg) for p, t, ti, m in records]


# -- files ---------------------------------------------------------------------


def prepare_files(tasks: Sequence[FileTask], settings: FileSettings) -> list[Prepared]:
    """A worker task: several files, each failing on its own."""
    registry = default_registry()
    return [prepare_file(t, settings, registry) for t in tasks]


def current_versions(registry: ParserRegistry, key: str) -> tuple[str, str, str] | None:
    """(parser name, parser version, chunker version) a file at ``key`` would be stored
    with now, judged by its name before it is read; None when no parser claims it."""
    parser = registry.for_path(key)
    if parser is None and is_text_name(key):
        parser = registry.by_name("text")  # prepare_file's fallback for text by content
    if parser is None:
        return None
    return parser.name, parser_version(parser, key), CHUNKER_VERSION


def stored_versions(old: DocRow) -> tuple[str, str | None, str | None]:
    """(parser name, parser version, chunker version) a stored document was made with."""
    return old.parser, old.parser_version, old.chunker_version


def needs_reparse(old: DocRow, registry: ParserRegistry, key: str) -> bool:
    """Whether the stored ``old`` came from another parser, parser version or chunker
    version than ``key`` would get now (an unknown version counts as another).

    A file no parser claims any more is not re-parsed: it keeps its chunks.
    """
    now = current_versions(registry, key)
    return now is not None and stored_versions(old) != now


def prepare_file(task: FileTask, settings: FileSettings, registry: ParserRegistry) -> Prepared:
    key = task.path
    parser = registry.for_path(key)
    try:
        with open(key, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        return Prepared(key, "fail", f"cannot read ({exc.strerror or exc})")
    suffix = Path(key).suffix
    if parser is None and is_text_name(key) and data and not looks_binary(data):
        parser = registry.by_name("text")  # README, README.Debian, changelog: text by content
    if parser is None:
        reason = (
            "binary file, skipped"
            if looks_binary(data)
            else f"no parser for '{suffix or Path(key).name}'"
        )
        return Prepared(key, "skip", reason)
    digest = content_hash(data)
    if task.old_digest == digest:
        return Prepared(key, "same", digest=digest, size=task.size, mtime_ns=task.mtime_ns)
    try:
        if looks_binary(data) and parser.name in ("text", "markdown"):
            raise UnsupportedFileError(key, "binary content, skipped")
        parsed = parse_with_limit(parser, data, key, settings.parse_timeout_s)
        cfg = settings.chunk
        for hook in settings.hooks:
            cfg = hook.chunk_config(key, parsed, cfg)
        chunks = chunk_slices(parsed.slices, cfg)
    except ParseError as exc:
        return Prepared(key, "fail", exc.reason)
    except ClawkbError as exc:
        return Prepared(key, "fail", str(exc))
    except Exception as exc:  # a parser bug must not stop the run
        return Prepared(key, "fail", f"parser {parser.name} crashed: {type(exc).__name__}: {exc}")
    return Prepared(
        path=key,
        status="store",
        digest=digest,
        size=task.size,
        mtime_ns=task.mtime_ns,
        parser=parser.name,
        parser_version=parser_version(parser, key),
        title=parsed.title or Path(key).stem,
        encoding=parsed.encoding,
        meta_json=_dumps(dict(parsed.metadata)),
        rows=chunk_values(key, chunks),
        warnings=tuple(parsed.warnings),
        parsed=parsed,
    )
