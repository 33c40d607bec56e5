"""Advisory file locks: the one place clawkb talks to the OS about locking.

Only exclusive, non-blocking locks are used (the writer lock, reader leases,
job locks), so the same calls work with ``fcntl.flock`` on POSIX and
``msvcrt.locking`` on Windows. A lock belongs to the open file: closing the
file (or the process dying) releases it.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

try:
    import fcntl

    def _try(fh: IO[str]) -> bool:
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            return False

    def _release(fh: IO[str]) -> None:
        fcntl.flock(fh.fileno(), fcntl.LOCK_UN)

except ImportError:  # pragma: no cover - Windows
    import msvcrt

    def _try(fh: IO[str]) -> bool:
        fh.seek(0)
        try:
            msvcrt.locking(fh.fileno(), msvcrt.LK_NBLCK, 1)  # type: ignore[attr-defined]
            return True
        except OSError:
            return False

    def _release(fh: IO[str]) -> None:
        fh.seek(0)
        msvcrt.locking(fh.fileno(), msvcrt.LK_UNLCK, 1)  # type: ignore[attr-defined]


class FileLock:
    """An exclusive lock on ``path`` (created if missing)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fh: IO[str] | None = None

    @property
    def held(self) -> bool:
        return self._fh is not None

    def try_acquire(self) -> bool:
        fh = open(self.path, "a+")  # noqa: SIM115 - kept open while the lock is held
        if _try(fh):
            self._fh = fh
            return True
        fh.close()
        return False

    def acquire(
        self,
        wait: float,
        on_wait: Callable[[], None] | None = None,
        poll: float = 0.05,
        *,
        first_poll: float | None = None,
    ) -> bool:
        """Try for up to ``wait`` seconds; ``on_wait`` is called once if we have to wait.

        Tries again every ``poll`` seconds; with ``first_poll``, the first pause is
        that long and each next one twice the last, up to ``poll`` (a lock held for
        a moment, as a search's, is then taken a moment after its release, not up
        to ``poll`` later)."""
        deadline = time.monotonic() + wait
        told = False
        pause = poll if first_poll is None else min(first_poll, poll)
        while not self.try_acquire():
            now = time.monotonic()
            if now >= deadline:
                return False
            if on_wait and not told:
                on_wait()
                told = True
            time.sleep(min(pause, max(deadline - now, 0.0)))
            pause = min(pause * 2, poll)
        return True

    def write_owner(self) -> None:
        """Record our pid in the lock file (for humans looking at a stuck lock).

        Best effort: on a full disk the lock is still held, only the note is missing.
        """
        if self._fh is not None:
            fd = self._fh.fileno()  # unbuffered: a failed write leaves nothing pending
            os.ftruncate(fd, 0)
            try:
                os.pwrite(fd, str(os.getpid()).encode(), 0)
            except OSError:
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, 0)

    def clear_owner(self) -> None:
        """Empty the lock file: a clean finish (a pid left behind means a writer died)."""
        if self._fh is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fh.fileno(), 0)

    def release(self) -> None:
        fh, self._fh = self._fh, None
        if fh is not None:
            try:
                _release(fh)
            finally:
                fh.close()


def is_locked(path: Path) -> bool:
    """True if another open file holds the lock on ``path`` (missing file: False)."""
    if not path.exists():
        return False
    probe = FileLock(path)
    if probe.try_acquire():
        probe.release()
        return False
    return True
