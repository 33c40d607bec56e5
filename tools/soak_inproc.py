"""The server soak's memory, in one process and cheaper: the server's runtime without HTTP.

    .venv/bin/python tools/soak_inproc.py --seconds 240 --trace DIR
    .venv/bin/python bench/soak_trace.py diff DIR/snap-mid.pickle DIR/snap-end.pickle

Drives :class:`clawkb.server.runtime.Runtime` the way the HTTP routes do
(``/search``: ``kb.search`` + ``to_dict`` + JSON on a reader thread; ``/index``
and ``/memory``: writer jobs, then the embedding of what they added), with
``readers`` reader threads searching a stable file's unique word or a pair of
random words (distinct queries); every second the writer round of
``bench/soak.py`` (5 files rewritten, one deleted, one added, ``/index``, a
memory); every 30 s a terminal ``clawkb index``; ``clawkb embed`` a third of the
way in and ``clawkb reindex`` two thirds in (other processes, as in the soak).
Samples ``RssAnon`` every 5 s; with ``--trace`` runs under tracemalloc (25
frames) and writes snapshots + ``/proc`` figures at 120 s (or half-way) and at
the end (see bench/soak_trace.py).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
from pathlib import Path
from typing import Any

import bench_path  # noqa: F401  (bench/ on sys.path)
from soak import CLAWKB, WORDS, _make_kb, _rss_kb, per_round_kb, rss_slope, unique, write_file
from soak_trace import FRAMES, proc_figures


def _sqlite_used() -> Any:
    """SQLite's own heap in this process (page caches, statements), in MB (None if the
    library cannot be loaded: it is not Python memory, tracemalloc does not see it)."""
    import ctypes

    try:
        lib = ctypes.CDLL("libsqlite3.so.0")
    except OSError:
        return lambda: None
    lib.sqlite3_memory_used.restype = ctypes.c_int64
    return lambda: round(lib.sqlite3_memory_used() / 1048576, 2)


def _malloc_stats() -> Any:
    """glibc's heap figures (arenas, bytes held, bytes free) via this tree's
    ``clawkb/server/heap.py`` loaded by path, so an older tree's run has them too."""
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "src" / "clawkb" / "server" / "heap.py"
    spec = importlib.util.spec_from_file_location("_soak_heap", path)
    if spec is None or spec.loader is None:
        return lambda: None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)

    def read() -> Any:
        got = mod.stats()
        return (
            {k: round(v / 1048576, 2) if k != "arenas" else v for k, v in got.items()}
            if got
            else None
        )

    return read


