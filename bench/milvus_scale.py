"""Ingest and query speed of the Milvus backend (Milvus Lite) next to the local backend.

One synthetic bilingual corpus (bench/synth.py) of N chunks, indexed once
into a local KB (store + BM25F segments: the local ingest), then synced into
Milvus Lite (surrogate terms + rows + flush: the Milvus stage). Queries:
lexical top-10 on both, p50/p95 over the same query sample. Also the Lite
data folder size and this process's RSS growth, for docs/scale.md.

    python bench/milvus_scale.py --docs 100000 [--queries 200] [--dense]

``--dense`` adds vectors from the ``static`` embedder (cheap; e5-small at
100k chunks takes hours on 2 cores). Results: bench/results/milvus-scale.json.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

from clawkb.backends.milvus_kb import kb_backend, kb_search, sync_kb  # noqa: E402
from clawkb.backends.milvus_schema import client, close_client  # noqa: E402
from clawkb.kb import KnowledgeBase, TextRecord  # noqa: E402
from clawkb.retrieve.query import Query  # noqa: E402
from clawkb.retrieve.source import LocalSource  # noqa: E402
from synth import generate  # noqa: E402

RESULTS = ROOT / "bench" / "results"


def _dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def _row_shape(kb: KnowledgeBase, sample: int = 2000) -> dict[str, float]:
    """Average bytes of text, surrogate terms and distinct terms per chunk (a sample)."""
    from clawkb.backends.milvus_rows import build_rows

    ids = kb.repo.all_chunk_ids()[:: max(1, kb.repo.counts()["chunks"] // sample)][:sample]
    rows = build_rows(kb.conn, "x", ids, None)
    n = max(1, len(rows))
    return {
        "avg_text_bytes": round(sum(len(r["text"].encode()) for r in rows) / n, 1),
        "avg_terms_bytes": round(sum(len(r["terms"]) for r in rows) / n, 1),
        "avg_tokens": round(sum(len(r["terms"].split()) for r in rows) / n, 1),
        "avg_distinct_tokens": round(sum(len(set(r["terms"].split())) for r in rows) / n, 1),
    }


def _queries(kb: KnowledgeBase, s: object, queries: list, mode: str) -> dict[str, float]:
    """p50/p95 and found@10 of one mode: the local pipeline next to Milvus (the same
    stages, client-side fusion)."""
    local_ms, milvus_ms, found_local, found_milvus = [], [], 0, 0
    for q in queries:
        a = time.perf_counter()
        lo = kb.run_prepared(Query.make(q.text, limit=10, mode=mode), source=LocalSource(kb))
        b = time.perf_counter()
        mi = kb_search(kb, s, q.text, limit=10, mode=mode)  # type: ignore[arg-type]
        c = time.perf_counter()
        local_ms.append((b - a) * 1000)
        milvus_ms.append((c - b) * 1000)
        want = f"doc{q.doc:07d}"
        found_local += any(h.anchor.path == want for h in lo.hits)
        found_milvus += any(h.anchor.path == want for h in mi.hits)
    return {
        "local_p50_ms": round(statistics.median(local_ms), 3),
        "local_p95_ms": round(_pct(local_ms, 0.95), 3),
        "milvus_p50_ms": round(statistics.median(milvus_ms), 3),
        "milvus_p95_ms": round(_pct(milvus_ms, 0.95), 3),
        "local_found_at10": round(found_local / len(queries), 3),
        "milvus_found_at10": round(found_milvus / len(queries), 3),
    }


class _PeakRss:
    """Samples this process's RSS every 0.2 s while active (Milvus Lite runs in-process)."""

    def __init__(self, proc: psutil.Process) -> None:
        self.proc, self.peak, self._stop = proc, proc.memory_info().rss, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            self.peak = max(self.peak, self.proc.memory_info().rss)

    def __enter__(self) -> _PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self.proc.memory_info().rss)


