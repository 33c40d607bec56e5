"""Plain-text parser: blank-line separated paragraphs with exact line spans.

Plain text has no structure beyond paragraphs, so each paragraph becomes one
``text`` slice; the chunker packs small ones together and splits long ones.
Slice text keeps the original lines one to one, so a slice with ``n`` lines
spans exactly ``n`` file lines (the chunker relies on that to give pieces of a
long paragraph exact line numbers). ``.rst`` is claimed too: reStructuredText
read as paragraphs is far better than not indexing it at all.
"""

from __future__ import annotations

from pathlib import PurePath
from typing import ClassVar

from clawkb.ingest.decode import decode_source
from clawkb.types import ParsedDocument, Slice

#: Longest title taken from the first line; longer lines are cut.
MAX_TITLE_CHARS = 120


class TextParser:
    """Parser for ``.txt``, ``.text``, ``.log`` and ``.rst`` files."""

    name: ClassVar[str] = "text"
    extensions: ClassVar[tuple[str, ...]] = (".txt", ".text", ".log", ".rst")
    mime_types: ClassVar[tuple[str, ...]] = ("text/plain", "text/x-rst")

    def parse(self, data: bytes, path: str) -> ParsedDocument:
        text, encoding = decode_source(data, path)
        lines = text.split("\n")
        slices = tuple(paragraph_slices(lines))
        return ParsedDocument(
            slices=slices,
            title=first_line_title(lines) or PurePath(path).stem,
            encoding=encoding,
        )


def paragraph_slices(lines: list[str], first_line: int = 1) -> list[Slice]:
    """Runs of non-blank lines as slices; ``first_line`` is the number of ``lines[0]``."""
    slices: list[Slice] = []
    start: int | None = None
    for index, line in enumerate([*lines, ""]):
        if line.strip():
            if start is None:
                start = index
            continue
        if start is not None:
            body = "\n".join(lines[start:index])
            slices.append(Slice(body, first_line + start, first_line + index - 1))
            start = None
    return slices


def first_line_title(lines: list[str]) -> str:
    """The first non-empty line, trimmed to :data:`MAX_TITLE_CHARS`."""
    for line in lines:
        stripped = line.strip()
        if stripped:
            return stripped[:MAX_TITLE_CHARS].rstrip()
    return ""
