"""Keep the index current from file-system events (``clawkb watch``, ``clawkb serve --watch``).

watchfiles (inotify on Linux) reports changes; they are debounced, filtered
(editor swap/temp files, ignored folders, the KB's own folder) and collected
in a pending set. One run at a time goes to the single writer; events that
arrive while it runs are coalesced into the next run. A run:

1. walks each touched root once (``.gitignore``/``.clawkbignore`` apply) and
   indexes the changed files that the walk keeps, in batches of 32, so
   searches interleave between batches;
2. when anything was deleted, renamed, moved out or a folder changed, runs one
   incremental pass over the root, which removes what is gone;
3. when the KB has vectors, embeds the new chunks in the background.

Every write goes through :meth:`KnowledgeBase.index`, which takes the KB's
file lock: a CLI ``index`` and a watch never write at once.
"""

from __future__ import annotations

import fnmatch
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clawkb.ingest.discover import ALWAYS_SKIP_DIRS

if TYPE_CHECKING:
    import watchfiles

    from clawkb.kb import IndexReport, KnowledgeBase
    from clawkb.server.app import ServerState
    from clawkb.server.metrics import Metrics
    from clawkb.server.runtime import Runtime

    #: what watchfiles reports, or ``(None, path)`` for a root to rescan
    Changes = Iterable[tuple[watchfiles.Change | None, str]]

log = logging.getLogger("clawkb.watch")

#: Editor swap files, partial downloads and temporary saves: never worth a run.
TEMP_PATTERNS = (
    "*.swp", "*.swo", "*.swx", "*.swpx", "*~", ".#*", "#*#", "4913", "*.tmp", "*.temp",
    "*.part", "*.crdownload", ".~lock.*#", "*.kate-swp", ".upload-*", "*.bak", ".DS_Store",
    "*.pyc", "~$*", ".goutputstream-*", "*___jb_tmp___", "*___jb_old___",
)  # fmt: skip
BATCH_FILES = 32


def is_temp(name: str) -> bool:
    return any(fnmatch.fnmatchcase(name, p) for p in TEMP_PATTERNS)


