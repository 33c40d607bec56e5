"""``clawkb pins``: list aliases per board; set one by editing the board's Markdown file.

The devices file stays the source of truth and stays human-editable: ``set``
rewrites one line (or adds one) in its ``Pin Aliases`` section and re-indexes
the file, so the next query sees the alias with a real file, line and anchor.
The file is, in order: ``<board>.md`` among the board's indexed datasheets,
another Markdown datasheet of the board that has an alias section, or a new
``<datasheet folder>/<board>.md``.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clawkb.errors import ConfigError
from clawkb.hardware.aliases import (
    PinAlias,
    clean_pin,
    find_conflicts,
    is_pin,
    is_section_title,
    normalize_alias,
    parse_alias_lines,
    table_cells,
    table_columns,
)
from clawkb.hardware.boards import all_roots, normalize_board, root_of
from clawkb.store import hardware_repo
from clawkb.store.hardware_repo import load_aliases

if TYPE_CHECKING:
    from clawkb.kb import KnowledgeBase

_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)[ \t#]*$")
_MD_SUFFIXES = (".md", ".markdown")
#: Longest board or alias name ``pins set`` accepts.
MAX_NAME = 64
_BOARD_NAME = re.compile(r"[^\W_][\w.+\-]*")


@dataclass(frozen=True, slots=True)
class PinEdit:
    board: str
    alias: str
    pin: str
    path: str
    line: int
    previous: str | None  # the pin it replaced, if the alias existed
    created: bool  # the file did not exist

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__slots__}


def list_pins(kb: KnowledgeBase, board: str | None = None) -> dict[str, Any]:
    """Aliases per board (one board if given) with their anchors, plus conflicts."""
    names = None
    if board:
        from clawkb.hardware.boards import check_boards

        names = check_boards(kb.conn, [board])
    aliases = [a for a in load_aliases(kb.conn, names) if names is None or a.board in names]
    boards: dict[str, list[dict[str, Any]]] = {}
    for a in aliases:
        boards.setdefault(a.board, []).append(a.to_dict())
    return {"boards": boards, "conflicts": [c.describe() for c in find_conflicts(aliases)]}


def set_pin(kb: KnowledgeBase, board: str, alias: str, pin: str) -> PinEdit:
    """Write ``alias = pin`` into the board's devices file and re-index that file."""
    name, key, pin = _validate(board, alias, pin)
    path, created = _devices_file(kb, name)
    lines = path.read_text(encoding="utf-8").split("\n") if path.exists() else []
    if created:
        lines = [f"# {name}", ""]
    lines, line, previous = _write_alias(lines, key, pin)
    _check_inside(path, all_roots(kb.conn, kb.config, kb.home))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines), encoding="utf-8")
    kb.index([path])
    return PinEdit(name, key, pin, path.as_posix(), line, previous, created)


def check_board_name(board: str) -> str:
    """The normalised board name, safe as a file name; :class:`ConfigError` otherwise.

    A board name becomes ``<datasheet folder>/<board>.md``, so it must be one
    plain file name: letters, digits, ``-``, ``_``, ``.``, ``+``, at most
    :data:`MAX_NAME` characters, no path separator and no leading dot.
    """
    name = normalize_board(board)
    if not name:
        raise ConfigError(
            f"board {_shown(board)}: give a board name (generic files hold no aliases)"
        )
    if len(name) > MAX_NAME or not _BOARD_NAME.fullmatch(name):
        raise ConfigError(
            f"board {_shown(board)}: use 1-{MAX_NAME} letters, digits, '-', '_', '.' or '+'"
            " (no '/', no leading '.')"
        )
    return name


def _shown(value: str) -> str:
    """A user value quoted for an error message, shortened when very long."""
    return repr(value if len(value) <= 40 else value[:37] + "...")


def _validate(board: str, alias: str, pin: str) -> tuple[str, str, str]:
    name = check_board_name(board)
    key = normalize_alias(alias)
    if not key or len(key) > MAX_NAME or not key.isprintable() or any(c in key for c in "|:=#"):
        raise ConfigError(
            f"alias {_shown(alias)}: use 1-{MAX_NAME} printable characters without | : = #"
        )
    pin = clean_pin(pin)
    if not is_pin(pin):
        raise ConfigError(
            f"pin {pin!r}: not a pin number or port name (e.g. 13, PA5, GPIO13, D13, GP25)"
        )
    return name, key, pin


