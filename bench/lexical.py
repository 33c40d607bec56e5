"""Run ONE engine at ONE corpus size and print a JSON result.

Meant to run in its own process (``run_all.py`` starts one per engine and
size) so that peak RSS belongs to that engine alone.  Usage::

    python bench/lexical.py --engine bm25s --corpus bench/.cache/synth-20000-s13 --out r.json

The corpus folder holds ``docs.txt`` (one document per line) and
``queries.jsonl`` (written by ``run_all.py``).  BLAS/OpenMP thread pools are
pinned to one thread before numpy is imported, for every engine alike.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import json  # noqa: E402
import resource  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from collections import Counter  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))

import peers  # noqa: E402

WARMUP = 20


def log(msg: str) -> None:
    print(f"    [{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def rss_mb() -> float:
    with open("/proc/self/statm") as fh:
        pages = int(fh.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def children_peak_rss_mb() -> float:
    """Largest peak of clawkb's index workers (0 for the peers, which use none).

    Workers report their own VmHWM: the kernel's ru_maxrss for children would
    also count the parent memory a fork shares for an instant before exec.
    """
    if "clawkb.ingest.sync" not in sys.modules:
        return 0.0
    return sys.modules["clawkb.ingest.sync"].worker_peak_kb / 1024


def _vm_rss_kb(pid: str) -> int:
    try:
        with open(f"/proc/{pid}/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024
    except (OSError, ValueError, IndexError):
        return 0  # the process is gone


def _children() -> list[str]:
    out: list[str] = []
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/children") as fh:
                out += fh.read().split()
        except OSError:
            pass
    return out


class TreeSampler:
    """The largest sum of this process's and its live children's resident sizes,
    sampled every ``interval`` seconds while running (the build: clawkb's ingest
    and index workers live only then). A process's peak and its workers' peaks
    need not coincide: adding them overstates what the machine ever held."""

    def __init__(self, interval: float = 0.02) -> None:
        self.interval = interval
        self.peak_kb = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            total = _vm_rss_kb("self") + sum(_vm_rss_kb(pid) for pid in _children())
            self.peak_kb = max(self.peak_kb, total)
            self._stop.wait(self.interval)

    def __enter__(self) -> TreeSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def build_cpu_s() -> float:
    """CPU seconds so far of this process and of its children that have exited."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def load_corpus(folder: Path) -> tuple[list[str], list[dict[str, Any]]]:
    # Line by line: reading the whole file first held it three times over (bytes,
    # str, list) and that load spike, not the engine, was every engine's peak
    # RSS at 1M docs.
    with open(folder / "docs.txt", encoding="utf-8") as fh:
        texts = [line[:-1] if line.endswith("\n") else line for line in fh]
    with open(folder / "queries.jsonl", encoding="utf-8") as fh:
        queries = [json.loads(line) for line in fh if line.strip()]
    return texts, queries


def percentile(sorted_ms: list[float], pct: float) -> float:
    idx = min(len(sorted_ms) - 1, max(0, round(pct / 100 * (len(sorted_ms) - 1))))
    return sorted_ms[idx]


def time_queries(fn: Callable[[str, int], Any], qs: list[str], k: int) -> tuple[dict, list]:
    """Warm up, then time each query alone; returns latency stats and raw results."""
    for q in qs[-WARMUP:]:
        fn(q, k)
    timed = qs[:-WARMUP] if len(qs) > WARMUP * 2 else qs
    lat: list[float] = []
    raws = []
    total0 = time.perf_counter()
    cpu0 = time.process_time()
    for q in timed:
        t0 = time.perf_counter_ns()
        raws.append(fn(q, k))
        lat.append((time.perf_counter_ns() - t0) / 1e6)
    total = time.perf_counter() - total0
    cpu = time.process_time() - cpu0
    lat.sort()
    stats = {
        "n": len(lat),
        "p50_ms": percentile(lat, 50),
        "p95_ms": percentile(lat, 95),
        "p99_ms": percentile(lat, 99),
        "mean_ms": sum(lat) / len(lat),
        "qps": len(lat) / total,
        # CPU seconds of this process: steadier than wall time on a shared machine
        "cpu_ms": cpu / len(lat) * 1e3,
        "cpu_qps": len(lat) / cpu if cpu else None,
    }
    return stats, raws


def self_hits(found: list[list[int]], queries: list[dict[str, Any]]) -> dict[str, float]:
    """Share of queries whose source document is in the top k, overall and per language."""
    hit: Counter[str] = Counter()
    tot: Counter[str] = Counter()
    rr = 0.0
    for ids, q in zip(found, queries, strict=False):
        tot[q["lang"]] += 1
        if q["doc"] in ids:
            hit[q["lang"]] += 1
            rr += 1 / (ids.index(q["doc"]) + 1)
    n = sum(tot.values())
    out = {"all": sum(hit.values()) / n, "mrr": rr / n}
    out.update({lang: hit[lang] / tot[lang] for lang in sorted(tot)})
    return out


COLD_RUNS = 3


