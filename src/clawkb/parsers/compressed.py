"""Compressed files: ``.gz``, ``.bz2`` and ``.xz`` read through to the parser of the inner name.

Debian's doc tree, man pages and rotated logs are mostly gzip. The inner name
(the file name without its compression suffix) decides the parser exactly as
an uncompressed file's would: ``ls.1.gz`` is a man page, ``README.md.gz``
Markdown, ``changelog.Debian.gz`` and ``copyright.gz`` plain text (the
extensionless and documentation-name rule of
:func:`clawkb.parsers.text.is_text_name`, or any inner file whose bytes are
text when no parser claims its suffix). Everything the inner parser returns is
kept; line numbers are the decompressed file's, and the anchor names the
compressed file, since that is what exists on disk.

Decompression is bounded (:func:`clawkb.parsers.safety.inflate_stream`: size
and ratio limits checked while streaming), so a bomb fails alone with a reason.
The parser itself runs isolated (``isolate = True``): decompression and the
inner parse happen in the sandboxed worker, so a hostile file fails there alone.
"""

from __future__ import annotations

from pathlib import PurePath
from typing import ClassVar

from clawkb.errors import UnsupportedFileError
from clawkb.parsers.base import Parser, parser_version
from clawkb.parsers.safety import STREAM_FORMATS, inflate_stream
from clawkb.text.decode import looks_binary
from clawkb.types import ParsedDocument

#: Time limit for an isolated inner parse when no outer alarm says otherwise.
DEFAULT_INNER_TIMEOUT_S = 60.0


class CompressedParser:
    """Parser for ``.gz``, ``.bz2`` and ``.xz`` files holding one document."""

    name: ClassVar[str] = "compressed"
    extensions: ClassVar[tuple[str, ...]] = tuple(STREAM_FORMATS)
    mime_types: ClassVar[tuple[str, ...]] = (
        "application/gzip",
        "application/x-bzip2",
        "application/x-xz",
    )
    #: Decompression and the inner parse run in the sandboxed worker.
    isolate: ClassVar[bool] = True
    version: ClassVar[str] = "1"

    def version_for(self, path: str) -> str:
        """This parser's version and the inner parser's (``1+rst:1``), so a changed
        inner parser re-parses the compressed files it reads too."""
        from clawkb.parsers.registry import default_registry

        suffix = PurePath(path).suffix.lower()
        inner_name = PurePath(path).name[: -len(suffix)] if suffix else ""
        registry = default_registry()
        parser = registry.for_path(inner_name) if inner_name else None
        if parser is None or parser.name == self.name:
            parser = registry.by_name("text")  # the by-content fallback
        if parser is None:
            return self.version
        return f"{self.version}+{parser.name}:{parser_version(parser, inner_name)}"

    def preload(self) -> None:
        """Load the registry (every inner parser) once in the parent, before the fork."""
        from clawkb.parsers.registry import default_registry

        default_registry()

    def parse(self, data: bytes, path: str) -> ParsedDocument:
        suffix = PurePath(path).suffix.lower()
        if suffix not in STREAM_FORMATS:
            raise UnsupportedFileError(path, f"not a compressed file ('{suffix}')")
        inner_name = PurePath(path).name[: -len(suffix)] or "unnamed"
        if inner_name.lower().endswith(".tar") or PurePath(inner_name).suffix.lower() in (
            *STREAM_FORMATS,
            ".zip",
        ):
            raise UnsupportedFileError(path, "an archive of several files, not indexed")
        inner = inflate_stream(data, path, suffix)
        parser = inner_parser(inner_name, inner)
        if parser is None:
            raise UnsupportedFileError(
                path, f"binary content inside {STREAM_FORMATS[suffix][0]}, skipped"
            )
        doc = parse_inner(parser, inner, path)
        metadata = {
            **doc.metadata,
            "compressed": STREAM_FORMATS[suffix][0],
            "inner_name": inner_name,
            "inner_parser": parser.name,
        }
        return ParsedDocument(
            slices=doc.slices,
            title=doc.title or inner_name,
            metadata=metadata,
            encoding=doc.encoding,
            warnings=doc.warnings,
        )


def readable_bytes(path: str, data: bytes) -> bytes:
    """The bytes to show for a file: decompressed (bounded) when it is ``.gz/.bz2/.xz``.

    Citations into a compressed file count lines of its decompressed text, so
    ``show`` and the web page's source view read through it too. Raises
    :class:`~clawkb.errors.ParseError` for a corrupt or oversized stream.
    """
    suffix = PurePath(path).suffix.lower()
    return inflate_stream(data, path, suffix) if suffix in STREAM_FORMATS else data


def inner_parser(inner_name: str, data: bytes) -> Parser | None:
    """The parser the inner file would get on disk; text by content as the fallback."""
    from clawkb.parsers.registry import default_registry

    registry = default_registry()
    parser = registry.for_path(inner_name)
    if parser is not None and parser.name != "compressed":
        return parser
    if data and not looks_binary(data):
        return registry.by_name("text")
    return None


def parse_inner(parser: Parser, data: bytes, path: str) -> ParsedDocument:
    """Parse a file found inside another one: in this worker's sandbox when there is one,
    else in a sandboxed worker of its own if its parser runs isolated."""
    from clawkb.parsers.limits import in_worker, parse_with_limit, time_left

    if getattr(parser, "isolate", False) and not in_worker():
        left = time_left()
        timeout = left if left is not None and left > 0 else DEFAULT_INNER_TIMEOUT_S
        return parse_with_limit(parser, data, path, timeout)
    return parser.parse(data, path)
