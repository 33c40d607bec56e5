"""Aligned plain-text tables for every listing the CLI prints (rich does the layout).

Columns are measured in terminal cells, not characters, so Chinese (two cells
per character) lines up with ASCII. Output is plain text — no colour, no
box lines, no trailing blanks — so it pipes and greps like the rest.
"""

from __future__ import annotations

import io
from collections.abc import Sequence

from clawkb.cli.common import echo


def format_table(
    rows: Sequence[Sequence[object]], headers: Sequence[str] = (), indent: int = 0
) -> list[str]:
    """The table's lines: columns padded to the widest cell (in display cells)."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table(
        box=None, show_header=bool(headers), pad_edge=False, padding=(0, 2, 0, 0), show_edge=False
    )
    ncols = max([len(headers), *(len(r) for r in rows)])
    for i in range(ncols):
        table.add_column(headers[i] if i < len(headers) else "", no_wrap=True, overflow="ignore")
    for row in rows:
        cells = ["" if c is None else str(c) for c in row]
        table.add_row(*(Text(c) for c in cells + [""] * (ncols - len(cells))))
    buf = io.StringIO()
    Console(file=buf, width=100_000, force_terminal=False, color_system=None).print(
        table, crop=False
    )
    pad = " " * indent
    return [pad + line.rstrip() for line in buf.getvalue().splitlines()]


def echo_table(
    rows: Sequence[Sequence[object]], headers: Sequence[str] = (), indent: int = 0
) -> None:
    for line in format_table(rows, headers, indent):
        echo(line)


def cells(text: str) -> int:
    """Terminal columns ``text`` takes (two for each wide character)."""
    from rich.cells import cell_len

    return cell_len(text)


def clip(text: str, width: int, tail: str = "...") -> str:
    """``text`` cut to at most ``width`` terminal columns, marked with ``tail`` when cut."""
    from rich.cells import cell_len, set_cell_size

    if cell_len(text) <= width:
        return text
    return set_cell_size(text, width - len(tail)).rstrip() + tail


def pad(text: str, width: int) -> str:
    """``text`` padded with spaces to ``width`` terminal columns."""
    return text + " " * max(0, width - cells(text))
