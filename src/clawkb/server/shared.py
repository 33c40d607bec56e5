"""State the processes of ``serve --workers N`` share: chat turns and ``ask`` rate limits.

A lone server keeps both in memory (:class:`clawkb.server.chat.Conversations`,
:class:`clawkb.server.security.RateLimiter`). Under several workers a client's
next request can land on any of them, so both live in one small SQLite file
beside the KB (:data:`FILE_NAME`), with the same interface: a follow-up finds
its conversation whichever worker answers, and a client gets its
``ask_per_minute`` in total, not once per worker. Each update is one short
``BEGIN IMMEDIATE`` transaction; rows are keyed by the KB's name, so the KBs of
one server (``--add-kb``) keep theirs apart.
"""

from __future__ import annotations

import json
import secrets
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from clawkb.errors import NotFoundError
from clawkb.store import serve_repo

FILE_NAME = "serve-shared.sqlite"


class SharedFile:
    """The shared SQLite file: one connection per thread."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._local = threading.local()

    def conn(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = serve_repo.connect(self.path)
        return conn


class SharedConversations:
    """:class:`clawkb.server.chat.Conversations` in the shared file."""

    def __init__(self, file: SharedFile, kb: str, *, keep: int, turns: int) -> None:
        self.file, self.kb, self.keep, self.max_turns = file, kb, keep, turns

    def turns(self, cid: str | None) -> tuple[str, list[dict[str, Any]]]:
        conn, now = self.file.conn(), time.time()
        if cid is None:
            cid = secrets.token_hex(8)
            serve_repo.new_conversation(conn, self.kb, cid, now, self.keep)
            return cid, []
        raw = serve_repo.touch_conversation(conn, self.kb, cid, now)
        if raw is None:
            raise NotFoundError(
                f"no conversation {cid!r} (the server keeps the newest {self.keep})"
            )
        turns: list[dict[str, Any]] = json.loads(raw)
        return cid, turns

    def add(self, cid: str, turn: dict[str, Any]) -> None:
        def change(raw: str | None) -> str:
            turns = [*(json.loads(raw) if raw else []), turn][-self.max_turns :]
            return json.dumps(turns, ensure_ascii=False)

        serve_repo.update_turns(self.file.conn(), self.kb, cid, change, time.time())


class SharedRateLimiter:
    """:class:`clawkb.server.security.RateLimiter` (a token bucket per client) in the
    shared file: the workers draw from one bucket per client."""

    def __init__(self, file: SharedFile, kb: str, per_minute: int) -> None:
        self.file, self.kb = file, kb
        self.rate = per_minute / 60.0
        self.capacity = float(max(per_minute, 1))

    def allow(self, client: str) -> float:
        """0 when allowed, else seconds until the next call would be."""
        if self.rate <= 0:
            return 0.0
        return serve_repo.take_token(
            self.file.conn(), self.kb, client, time.time(), self.rate, self.capacity
        )