def drive(
    seconds: float,
    readers: int,
    stable: int,
    churn: int,
    work: Path,
    trace: Path | None,
    trace_late: bool = False,
    trace_every: float = 0.0,
) -> dict[str, Any]:
    """``trace_late``: tracemalloc starts at the first snapshot (after warm-up), so the
    end snapshot holds exactly what was allocated since and is still alive."""
    from clawkb.embed.run import embed_new
    from clawkb.server import write_jobs
    from clawkb.server.runtime import Runtime
    from clawkb.server.writer_process import Remote, warm_dense

    corpus = work / "corpus"
    api_dir, term_dir = corpus / "api", corpus / "term"
    api_dir.mkdir(parents=True)
    term_dir.mkdir()
    rng = random.Random(7)
    split = stable * 2 // 3
    for i in range(stable + churn):
        write_file(api_dir if i < split or i >= stable else term_dir, i, 0, rng)
    home, dense = _make_kb(work, corpus)
    if trace is not None:
        trace.mkdir(parents=True, exist_ok=True)
        if not trace_late:
            tracemalloc.start(FRAMES)
    rt = Runtime(home)
    rt.warm()

    def embed_later(kb: Any) -> Any:  # server/api_write.py's _embed_later
        got = embed_new(kb)
        if got and got["embedded"]:
            warm_dense(kb)
            with rt.exclusive():
                pass
        return got

    start = time.time()
    until = start + seconds
    counts = {"searches": 0, "errors": 0, "rounds": 0, "cli_failed": 0}
    first_error: list[str] = []

    def reader(seed: int) -> None:
        r = random.Random(seed)
        while time.time() < until:
            if r.random() < 0.5:
                q = unique(r.randrange(stable))
            else:  # a query never asked before: new cache keys, new query vectors
                q = f"{r.choice(WORDS)} {r.choice(WORDS)} {r.choice(WORDS)}"

            def run(kb: Any, q: str = q) -> str:
                res = kb.search(q, limit=5)
                return json.dumps(res.to_dict(), ensure_ascii=False)

            try:
                rt.read_sync(run)
                counts["searches"] += 1
            except Exception as exc:
                counts["errors"] += 1
                first_error.append(f"{type(exc).__name__}: {exc}")
            time.sleep(0.005)

    def writer() -> None:
        wrng = random.Random(11)
        alive = list(range(stable, stable + churn))
        next_new = stable + churn
        while time.time() < until:
            counts["rounds"] += 1
            for i in wrng.sample(range(split), 5):
                write_file(api_dir, i, counts["rounds"], wrng)
            gone = alive.pop(wrng.randrange(len(alive)))
            (api_dir / f"f{gone:05d}.md").unlink()
            write_file(api_dir, next_new, 0, wrng)
            alive.append(next_new)
            next_new += 1
            try:  # as the API does: the write in the writer process, then its embedding here
                rt.submit(Remote(write_jobs.index_paths, [str(api_dir)]), "index").result()
                rt.submit(embed_later, "embed", gated=False)
                note = f"soak note {counts['rounds'] % 7}"
                job = Remote(write_jobs.memory_store, note, "default", ["soak"], None, None)
                rt.submit(job, "memory")
                rt.submit(embed_later, "embed", gated=False).result()
            except Exception as exc:
                counts["errors"] += 1
                first_error.append(f"write {type(exc).__name__}: {exc}")
            time.sleep(1.0)

    def cli(*args: str) -> None:
        out = subprocess.run([CLAWKB, "--kb", str(home), *args], capture_output=True, text=True)
        if out.returncode:
            counts["cli_failed"] += 1

    def terminal() -> None:
        trng = random.Random(13)
        version = 0
        while time.time() + 30 < until:
            time.sleep(30)
            version += 1
            for i in trng.sample(range(split, stable), 5):
                write_file(term_dir, i, version, trng)
            cli("index", str(term_dir))

    def jobs_once() -> None:
        time.sleep(max(0.0, start + seconds / 3 - time.time()))
        if dense:
            cli("embed")
        time.sleep(max(0.0, start + 2 * seconds / 3 - time.time()))
        cli("reindex")

    threads = [threading.Thread(target=reader, args=(k,)) for k in range(readers)]
    threads += [threading.Thread(target=fn) for fn in (writer, terminal, jobs_once)]
    for t in threads:
        t.start()
    anon: list[tuple[float, float]] = []
    sqlite_used = _sqlite_used()
    sqlite_mb: list[tuple[float, Any]] = []
    figures: dict[str, Any] = {}
    trace_at = 120.0 if seconds >= 240 else seconds / 2

    def snap(name: str) -> None:
        figures[name] = proc_figures()
        figures[name]["sqlite_mb"] = sqlite_used()
        if trace is not None and trace_late and not tracemalloc.is_tracing():
            tracemalloc.start(FRAMES)
        if trace is not None:
            tracemalloc.take_snapshot().dump(str(trace / f"snap-{name}.pickle"))
            figures[name]["traced_mb"] = round(tracemalloc.get_traced_memory()[0] / 1048576, 2)
            (trace / f"proc-{name}.json").write_text(json.dumps(figures[name]), "utf-8")

    malloc_stats = _malloc_stats()
    samples: list[dict[str, Any]] = []
    next_trace = trace_at
    while time.time() < until:
        now = time.time() - start
        if trace_every and trace is not None and now >= next_trace:
            snap(f"t{round(now):04d}")
            next_trace += trace_every
        elif "mid" not in figures and now >= trace_at:
            snap("mid")
        anon.append((now, _rss_kb(os.getpid(), "RssAnon") / 1024))
        sqlite_mb.append((round(now), sqlite_used()))
        samples.append(
            {
                "t": round(now),
                "rounds": counts["rounds"],
                "anon_mb": round(anon[-1][1], 1),
                "py_blocks": sys.getallocatedblocks(),
                "traced_mb": round(tracemalloc.get_traced_memory()[0] / 1048576, 2),
                "threads": threading.active_count(),
                "malloc": malloc_stats(),
            }
        )
        time.sleep(5)
    for t in threads:
        t.join()
    anon.append((time.time() - start, _rss_kb(os.getpid(), "RssAnon") / 1024))
    snap("end")
    import ctypes
    import gc

    heap = {"end": _rss_kb(os.getpid(), "RssAnon") / 1024}
    gc.collect()
    heap["after_gc"] = _rss_kb(os.getpid(), "RssAnon") / 1024
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    heap["after_trim"] = _rss_kb(os.getpid(), "RssAnon") / 1024
    rt.close()
    return {
        "seconds": seconds,
        "dense": dense,
        **counts,
        "first_error": first_error[:3],
        "anon_mb": [(round(t), round(mb, 1)) for t, mb in anon],
        "anon_slope_second_half_mb_min": rss_slope(anon, seconds / 2),
        "anon_slope_from_mid_mb_min": rss_slope(anon, trace_at),
        "sqlite_mb": sqlite_mb,
        "samples": samples,
        "heap_per_round_second_half_kb": per_round_kb(
            [(x["t"], x["anon_mb"], x["rounds"]) for x in samples], seconds / 2
        ),
        "malloc_policy": os.environ.get("CLAWKB_MALLOC", "on"),
        "proc": figures,
        "heap_end_mb": {k: round(v, 1) for k, v in heap.items()},
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=240)
    ap.add_argument("--readers", type=int, default=3)
    ap.add_argument("--stable", type=int, default=150)
    ap.add_argument("--churn", type=int, default=30)
    ap.add_argument("--trace", type=Path)
    ap.add_argument(
        "--trace-late", action="store_true", help="start tracemalloc at the first snapshot"
    )
    ap.add_argument(
        "--trace-every",
        type=float,
        default=0.0,
        help="with --trace: a snapshot every this many seconds from the first one",
    )
    ap.add_argument("--out", type=Path, help="write the figures as JSON here")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="clawkb-soak-") as tmp:
        r = drive(
            args.seconds,
            args.readers,
            args.stable,
            args.churn,
            Path(tmp),
            args.trace,
            args.trace_late,
            args.trace_every,
        )
    text = json.dumps(r, indent=1)
    if args.out:
        args.out.write_text(text, "utf-8")
    print(text)
    return 0 if not r["errors"] else 1


if __name__ == "__main__":
    sys.exit(main())