def cold_start(engine_name: str, where: str, qtexts: list[str], k: int) -> dict[str, Any]:
    """Open the saved index and answer one query in a fresh process, ``COLD_RUNS`` times.

    ``wall_s`` is the whole child process (interpreter start, imports, open,
    one query, exit) as the parent sees it; ``open_query_ms`` is the part
    inside the child from importing the engine to having the top-k.  The
    index files are in the page cache (the build just wrote them): this is a
    fresh process, not a cold disk.  Medians over the runs.
    """
    walls, inner = [], []
    for q in qtexts[:COLD_RUNS]:
        cmd = [sys.executable, __file__, "--engine", engine_name, "--cold", where]
        cmd += ["--query", q, "--k", str(k)]
        t0 = time.perf_counter()
        out = subprocess.run(cmd, capture_output=True, text=True, check=False)
        walls.append(time.perf_counter() - t0)
        if out.returncode != 0:
            return {"error": out.stderr.strip().splitlines()[-1:] or [f"exit {out.returncode}"]}
        inner.append(json.loads(out.stdout)["open_query_ms"])
    walls.sort()
    inner.sort()
    return {"wall_s": walls[len(walls) // 2], "open_query_ms": inner[len(inner) // 2]}


def cold_child(engine_name: str, where: str, q: str, k: int) -> dict[str, Any]:
    """The child side of :func:`cold_start`: open, answer ``q``, report."""
    t0 = time.perf_counter()
    engine = peers.ENGINES[engine_name].open_saved(where)
    ids = engine.resolve(engine.query_raw(q, k))
    return {"open_query_ms": (time.perf_counter() - t0) * 1e3, "ids": ids}


def run(engine_name: str, folder: Path, k: int) -> dict[str, Any]:
    texts, queries = load_corpus(folder)
    qtexts = [q["text"] for q in queries]
    log(f"{engine_name}: loaded {len(texts):,} docs, {len(queries)} queries")
    engine = peers.make(engine_name)
    rss_base = rss_mb()
    t0 = time.perf_counter()
    cpu0 = build_cpu_s()
    with TreeSampler() as tree:
        engine.build(texts)
    build_s = time.perf_counter() - t0
    build_cpu = build_cpu_s() - cpu0
    log(f"{engine_name}: built in {build_s:.1f} s")
    rss_built = rss_mb()
    stats, raws = time_queries(engine.query_raw, qtexts, k)
    log(f"{engine_name}: p50 {stats['p50_ms']:.3f} ms  p95 {stats['p95_ms']:.3f} ms")
    timed_queries = queries[: stats["n"]]
    found = [engine.resolve(r) for r in raws]
    bad = sum(1 for ids in found for i in ids if not 0 <= i < len(texts))
    result: dict[str, Any] = {
        "engine": engine_name,
        "n_docs": len(texts),
        "k": k,
        "build_s": build_s,
        # every thread of this process plus the worker processes it waited for
        # (clawkb's index and ingest workers): steadier than wall on a busy machine
        "build_cpu_s": build_cpu,
        "docs_per_s": len(texts) / build_s if build_s else None,
        "query": stats,
        "self_hit_at_k": self_hits(found, timed_queries),
        "ids_out_of_range": bad,
        "empty_results": sum(1 for ids in found if not ids),
    }
    if isinstance(engine, peers.ClawkbEngine):
        full, full_raw = time_queries(engine.search_full, qtexts, k)
        result["full_search"] = full
        result["full_search"]["self_hit_at_k"] = self_hits(full_raw, timed_queries)
        log(f"{engine_name}: full search p50 {full['p50_ms']:.3f} ms")
    result["index_bytes"] = engine.index_bytes()
    if isinstance(engine, peers.ClawkbEngine):
        result["lexical_index_bytes"] = engine.lexical_index_bytes()
    saved = tempfile.mkdtemp(prefix="bench-saved-")
    try:
        result["cold_start"] = cold_start(engine_name, engine.save(saved), qtexts, k)
        log(f"{engine_name}: cold start {result['cold_start']}")
    finally:
        shutil.rmtree(saved, ignore_errors=True)
    result["settings"] = engine.settings()
    result["rss_baseline_mb"] = rss_base
    result["rss_after_build_mb"] = rss_built
    # Worker processes count too: the kernel reports only the largest child's
    # peak, so charge it once per worker that may have run at the same time
    # (an upper bound, never flattering to clawkb).
    workers = int(engine.settings().get("index_workers", 0) or 0)
    result["rss_children_peak_mb"] = children_peak_rss_mb()
    result["rss_peak_mb"] = peak_rss_mb() + workers * result["rss_children_peak_mb"]
    # What the engine's processes held at once: the build sampled as a process tree,
    # then this process alone (queries run in it; any workers have exited by then).
    result["rss_tree_peak_mb"] = max(tree.peak_kb / 1024, peak_rss_mb())
    result["rss_delta_mb"] = result["rss_peak_mb"] - rss_base
    engine.close()
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--engine", required=True, choices=sorted(peers.ENGINES))
    ap.add_argument("--corpus", type=Path, help="folder with docs.txt, queries.jsonl")
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--out", type=Path, help="write JSON here (default: stdout)")
    ap.add_argument("--cold", metavar="INDEX", help="open a saved index, answer --query, exit")
    ap.add_argument("--query", default="", help="the query of --cold")
    args = ap.parse_args(argv)
    if args.cold:
        print(json.dumps(cold_child(args.engine, args.cold, args.query, args.k)))
        return 0
    if args.corpus is None:
        ap.error("--corpus is required")
    result = run(args.engine, args.corpus, args.k)
    text = json.dumps(result, indent=2, ensure_ascii=False)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
