"""Memory forensics for the soak's server (bench only, never imported by clawkb).

    python bench/soak_trace.py serve-traced DIR -- <clawkb arguments>
    python bench/soak_trace.py diff DIR/snap-A.pickle DIR/snap-B.pickle [--top 25]

``serve-traced`` runs the clawkb CLI (``serve``) with :mod:`tracemalloc` on
(25 frames a trace) and a thread that, whenever a file ``DIR/take-NAME``
appears, writes ``DIR/snap-NAME.pickle`` (the snapshot) and
``DIR/proc-NAME.json`` (what ``/proc/self`` says beyond Python: RSS and heap,
mappings of files that are gone, glibc arena-like anonymous mappings,
threads), then removes the request file. ``bench/soak.py --trace DIR``
drives it: a snapshot at 120 s (or half-way) and one at the end.

``diff`` prints the top growers between two snapshots grouped by traceback,
and the non-Python figures side by side.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import tracemalloc
from pathlib import Path
from typing import Any

FRAMES = 25


def proc_figures(pid: int | str = "self") -> dict[str, Any]:
    """Non-Python memory of a process from ``/proc``: its RSS and heap (``RssAnon``),
    the mappings of files since deleted (retired index segments still mapped) with
    their resident size, the segment files mapped at all, anonymous mappings of 64 MB
    reserve (glibc's per-thread arenas) and the thread count."""
    out: dict[str, Any] = {}
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            key = line.split(":")[0]
            if key in ("VmRSS", "RssAnon", "RssFile", "Threads"):
                out[key] = int(line.split()[1])
    deleted = seg_maps = seg_deleted = arenas = 0
    deleted_names: dict[str, int] = {}
    deleted_rss = seg_rss = 0
    cur_name, cur_size, cur_deleted = "", 0, False
    with open(f"/proc/{pid}/smaps") as fh:
        for line in fh:
            first = line.split(None, 1)[0]
            if "-" in first and not first.endswith(":"):
                parts = line.split()
                lo, hi = (int(x, 16) for x in parts[0].split("-"))
                cur_name = parts[5] if len(parts) > 5 else ""
                cur_deleted = line.rstrip().endswith("(deleted)")
                cur_size = hi - lo
                if cur_deleted:
                    deleted += 1
                    tail = os.path.join(*cur_name.split("/")[-2:])
                    deleted_names[tail] = deleted_names.get(tail, 0) + 1
                if "/seg-" in cur_name:
                    seg_maps += 1
                    seg_deleted += cur_deleted
                # glibc reserves 64 MB per extra arena (a thread's heap), mapped anonymously
                if not cur_name and (60 << 20) < cur_size <= (64 << 20):
                    arenas += 1
            elif first == "Rss:":
                kb = int(line.split()[1])
                if cur_deleted:
                    deleted_rss += kb
                if "/seg-" in cur_name:
                    seg_rss += kb
    out.update(
        deleted_maps=deleted,
        deleted_rss_kb=deleted_rss,
        segment_maps=seg_maps,
        segment_maps_deleted=seg_deleted,
        segment_rss_kb=seg_rss,
        arena_like_maps=arenas,
        deleted_names=deleted_names,
    )
    return out


def _native_figures() -> dict[str, Any]:
    """What the C side holds: SQLite's own heap (page caches of every connection) and
    glibc's arenas (bytes held, bytes free in its lists), when they can be read."""
    import ctypes

    out: dict[str, Any] = {}
    try:
        lib = ctypes.CDLL("libsqlite3.so.0")
        lib.sqlite3_memory_used.restype = ctypes.c_int64
        out["sqlite_kb"] = lib.sqlite3_memory_used() // 1024
    except (OSError, AttributeError):
        pass
    try:
        from clawkb.server import heap

        got = heap.stats()
        if got:
            out["malloc"] = {k: v // 1024 if k != "arenas" else v for k, v in got.items()}
    except ImportError:
        pass
    return out


def _take(folder: Path, name: str, tag: str) -> None:
    snap = tracemalloc.take_snapshot()
    snap.dump(str(folder / f"snap-{name}{tag}.pickle"))
    figures = proc_figures()
    figures.update(_native_figures())
    figures["traced_mb"] = round(tracemalloc.get_traced_memory()[0] / 1048576, 2)
    figures["at"] = time.time()
    figures["pid"] = os.getpid()
    (folder / f"proc-{name}{tag}.json").write_text(json.dumps(figures), "utf-8")


def _watch(folder: Path, tag: str = "") -> None:
    """Serve snapshot requests (``DIR/take-NAME``). The one process: the request file
    goes when done. A worker of ``serve --workers`` (``tag`` ``-w<pid>``): it answers
    each name once and leaves the file to :func:`request`, which waits for all."""
    done: set[str] = set()
    while True:
        for req in sorted(folder.glob("take-*")):
            name = req.name[len("take-") :]
            if name in done:
                continue
            _take(folder, name, tag)
            if tag:
                done.add(name)
            else:
                req.unlink()
        time.sleep(0.5)


def serve_traced(folder: Path, argv: list[str]) -> int:
    """Run the CLI traced. With ``--workers N`` each forked worker is traced and
    answers snapshot requests itself (``snap-NAME-w<pid>``); the parent only
    supervises (it starts no thread of its own: it forks after this returns)."""
    tracemalloc.start(int(os.environ.get("SOAK_TRACE_FRAMES", FRAMES)))
    folder.mkdir(parents=True, exist_ok=True)
    if "--workers" in argv and int(argv[argv.index("--workers") + 1]) > 1:
        main_pid = os.getpid()

        def in_worker() -> None:
            if os.getppid() != main_pid:  # a grandchild (embedding worker): not traced here
                return
            tag = f"-w{os.getpid()}"
            threading.Thread(
                target=_watch, args=(folder, tag), daemon=True, name="soak-trace"
            ).start()

        os.register_at_fork(after_in_child=in_worker)
    else:
        threading.Thread(target=_watch, args=(folder,), daemon=True, name="soak-trace").start()
    from clawkb.cli.main import main

    sys.argv = ["clawkb", *argv]
    return int(main() or 0)


def request(
    folder: Path, name: str, timeout: float = 300.0, workers: int = 1
) -> dict[str, Any] | None:
    """Ask the traced server for snapshot ``name`` and wait for it; its /proc figures
    (``workers`` > 1: a dict of each worker's, by pid)."""
    (folder / f"take-{name}").touch()
    end = time.time() + timeout
    out = folder / f"proc-{name}.json"
    while time.time() < end:
        if workers > 1:
            got = sorted(folder.glob(f"proc-{name}-w*.json"))
            if len(got) >= workers:
                time.sleep(0.5)  # the last one's file is whole
                (folder / f"take-{name}").unlink()
                return {p.stem.rsplit("-w", 1)[1]: json.loads(p.read_text("utf-8")) for p in got}
        elif out.exists() and not (folder / f"take-{name}").exists():
            return json.loads(out.read_text("utf-8"))
        time.sleep(0.5)
    return None


def _short(frame: tracemalloc.Frame) -> str:
    name = frame.filename
    for marker in ("/site-packages/", "/src/", "/lib/python3"):
        if marker in name:
            name = name.split(marker, 1)[1]
            break
    return f"{name}:{frame.lineno}"


def diff(a: Path, b: Path, top: int = 25, frames: int = 6) -> str:
    """The top ``top`` growers from snapshot ``a`` to ``b`` by traceback, as Markdown."""
    ignore = [
        tracemalloc.Filter(False, tracemalloc.__file__),
        tracemalloc.Filter(False, "<frozen importlib._bootstrap>"),
        tracemalloc.Filter(False, "<frozen importlib._bootstrap_external>"),
        tracemalloc.Filter(False, __file__),
    ]
    sa = tracemalloc.Snapshot.load(str(a)).filter_traces(ignore)
    sb = tracemalloc.Snapshot.load(str(b)).filter_traces(ignore)
    stats = sb.compare_to(sa, "traceback")
    total_a = sum(s.size for s in sa.statistics("filename"))
    total_b = sum(s.size for s in sb.statistics("filename"))
    lines = [
        f"traced Python memory {total_a / 1048576:.2f} -> {total_b / 1048576:.2f} MB"
        f" ({(total_b - total_a) / 1048576:+.2f})",
        "",
        "| growth | blocks | where (innermost first) |",
        "|---|---|---|",
    ]
    for s in [s for s in stats if s.size_diff > 0][:top]:
        frames_in = list(s.traceback)  # oldest first
        inner = [f for f in reversed(frames_in) if "/clawkb/" in f.filename][:frames]
        shown = frames_in[-1:] + inner
        where = " <- ".join(dict.fromkeys(_short(f) for f in shown))
        lines.append(f"| {s.size_diff / 1024:+.1f} kB | {s.count_diff:+d} | {where} |")
    return "\n".join(lines)


def main() -> int:
    cmd = sys.argv[1]
    if cmd == "serve-traced":
        folder = Path(sys.argv[2])
        rest = sys.argv[3:]
        if rest and rest[0] == "--":
            rest = rest[1:]
        return serve_traced(folder, rest)
    if cmd == "diff":
        top = int(sys.argv[sys.argv.index("--top") + 1]) if "--top" in sys.argv else 25
        print(diff(Path(sys.argv[2]), Path(sys.argv[3]), top))
        for name in (sys.argv[2], sys.argv[3]):
            proc = (
                Path(name).with_name(Path(name).name.replace("snap-", "proc-")).with_suffix(".json")
            )
            if proc.exists():
                print(proc.name, proc.read_text("utf-8"))
        return 0
    raise SystemExit(f"unknown command {cmd!r}")


if __name__ == "__main__":
    sys.exit(main())
