"""Store reads a search repeats, kept until the store changes.

Every search first checks that the index is current (the store's latest change
sequence, its tokenizer version) and looks up which chunks are agent memories;
the answers change only when something writes to the store. :class:`StoreMemo`
keeps them under a stamp that any write moves: SQLite's ``data_version``
(changes committed by other connections, in this process or another) and the
connection's own ``total_changes``. Checking the stamp is one pragma instead
of the queries it saves.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any, TypeVar, cast

T = TypeVar("T")


def commit_stamp(conn: sqlite3.Connection) -> tuple[int, int]:
    """Moves with every commit ``conn`` can see: another connection's (SQLite's
    ``data_version``) or its own (``total_changes``). One pragma."""
    return int(conn.execute("PRAGMA data_version").fetchone()[0]), conn.total_changes


class StoreMemo:
    """Values computed from one connection's store, forgotten when the store changes.

    Call :meth:`check` once at the start of a read (a search); :meth:`get`
    then returns the value computed since the last change, or computes it.
    """

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self._stamp: tuple[int, int] | None = None
        self._values: dict[str, Any] = {}

    def stamp(self) -> tuple[int, int]:
        return commit_stamp(self.conn)

    def check(self) -> None:
        """Forget every value when the store changed since the last check."""
        now = self.stamp()
        if now != self._stamp:
            self._values = {}
            self._stamp = now

    def get(self, name: str, compute: Callable[[], T]) -> T:
        values = self._values
        if name in values:
            return cast(T, values[name])
        value = values[name] = compute()
        return value

    def clear(self) -> None:
        self._values, self._stamp = {}, None