class Watcher:
    """Watches ``roots`` and feeds runs to ``runtime`` (the one writer)."""

    def __init__(
        self,
        runtime: Runtime,
        roots: Sequence[Path],
        *,
        home: Path,
        debounce_ms: int = 300,
        on_run: Callable[[dict[str, Any]], None] | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        self.runtime = runtime
        self.roots = [Path(r).resolve() for r in roots]
        self.home = home.resolve()
        self.debounce_ms = debounce_ms
        self.on_run = on_run
        self.metrics = metrics
        self._pending: dict[str, tuple[str, float]] = {}  # path -> (change, first seen)
        self._lock = threading.Lock()
        self._scheduled = False
        self._stop = threading.Event()
        self.ready = threading.Event()
        self._thread: threading.Thread | None = None
        self.runs = 0
        self.running = False
        self.last: dict[str, Any] | None = None
        self.last_error: str | None = None

    # -- lifecycle ----------------------------------------------------------
    def start(self, wait: float = 10.0) -> None:
        """Start watching; return once the OS watch is in place (or ``wait`` passed)."""
        self._thread = threading.Thread(target=self._loop, name="clawkb-watch", daemon=True)
        self._thread.start()
        self.ready.wait(wait)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def state(self) -> dict[str, Any]:
        with self._lock:
            pending = len(self._pending)
        return {
            "roots": [r.as_posix() for r in self.roots],
            "watching": bool(self._thread and self._thread.is_alive()),
            "pending": pending,
            "running": self.running,
            "runs": self.runs,
            "last_run": self.last,
            "last_error": self.last_error,
        }

    # -- events -------------------------------------------------------------
    def keep(self, change: object, path: str) -> bool:
        p = Path(path)
        if p == self.home or self.home in p.parents:
            return False
        if is_temp(p.name):
            return False
        return not any(part in ALWAYS_SKIP_DIRS for part in p.parts)

    def _loop(self) -> None:
        import watchfiles

        while not self._stop.is_set():
            live = [r for r in self.roots if r.is_dir()]
            if not live:
                self._stop.wait(0.5)
                continue
            try:
                started = False
                for changes in watchfiles.watch(
                    *live, watch_filter=self.keep, debounce=self.debounce_ms, step=25,
                    stop_event=self._stop, rust_timeout=250, yield_on_timeout=True,
                    raise_interrupt=False,
                ):  # fmt: skip
                    if not started:
                        # The watch is in place: catch up with what changed before it was.
                        started = True
                        self.add({(None, r.as_posix()) for r in live})
                        self.ready.set()
                    if changes:
                        self.add(changes)
                    if [r for r in self.roots if r.is_dir()] != live:
                        # a root was deleted or (re)created: catch up, then watch again
                        self.add({(None, r.as_posix()) for r in self.roots})
                        break
            except Exception as exc:  # a vanished root, a watch limit: retry shortly
                self.last_error = f"watch: {exc}"
                log.warning("watch: %s", exc)
                self._stop.wait(0.5)

    def add(self, changes: Changes) -> None:
        now = time.time()
        with self._lock:
            for change, path in changes:
                name = getattr(change, "name", "changed")
                self._pending.setdefault(path, (name, now))
            if self.metrics is not None:
                self.metrics.watch_queue.set(len(self._pending))
            if self._scheduled:
                return
            self._scheduled = True
        self.runtime.submit(self._plan, "watch", gated=False)

    # -- runs ---------------------------------------------------------------
    def _take(self) -> dict[str, tuple[str, float]]:
        with self._lock:
            batch, self._pending = self._pending, {}
            self._scheduled = False
            if self.metrics is not None:
                self.metrics.watch_queue.set(0)
        return batch

    def _plan(self, kb: KnowledgeBase) -> None:
        """The first job of a run (on the writer): split the work into short jobs."""
        batch = self._take()
        if not batch:
            return
        self.running = True
        first = min(t for _, t in batch.values())
        t0 = time.perf_counter()
        totals: dict[str, int] = {}
        errors: list[dict[str, str]] = []
        try:
            for root in self.roots:
                self._run_root(kb, root, batch, totals, errors)
        except Exception as exc:
            self.last_error = f"{type(exc).__name__}: {exc}"
            log.warning("watch run failed: %s", exc)
        finally:
            self.running = False
        self.runs += 1  # before the lag is observed: observed lags <= runs at any moment
        self.last = {
            "at": time.time(),
            "events": len(batch),
            "seconds": round(time.perf_counter() - t0, 3),
            "lag_s": round(time.time() - first, 3),
            "counts": totals,
            "errors": errors[:20],
        }
        if self.metrics is not None:
            self.metrics.watch_lag.observe(time.time() - first)
        if self.on_run:
            self.on_run(self.last)
        self._maybe_embed(kb)

    def _run_root(
        self,
        kb: KnowledgeBase,
        root: Path,
        batch: dict[str, tuple[str, float]],
        totals: dict[str, int],
        errors: list[dict[str, str]],
    ) -> None:
        mine = [p for p in batch if p == root.as_posix() or p.startswith(root.as_posix() + "/")]
        if not mine:
            return
        if not root.is_dir():  # an unmounted or deleted root: keep what we have
            return
        from clawkb.ingest.discover import discover

        kept = {f.path.as_posix() for f in discover(root, kb.config.ignore)}
        files = sorted(p for p in mine if p in kept and os.path.isfile(p))
        full_pass = len(files) < len(mine)  # deletions, moves, folders, ignored files
        # Batches, each its own exclusive section, so searches get in between.
        for i in range(0, len(files), BATCH_FILES):
            with self.runtime.exclusive():
                self._count(kb.index(files[i : i + BATCH_FILES], wait=60), totals, errors)
        if full_pass:
            with self.runtime.exclusive():
                self._count(kb.index([root], wait=60), totals, errors)

    def _count(
        self, report: IndexReport | None, totals: dict[str, int], errors: list[dict[str, str]]
    ) -> None:
        if report is None:
            return
        for key in ("added", "updated", "removed", "failed", "reparsed"):
            totals[key] = totals.get(key, 0) + int(getattr(report, key))
        errors.extend({"path": p, "reason": r} for p, r in report.errors)
        if self.metrics is not None:
            self.metrics.observe_run(report, "watch")

    def _maybe_embed(self, kb: KnowledgeBase) -> None:
        from clawkb.embed.run import dense_status

        d = dense_status(kb)
        if not d or not d.get("vectors") or d.get("vectors", 0) >= d.get("chunks", 0):
            return

        def embed(kb: KnowledgeBase) -> None:
            from clawkb.embed.run import embed_kb

            try:
                embed_kb(kb)
            except Exception as exc:
                self.last_error = f"embedding: {exc}"

        self.runtime.submit(embed, "embed")  # exclusive: readers renew afterwards


def server_watcher(state: ServerState) -> Watcher:
    """``serve --watch``: watch the server's roots through its runtime and metrics."""
    return Watcher(
        state.runtime,
        state.roots,
        home=state.settings.home,
        debounce_ms=state.settings.watch_debounce_ms,
        metrics=state.metrics,
    )