def run(n_docs: int, n_queries: int, dense: bool, uri: str | None = None) -> dict[str, object]:
    texts, queries = generate(n_docs, n_queries=n_queries)
    proc = psutil.Process()
    with tempfile.TemporaryDirectory(prefix="clawkb-milvus-scale-") as tmp:
        home = Path(tmp) / "kb"
        home.mkdir()
        conf: dict[str, object] = {
            "backend": {
                "kind": "milvus",
                "uri": uri or str(Path(tmp) / "lite.db"),
                "collection": "scale",
                "dense": dense,
                "auto_sync": False,
                "batch": 2000,
            }
        }
        if dense:
            conf["embedding"] = "static"
        (home / "config.yaml").write_text(yaml.safe_dump(conf))
        kb = KnowledgeBase.open(home, create=True)
        t0 = time.perf_counter()
        kb.index_texts(TextRecord(path=f"doc{i:07d}", text=t) for i, t in enumerate(texts))
        if dense:  # vectors are computed once, locally: part of the ingest, not the sync
            from clawkb.embed.run import kb_embedder
            from clawkb.embed.vectors import embed_pending

            embed_pending(kb.conn, kb_embedder(kb))
        local_s = time.perf_counter() - t0
        chunks = kb.repo.counts()["chunks"]
        rss0 = proc.memory_info().rss
        t1 = time.perf_counter()
        with _PeakRss(proc) as sync_peak:
            rep = sync_kb(kb)
        milvus_s = time.perf_counter() - t1
        rss1 = proc.memory_info().rss
        s = kb_backend(kb)
        assert s is not None
        modes = ("lexical", "dense", "hybrid") if dense else ("lexical",)
        with _PeakRss(proc) as query_peak:  # Lite builds its search structures on first use
            per_mode = {m: _queries(kb, s, queries, m) for m in modes}
        shape = _row_shape(kb)
        stats = client(s).get_collection_stats(s.collection)
        if uri:
            client(s).drop_collection(s.collection)
        close_client(s)
        lite_bytes = 0 if uri else _dir_bytes(Path(tmp) / "lite.db")
        store_bytes = sum(p.stat().st_size for p in home.glob("clawkb.sqlite*"))
        lexical_bytes = _dir_bytes(home / "index" / "lexical")
        kb.close()
        shutil.rmtree(home, ignore_errors=True)
    return {
        "docs": n_docs,
        "chunks": chunks,
        "dense": dense,
        "milvus_rows": int(stats.get("row_count", 0)),
        "local_ingest_s": round(local_s, 2),
        "local_chunks_per_s": round(chunks / local_s, 1),
        "milvus_sync_s": round(milvus_s, 2),
        "milvus_sync_chunks_per_s": round(chunks / milvus_s, 1),
        "embedded": rep.embedded,
        "queries": len(queries),
        **per_mode["lexical"],
        "modes": per_mode,
        "lite_disk_bytes": lite_bytes,
        "store_bytes": store_bytes,
        "lexical_index_bytes": lexical_bytes,
        "rss_growth_during_sync_bytes": rss1 - rss0,
        "rss_after_bytes": rss1,
        "machine": f"load {os.getloadavg()[0]:.1f} at the end",
        "sync_peak_rss_bytes": sync_peak.peak,
        "query_peak_rss_bytes": query_peak.peak,
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        **shape,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--dense", action="store_true", help="Vectors too; p50 of every mode.")
    ap.add_argument("--uri", help="A Milvus server (http://host:19530) instead of a Lite file.")
    ap.add_argument("--out", type=Path, help="write the row here instead of milvus-scale.json")
    args = ap.parse_args()
    row = run(args.docs, args.queries, args.dense, args.uri)
    print(json.dumps(row, indent=2))
    if args.out:
        args.out.write_text(json.dumps(row, indent=2) + "\n")
        return
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / "milvus-scale.json"
    rows = json.loads(path.read_text()) if path.exists() else []
    rows = [r for r in rows if (r["docs"], r["dense"]) != (row["docs"], row["dense"])] + [row]
    path.write_text(json.dumps(rows, indent=2) + "\n")
    from milvus_parity import write_latest

    write_latest()


if __name__ == "__main__":
    main()
