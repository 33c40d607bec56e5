"""Hybrid query latency at 100k chunks (query embedding included) vs the lexical path.

    OMP_NUM_THREADS=1 .venv/bin/python bench/dense_latency.py [--docs 100000] [--queries 300]
        [--modes exact,hnsw] [--old-src DIR --rounds 2]

Lexical side: ``bench/synth.py``'s bilingual synthetic corpus, one KB in
``bench/.cache/dense-latency-<n>/``. Dense side: embedding 100k chunks with
e5-small takes hours on two cores, so the stored vectors are real e5-small
vectors of the MS MARCO KB (``bench/dense_build.py``) each perturbed with
Gaussian noise and renormalised, under the real e5-small signature: the
search work (matrix size, HNSW graph) is the real one, and every query is
embedded by the real model inside the timed ``kb.search`` call. Reported: p50
/ p95 for lexical (plain path), hybrid with exact search, hybrid with HNSW,
and HNSW recall@10 vs exact on these vectors, with the median CPU ms per
search. ``--old-src DIR`` (an older commit's ``src``, native modules built)
runs this tree and that one in turn in fresh processes, ``--rounds`` times
each, and writes the medians side by side to
``bench/results/dense-latency-compare.json``. Switching between exact and
HNSW rebuilds the graph (minutes at 100k): ``--modes hnsw`` keeps it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from statistics import median

import numpy as np

os.environ.setdefault("OMP_NUM_THREADS", "1")
ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))


def build(n: int) -> Path:
    from clawkb.embed.e5 import E5Small
    from clawkb.embed.vectors import SIGNATURE_KEY, model_key
    from clawkb.kb import KnowledgeBase, TextRecord
    from clawkb.store import db
    from synth import generate

    home = ROOT / ".cache" / f"dense-latency-{n}"
    kb = KnowledgeBase.open(home, create=True)
    if kb.status()["chunks"] == 0:
        texts, _ = generate(n, 10)
        kb.index_texts(TextRecord(path=f"d{i}", text=t) for i, t in enumerate(texts))
    sig = E5Small.signature(E5Small.__new__(E5Small))
    mkey = model_key(sig)
    have = kb.conn.execute("SELECT COUNT(*) FROM chunk_vectors").fetchone()[0]
    ids = [r[0] for r in kb.conn.execute("SELECT id FROM chunks ORDER BY id")]
    if have < len(ids):
        src = KnowledgeBase.open(ROOT / ".cache" / "dense" / "agentset-msmarco")
        real = np.stack(
            [np.frombuffer(v, "<f4") for (v,) in src.conn.execute("SELECT vec FROM vectors")]
        )
        src.close()
        rng = np.random.default_rng(7)
        kb.conn.execute("BEGIN")
        for start in range(0, len(ids), 5000):
            part = ids[start : start + 5000]
            base = real[rng.integers(0, len(real), len(part))]
            vecs = base + rng.normal(0, 0.02, base.shape).astype(np.float32)
            vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
            kb.conn.executemany(
                "INSERT OR REPLACE INTO vectors (model, key, vec) VALUES (?,?,?)",
                (
                    (mkey, f"k{c}", v.astype("<f4").tobytes())
                    for c, v in zip(part, vecs, strict=True)
                ),
            )
            kb.conn.executemany(
                "INSERT OR REPLACE INTO chunk_vectors (model, chunk_id, key) VALUES (?,?,?)",
                ((mkey, c, f"k{c}") for c in part),
            )
        db.set_meta(kb.conn, SIGNATURE_KEY, json.dumps(sig, sort_keys=True))
        db.set_meta(kb.conn, "dense_version", str(int(time.time())))
        kb.conn.execute("COMMIT")
    kb.close()
    return home


CPU_MS: list[float] = []  # CPU ms of every timed search of the last ``timed`` call


def timed(kb, queries: list[str], **kw) -> list[float]:
    out = []
    CPU_MS.clear()
    for q in queries:
        t, c = time.perf_counter(), time.process_time()
        kb.search(q, limit=10, **kw)
        out.append((time.perf_counter() - t) * 1000)
        CPU_MS.append((time.process_time() - c) * 1000)
    return out


def summary(lat: list[float]) -> dict[str, float]:
    return {
        "p50_ms": round(median(lat), 2),
        "p95_ms": round(float(np.percentile(lat, 95)), 2),
        "cpu_p50_ms": round(median(CPU_MS), 2),
        "cpu_mean_ms": round(sum(CPU_MS) / len(CPU_MS), 2),
    }


def compare(args: argparse.Namespace) -> None:
    """This tree and ``--old-src`` in turn, ``--rounds`` times each, in fresh processes."""
    runs: dict[str, list[dict]] = {"new": [], "old": []}
    trees = {"new": str(ROOT.parent / "src"), "old": str(args.old_src)}
    for _ in range(args.rounds):
        for label, src in trees.items():
            env = dict(os.environ, PYTHONPATH=src)
            cmd = [sys.executable, __file__, "--docs", str(args.docs)]
            cmd += ["--queries", str(args.queries), "--modes", args.modes, "--no-write"]
            out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True)
            runs[label].append(json.loads(out.stdout))
    table = {}
    for label, rs in runs.items():
        table[label] = {
            key: {
                m: round(median(r[key][m] for r in rs), 2)
                for m in rs[0][key]
                if isinstance(rs[0][key][m], (int, float))
            }
            for key in rs[0]
            if isinstance(rs[0][key], dict) and key != "dense_status"
        }
    out = {"docs": args.docs, "queries": args.queries, "rounds": args.rounds}
    out |= {"loadavg_1m": os.getloadavg()[0], "old_src": Path(args.old_src).name, **table}
    (ROOT / "results" / "dense-latency-compare.json").write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--old-src", type=Path, help="also time this source tree, in turn")
    ap.add_argument("--rounds", type=int, default=2, help="with --old-src: runs per tree")
    ap.add_argument("--modes", default="exact,hnsw", help="vector search kinds to time")
    ap.add_argument("--no-write", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.old_src:
        compare(args)
        return
    from clawkb.embed.run import dense_status
    from clawkb.kb import KnowledgeBase
    from synth import generate

    home = build(args.docs)
    _, qs = generate(args.docs, args.queries)
    queries = [q.text for q in qs]
    results = {}
    modes = {"exact": 10**9, "hnsw": 50_000}
    for label, threshold in ((m, modes[m]) for m in args.modes.split(",")):
        (home / "config.yaml").write_text(
            f"retrieval:\n  ann_threshold: {threshold}\n  cache_size: 0\n"
        )
        kb = KnowledgeBase.open(home)
        kb.search("warm up", mode="hybrid")  # model load + index load outside the timing
        kb.search("warm up two", mode="lexical")
        results[f"hybrid_{label}"] = summary(timed(kb, queries, mode="hybrid"))
        if label == "hnsw":
            results["dense_status"] = dense_status(kb)
        results[f"lexical_{label}_run"] = summary(timed(kb, queries, mode="lexical"))
        kb.close()
    emb_kb = KnowledgeBase.open(home)
    from clawkb.retrieve.pipeline import retriever_for

    emb = retriever_for(emb_kb).embedder
    lat = []
    CPU_MS.clear()
    for q in queries:
        t, c = time.perf_counter(), time.process_time()
        emb.embed_query(q)
        lat.append((time.perf_counter() - t) * 1000)
        CPU_MS.append((time.process_time() - c) * 1000)
    results["query_embedding"] = summary(lat)
    emb_kb.close()
    results["docs"] = args.docs
    results["queries"] = len(queries)
    if not args.no_write:
        (ROOT / "results" / "dense-latency.json").write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
