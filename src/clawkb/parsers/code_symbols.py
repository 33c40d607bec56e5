"""Symbols (functions, classes, structs...) and how they become code slices.

Both symbol finders — tree-sitter (:mod:`clawkb.parsers.code_treesitter`)
and the regex/indent fallback (:mod:`clawkb.parsers.code_regex`) — return
flat lists of :class:`Symbol`; :func:`symbol_slices` turns them into slices.

Each source line belongs to the innermost symbol covering it; runs of lines
with the same owner become one ``code`` slice whose heading path is the
owner's qualified name (``("Uart", "write")``) — in the BM25F title field, so
a search for a symbol name ranks its definition above its call sites. Lines
outside every symbol (imports, globals) form slices with an empty heading
path. Slice text keeps one text line per source line, so spans are exact.
"""

from __future__ import annotations

from dataclasses import dataclass

from clawkb.types import Slice


@dataclass(frozen=True, slots=True)
class Symbol:
    """One definition with its 1-based inclusive line span (doc comments included)."""

    name: str
    kind: str  # function | method | class | struct | enum | trait | impl | type | macro | ...
    line_start: int
    line_end: int
    parent: tuple[str, ...] = ()
    is_function_def: bool = False

    @property
    def qualified(self) -> tuple[str, ...]:
        return (*self.parent, self.name)

    def to_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "qualified_name": ".".join(self.qualified),
            "kind": self.kind,
            "line_start": self.line_start,
            "line_end": self.line_end,
            "is_function_def": self.is_function_def,
        }


def nest(symbols: list[Symbol]) -> list[Symbol]:
    """Give symbols found without parents the chain of symbols containing them."""
    ordered = sorted(symbols, key=lambda s: (s.line_start, -s.line_end))
    out: list[Symbol] = []
    open_: list[Symbol] = []
    for sym in ordered:
        while open_ and open_[-1].line_end < sym.line_start:
            open_.pop()
        parent = sym.parent or (open_[-1].qualified if open_ else ())
        kind = "method" if sym.kind == "function" and parent else sym.kind
        placed = Symbol(sym.name, kind, sym.line_start, sym.line_end, parent, sym.is_function_def)
        out.append(placed)
        if sym.line_end > sym.line_start:
            open_.append(placed)
    return out


def symbol_slices(lines: list[str], symbols: list[Symbol], language: str) -> list[Slice]:
    """Code slices: runs of lines owned by the same innermost symbol."""
    owner: list[tuple[str, ...]] = [()] * (len(lines) + 1)
    # outer symbols first, inner ones overwrite their lines
    for sym in sorted(symbols, key=lambda s: (s.line_start, -s.line_end)):
        path = sym.qualified
        for line in range(max(1, sym.line_start), min(len(lines), sym.line_end) + 1):
            owner[line] = path
    slices: list[Slice] = []
    start = 1
    for line in range(2, len(lines) + 2):
        if line <= len(lines) and owner[line] == owner[start]:
            continue
        _emit(slices, lines, start, line - 1, owner[start], language)
        start = line
    return slices


def _emit(
    slices: list[Slice],
    lines: list[str],
    first: int,
    last: int,
    path: tuple[str, ...],
    language: str,
) -> None:
    while first <= last and not lines[first - 1].strip():
        first += 1
    while last >= first and not lines[last - 1].strip():
        last -= 1
    if first <= last:
        text = "\n".join(lines[first - 1 : last])
        slices.append(Slice(text, first, last, path, kind="code", language=language))
