"""A full disk, said in one line: where, how much is free, about how much is needed.

Writers (index, reindex, embed, repair) meet a full disk as ``OSError(ENOSPC)``
or SQLite's ``database or disk is full``; both become :func:`message`. Readers
never write (issue 20), so searches keep working on the last published index
generation while the disk is full.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import sqlite3
from pathlib import Path

#: What a writer needs at the least: SQLite's WAL and a small index batch.
MIN_NEEDED = 16 << 20
_FULL = {errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)}
_SQLITE_FULL = 13


def is_disk_full(exc: BaseException) -> bool:
    if isinstance(exc, OSError) and exc.errno in _FULL:
        return True
    if isinstance(exc, sqlite3.OperationalError):
        code = getattr(exc, "sqlite_errorcode", None)
        return code == _SQLITE_FULL or "disk is full" in str(exc)
    return False


def needed_bytes(home: Path) -> int:
    """Room a writer wants: the lexical index's size (a rebuild writes a new generation
    beside the current one) and the store's WAL, at least :data:`MIN_NEEDED`."""
    total = 0
    for folder in (home / "index" / "lexical",):
        for root, _, files in os.walk(folder):
            for name in files:
                with contextlib.suppress(OSError):
                    total += os.stat(os.path.join(root, name)).st_size
    return max(total, MIN_NEEDED)


def _mb(n: int) -> str:
    return f"{n / (1 << 20):.1f} MB"


def message(exc: BaseException, home: Path | None) -> str:
    """``the disk is full: ...`` in one line, with the free and the needed space."""
    where = Path(getattr(exc, "filename", None) or home or ".")
    probe = home if home is not None and home.exists() else where
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    try:
        free = shutil.disk_usage(probe).free
    except OSError:
        free = 0
    need = needed_bytes(home) if home is not None else MIN_NEEDED
    more = max(need - free, 0)
    return (
        f"the disk is full: {_mb(free)} free on the disk holding {probe};"
        f" writing needs about {_mb(need)} ({_mb(more)} more). Searches still work on the"
        " last index; free some space, then run the command again (or `clawkb doctor --repair`)"
    )
