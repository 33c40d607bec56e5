"""One progress display for every long CLI job (index, embed, ...).

* On a terminal: a rich progress bar with count, rate and ETA on stderr.
* Piped or redirected: one plain line every ``interval`` seconds (setting
  ``progress_interval_s``, env ``CLAWKB_PROGRESS_INTERVAL_S``), e.g.
  ``embed: 192/800 chunks (24%) · 61.3 chunks/s · ETA 0:00:09``, so a log
  shows the job is alive.
* Ctrl-C: the job stops where it is (work is committed batch by batch) and
  ``stopped after N of M chunks; run again to resume`` is printed; exit code 130.

Usage::

    with JobProgress("embed", "chunks", interval=5.0) as progress:
        run(..., progress=progress)   # progress(done, total) after each batch
"""

from __future__ import annotations

import sys
import time
from types import TracebackType
from typing import TYPE_CHECKING, TextIO

from clawkb.cli.common import emit

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

INTERRUPTED_EXIT = 130


def _clock(seconds: float) -> str:
    whole = max(0, round(seconds))
    return f"{whole // 3600}:{whole // 60 % 60:02d}:{whole % 60:02d}"


class JobProgress:
    """Callable ``(done, total, *detail)``; a context manager that handles Ctrl-C."""

    def __init__(
        self,
        label: str,
        unit: str,
        *,
        enabled: bool = True,
        interval: float = 5.0,
        min_total: int = 1,
        stream: TextIO | None = None,
    ) -> None:
        self.label, self.unit = label, unit
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.interval = interval
        self.min_total = min_total
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.done = self.total = 0
        self.started = time.monotonic()
        self._last_line = self.started  # the first line after one interval: short jobs stay quiet
        self._lines = 0
        self._bar: Progress | None = None
        self._task: TaskID | None = None

    # -- updates -------------------------------------------------------------
    def __call__(self, done: int, total: int, *detail: object) -> None:
        self.done, self.total = done, total
        if not self.enabled or total < self.min_total:
            return
        if self.tty:
            self._draw(done, total)
            return
        now = time.monotonic()
        if now - self._last_line >= self.interval or (done >= total and self._lines):
            self._last_line = now
            self._lines += 1
            emit(self.line(now), err=self.stream is sys.stderr, file=self._file())

    def line(self, now: float | None = None) -> str:
        """The plain status line: count, percent, rate and ETA."""
        elapsed = max((now or time.monotonic()) - self.started, 1e-9)
        rate = self.done / elapsed
        pct = 100 * self.done // self.total if self.total else 100  # 100% only when done
        eta = _clock((self.total - self.done) / rate) if rate > 0 else "?"
        return (
            f"{self.label}: {self.done}/{self.total} {self.unit} ({pct}%) · "
            f"{rate:.1f} {self.unit}/s · ETA {eta}"
        )

    def _file(self) -> TextIO | None:
        return None if self.stream is sys.stderr else self.stream

    def _draw(self, done: int, total: int) -> None:
        bar, task = self._bar, self._task
        if bar is None or task is None:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TaskProgressColumn,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            bar = Progress(
                TextColumn(f"{self.label}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn(self.unit),
                TaskProgressColumn(),
                TextColumn("{task.fields[rate]}"),
                TimeElapsedColumn(),
                TextColumn("ETA"),
                TimeRemainingColumn(),
                console=Console(file=self.stream),
                transient=True,
            )
            bar.start()
            task = bar.add_task(self.label, total=total, rate="")
            self._bar, self._task = bar, task
        rate = done / max(time.monotonic() - self.started, 1e-9)
        bar.update(task, completed=done, total=total, rate=f"{rate:.1f}/s")

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None

    # -- context -------------------------------------------------------------
    def __enter__(self) -> JobProgress:
        self.started = self._last_line = time.monotonic()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
        if kind is not None and issubclass(kind, KeyboardInterrupt):
            done = f"{self.done} of {self.total} {self.unit}" if self.total else "nothing"
            emit(f"{self.label}: stopped after {done}; run again to resume", err=True)
            sys.exit(INTERRUPTED_EXIT)
