"""Plain-text parser: blank-line separated paragraphs with exact line spans.

Plain text has no structure beyond paragraphs, so each paragraph becomes one
``text`` slice; the chunker packs small ones together and splits long ones.
Slice text keeps the original lines one to one, so a slice with ``n`` lines
spans exactly ``n`` file lines (the chunker relies on that to give pieces of a
long paragraph exact line numbers. reStructuredText has its own parser
(:mod:`clawkb.parsers.rst`).
"""

from __future__ import annotations

from pathlib import PurePath
from typing import ClassVar

from clawkb.text.decode import decode_source
from clawkb.types import ParsedDocument, Slice

#: Longest title taken from the first line; longer lines are cut.
MAX_TITLE_CHARS = 120


class TextParser:
    """Parser for ``.txt``, ``.text`` and ``.log`` files (and extensionless text)."""

    name: ClassVar[str] = "text"
    extensions: ClassVar[tuple[str, ...]] = (".txt", ".text", ".log")
    mime_types: ClassVar[tuple[str, ...]] = ("text/plain",)

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


#: First name parts (case-insensitive) of the documentation files projects and
#: distributions ship without a telling extension: ``README.Debian``,
#: ``CHANGES.old``, ``NEWS.Debian`` are text whatever follows the first dot.
DOC_NAMES = frozenset(
    [
        "readme",
        "read.me",
        "changes",
        "changelog",
        "news",
        "history",
        "todo",
        "authors",
        "contributors",
        "thanks",
        "copying",
        "copyright",
        "license",
        "licence",
        "install",
        "bugs",
        "notice",
        "faq",
        "credits",
        "maintainers",
        "release-notes",
        "releasenotes",
        "upgrading",
        "hacking",
    ]
)


def is_text_name(path: str) -> bool:
    """True for a file name that says "plain text" when no parser claims its extension.

    Extensionless names (``copyright``, ``Makefile`` is not claimed here: the
    caller still checks the content is text), documentation names with any
    suffix (``README.Debian``, ``changelog.Debian.amd64``) and Debian's
    ``*.Debian`` files. The caller checks the bytes are text.
    """
    name = PurePath(path).name
    if not PurePath(name).suffix:
        return True
    lowered = name.lower()
    if lowered.split(".", 1)[0] in DOC_NAMES:
        return True
    return ".debian" in lowered