def _devices_file(kb: KnowledgeBase, board: str) -> tuple[Path, bool]:
    roots = all_roots(kb.conn, kb.config, kb.home)
    if not roots:
        raise ConfigError(
            "no datasheet folder yet: run `clawkb index --datasheets DIR` or set"
            " `datasheets:` in config.yaml"
        )
    docs = [
        p
        for p in hardware_repo.board_document_paths(kb.conn, board)
        if p.lower().endswith(_MD_SUFFIXES) and Path(p).exists()
    ]
    for p in docs:
        if normalize_board(Path(p).stem) == board:
            return Path(p), False
    for p in docs:
        if any(_section_at(Path(p).read_text(encoding="utf-8").split("\n"))):
            return Path(p), False
    root = root_of(docs[0], roots) if docs else None
    path = Path(root or roots[0]) / f"{board}.md"
    return path, not path.exists()


def _check_inside(path: Path, roots: list[str]) -> None:
    """Refuse to write anywhere but inside a datasheet folder (symlinks resolved)."""
    real = os.path.realpath(path)
    for root in roots:
        top = os.path.realpath(root)
        if real.startswith(top.rstrip("/") + "/"):
            return
    raise ConfigError(f"{path}: resolves to {real}, outside the datasheet folders; not written")


def _section_at(lines: list[str]) -> tuple[int, int] | tuple[()]:
    """(heading index, end index) of the first alias section, or ()."""
    for i, line in enumerate(lines):
        m = _HEADING.match(line)
        if m and is_section_title(m.group(2)):
            level = len(m.group(1))
            end = next(
                (
                    j
                    for j in range(i + 1, len(lines))
                    if (h := _HEADING.match(lines[j])) and len(h.group(1)) <= level
                ),
                len(lines),
            )
            return i, end
    return ()


def _write_alias(lines: list[str], alias: str, pin: str) -> tuple[list[str], int, str | None]:
    """Edit the lines; returns (lines, 1-based line of the alias, previous pin)."""
    section = _section_at(lines)
    if not section:
        while lines and not lines[-1].strip():
            lines.pop()
        lines += [
            "",
            "## Pin Aliases",
            "",
            "| alias | pin |",
            "|-------|-----|",
            f"| {alias} | {pin} |",
            "",
        ]
        return lines, len(lines) - 1, None
    start, end = section
    numbered = [(k + 1, lines[k]) for k in range(start + 1, end)]
    same = [a for a in parse_alias_lines(numbered) if a.alias == alias]
    if same:
        for a in same:
            lines[a.line - 1] = _replace_pin(lines[a.line - 1], a.pin, pin)
        return lines, same[0].line, same[0].pin
    table = [k for k in range(start + 1, end) if lines[k].strip().startswith("|")]
    if table:
        first = table[0]
        last = first
        while last + 1 < end and lines[last + 1].strip().startswith("|"):
            last += 1
        header = table_cells(lines[first])
        a_col, p_col = table_columns(header)
        cells = [""] * max(len(header), p_col + 1, a_col + 1)
        cells[a_col], cells[p_col] = alias, pin
        lines.insert(last + 1, "| " + " | ".join(cells) + " |")
        return lines, last + 2, None
    kv = [a.line for a in parse_alias_lines(numbered)]
    if kv:
        lines.insert(kv[-1], f"{alias}: {pin}")
        return lines, kv[-1] + 1, None
    block = ["", "| alias | pin |", "|-------|-----|", f"| {alias} | {pin} |"]
    lines[start + 1 : start + 1] = block
    return lines, start + 1 + len(block), None


def _replace_pin(line: str, old: str, new: str) -> str:
    if line.strip().startswith("|"):
        cells = line.split("|")
        for i, c in enumerate(cells):
            if clean_pin(c) == old:
                cells[i] = c.replace(old, new, 1)
                break
        return "|".join(cells)
    sep = re.search(r"[:=：]", line)
    head, tail = (line[: sep.end()], line[sep.end() :]) if sep else ("", line)
    return head + tail.replace(old, new, 1)


__all__ = ["PinAlias", "PinEdit", "list_pins", "set_pin"]
