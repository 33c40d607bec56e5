"""Which documents are datasheets, and which board each one describes.

A *datasheet root* is a folder given to ``clawkb index --datasheets DIR``
(remembered in the store) or listed under ``datasheets:`` in ``config.yaml``
(relative paths are taken from the folder that holds the KB folder). Every
file below a root is a datasheet; its board is, in order:

1. ``board:`` in its front matter (``generic`` or empty means no board);
2. no board when the file name starts with ``generic`` or a folder between
   the root and the file is named ``generic`` or ``_generic``;
3. the first folder below the root, for files in a sub-folder
   (``DIR/nucleo-f401re/ref-manual.pdf``);
4. the file name stem (``DIR/nucleo-f401re.md`` -> ``nucleo-f401re``).

Board names are normalised (lower case, blanks as ``-``) so ``--board`` and
file names meet. Generic datasheets are stored with board ``''``, documents
that are not datasheets with ``NULL``.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from clawkb.config import Config
from clawkb.errors import ConfigError
from clawkb.store import db, hardware_repo

#: ``meta`` key holding the datasheet roots registered by ``index --datasheets``.
META_ROOTS = "hardware_datasheet_roots"
GENERIC_FOLDERS = frozenset({"generic", "_generic"})
_BLANKS = re.compile(r"[\s_]+")


def normalize_board(name: str) -> str:
    """``"Nucleo F401RE"`` -> ``"nucleo-f401re"``; ``"generic"`` -> ``""``."""
    board = _BLANKS.sub("-", name.strip().casefold()).strip("-")
    return "" if board == "generic" else board


def infer_board(path: str, root: str, metadata: Mapping[str, Any] | None = None) -> str:
    """The board a datasheet at ``path`` (below ``root``) describes; ``''`` = generic."""
    front = (metadata or {}).get("board")
    if front is not None and not isinstance(front, list | dict):
        return normalize_board(str(front))
    rel = PurePosixPath(os.path.relpath(path, root).replace(os.sep, "/"))
    folders = rel.parts[:-1]
    if rel.name.casefold().startswith("generic") or any(
        f.casefold() in GENERIC_FOLDERS for f in folders
    ):
        return ""
    if folders:
        return normalize_board(folders[0])
    return normalize_board(PurePosixPath(rel.name).stem)


def configured_roots(config: Config, home: Path) -> list[str]:
    """Datasheet folders from ``config.yaml`` (``datasheets: [DIR, ...]``)."""
    value = config.datasheets  # validated by the settings model (a folder or a list)
    if not all(v.strip() for v in value):
        raise ConfigError(f"{home / 'config.yaml'}: 'datasheets' must not name an empty folder")
    base = home.parent
    return [(base / Path(v).expanduser()).resolve().as_posix() for v in value]


def registered_roots(conn: sqlite3.Connection) -> list[str]:
    raw = db.get_meta(conn, META_ROOTS)
    return list(json.loads(raw)) if raw else []


def register_roots(conn: sqlite3.Connection, folders: Iterable[str]) -> list[str]:
    """Remember datasheet folders so later plain ``clawkb index`` runs keep them datasheets."""
    roots = registered_roots(conn)
    new = [f for f in folders if f not in roots]
    if new:
        with db.transaction(conn):
            db.set_meta(conn, META_ROOTS, json.dumps(roots + new))
    return roots + new


def all_roots(conn: sqlite3.Connection, config: Config, home: Path) -> list[str]:
    return list(dict.fromkeys(registered_roots(conn) + configured_roots(config, home)))


def root_of(path: str, roots: Sequence[str]) -> str | None:
    """The deepest datasheet root holding ``path``, if any."""
    best = None
    for root in roots:
        if (path == root or path.startswith(root.rstrip("/") + "/")) and (
            best is None or len(root) > len(best)
        ):
            best = root
    return best


def known_boards(conn: sqlite3.Connection) -> list[str]:
    """Boards with at least one datasheet or alias in the store."""
    return hardware_repo.known_boards(conn)


def check_boards(conn: sqlite3.Connection, boards: Iterable[str]) -> list[str]:
    """Normalise ``--board`` values; an unknown board is an error that lists the known ones."""
    names = list(boards)
    wanted = [normalize_board(b) for b in names]
    known = set(known_boards(conn))
    for name, board in zip(names, wanted, strict=True):
        if board and board not in known:
            listing = ", ".join(sorted(known)) or "none yet: run `clawkb index --datasheets DIR`"
            raise ConfigError(f"unknown board {name!r} (known boards: {listing})")
    return [b for b in dict.fromkeys(wanted) if b]
