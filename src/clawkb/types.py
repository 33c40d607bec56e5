"""Core value types shared by every layer: small, frozen, and free of I/O.

Flow: a parser turns a file into a :class:`ParsedDocument` made of
:class:`Slice` objects; the chunker groups slices into :class:`Chunk` objects;
search returns :class:`Hit` objects that carry an :class:`Anchor`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from clawkb.fastinit import fast_init

#: Slice kinds a parser may emit.
SLICE_KINDS = ("text", "code", "table", "list", "formula")

#: A JSON value as the HTTP API, MCP and ``--json`` write it (read-only views, so a
#: ``dict[str, int]`` or a ``list[str]`` is one too).
JSON: TypeAlias = str | int | float | bool | Sequence["JSON"] | Mapping[str, "JSON"] | None
#: A JSON value as a parser builds it (plain lists and dicts): front matter, metadata.
JSONValue: TypeAlias = "str | int | float | bool | list[JSONValue] | dict[str, JSONValue] | None"


@dataclass(frozen=True, slots=True)
class Link:
    """A link found in a slice: ``[text](url)`` or ``[[wiki target]]``."""

    target: str
    text: str = ""
    kind: str = "url"  # "url" | "wiki"


@dataclass(frozen=True, slots=True)
class Slice:
    """One structural unit a parser found, with where it came from.

    Line numbers are 1-based and inclusive, counted in the decoded source file.
    """

    text: str
    line_start: int
    line_end: int
    heading_path: tuple[str, ...] = ()
    kind: str = "text"
    language: str | None = None
    page: int | None = None
    links: tuple[Link, ...] = ()


@dataclass(frozen=True, slots=True)
class ParsedDocument:
    """What a parser returns for one file."""

    slices: tuple[Slice, ...]
    title: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)
    encoding: str | None = None
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Chunk:
    """The unit that is indexed and returned: one or more slices, size-bounded."""

    text: str
    line_start: int
    line_end: int
    heading_path: tuple[str, ...] = ()
    kind: str = "text"  # dominant kind: "text" | "code" | "table" | "mixed"
    has_code: bool = False
    has_table: bool = False
    language: str | None = None
    page: int | None = None
    links: tuple[Link, ...] = ()

    @property
    def heading(self) -> str:
        return " > ".join(self.heading_path)


@fast_init  # built for every search hit
@dataclass(frozen=True, slots=True)
class Anchor:
    """A stable id for a chunk plus what a human needs to open it."""

    id: str
    path: str
    line_start: int
    line_end: int
    heading_path: tuple[str, ...] = ()
    page: int | None = None

    @property
    def location(self) -> str:
        loc = f"{self.path}:{self.line_start}-{self.line_end}"
        if self.page is not None:
            loc += f" (p. {self.page})"
        return loc


@fast_init  # built for every search hit
@dataclass(frozen=True, slots=True)
class Hit:
    """One search result: the chunk text, its anchor, score and explanation."""

    rank: int
    score: float
    anchor: Anchor
    text: str
    title: str = ""
    kind: str = "text"
    matched_terms: tuple[str, ...] = ()
    snippet: str = ""
    highlights: tuple[tuple[int, int], ...] = ()  # (start, end) spans in ``snippet``
    explanation: dict[str, Any] | None = None
    trust: str | None = None  # trust tier of the source (clawkb.knowledge.TIERS)
    domain: str | None = None
