"""Search filters compiled to Milvus boolean expressions (same meaning as local SQL)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from clawkb.errors import ConfigError

if TYPE_CHECKING:
    from clawkb.retrieve.filters import Filters


def quote(value: str) -> str:
    """A Milvus string literal."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def glob_to_like(glob: str) -> str:
    """SQLite GLOB (``*`` any run, ``?`` one char) as a Milvus LIKE pattern."""
    if "[" in glob:
        raise ConfigError(
            f"path glob {glob!r}: character classes ([...]) are not supported on the milvus backend"
        )
    out = []
    for ch in glob:
        if ch == "*":
            out.append("%")
        elif ch == "?":
            out.append("_")
        elif ch in "%_\\":
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)


def _like(field: str, pattern: str) -> str:
    return f"{field} like " + '"' + pattern.replace('"', '\\"') + '"'


def _strings(values: Sequence[str]) -> str:
    return "[" + ", ".join(quote(v) for v in values) + "]"


def compile_filters(
    filters: Filters | None = None,
    *,
    path_globs: Sequence[str] = (),
    include_memory: bool = False,
    namespace: str | None = None,
    boards: Sequence[str] = (),
    datasheets_only: bool = False,
) -> str:
    """One boolean expression for :class:`clawkb.retrieve.filters.Filters` and friends."""
    parts: list[str] = []
    globs = tuple(dict.fromkeys((*path_globs, *(filters.path_globs if filters else ()))))
    if globs:
        ors = []
        for g in globs:
            like = glob_to_like(g)
            ors += [_like("path", like), _like("rel_path", like)]
        parts.append("(" + " or ".join(ors) + ")")
    if filters is not None:
        if filters.doc_types:
            ors = []
            for t in filters.doc_types:
                t = t.lower().lstrip(".")
                ors += [f"doc_type == {quote(t)}", _like("path", "%." + glob_to_like(t))]
            parts.append("(" + " or ".join(ors) + ")")
        for key, value in filters.metadata:
            k = quote(key)
            parts.append(f"exists meta[{k}]" if value is None else f"meta[{k}] == {quote(value)}")
        if filters.since is not None:
            parts.append(f"mtime >= {float(filters.since)!r}")
        if filters.until is not None:
            parts.append(f"mtime <= {float(filters.until)!r}")
    if namespace is not None:
        parts.append(f"namespace == {quote(namespace)}")
    elif not include_memory:
        parts.append('namespace == ""')
    if boards:
        parts.append(f'(datasheet == true and (board in {_strings(boards)} or board == ""))')
    elif datasheets_only:
        parts.append("datasheet == true")
    return " and ".join(parts)
