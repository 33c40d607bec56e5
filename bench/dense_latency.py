"""Hybrid query latency at 100k chunks (query embedding included) vs the lexical path.

    OMP_NUM_THREADS=1 .venv/bin/python bench/dense_latency.py [--docs 100000] [--queries 300]

Lexical side: ``bench/synth.py``'s bilingual synthetic corpus, one KB in
``bench/.cache/dense-latency-<n>/``. Dense side: embedding 100k chunks with
e5-small takes hours on two cores, so the stored vectors are real e5-small
vectors of the MS MARCO KB (``bench/dense_build.py``) each perturbed with
Gaussian noise and renormalised, under the real e5-small signature: the
search work (matrix size, HNSW graph) is the real one, and every query is
embedded by the real model inside the timed ``kb.search`` call. Reported: p50
/ p95 for lexical (plain path), hybrid with exact search, hybrid with HNSW,
and HNSW recall@10 vs exact on these vectors.
"""

from __future__ import annotations

import argparse
import json
import os
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


def timed(kb, queries: list[str], **kw) -> list[float]:
    out = []
    for q in queries:
        t = time.perf_counter()
        kb.search(q, limit=10, **kw)
        out.append((time.perf_counter() - t) * 1000)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=300)
    args = ap.parse_args()
    from clawkb.embed.run import dense_status
    from clawkb.kb import KnowledgeBase
    from synth import generate

    home = build(args.docs)
    _, qs = generate(args.docs, args.queries)
    queries = [q.text for q in qs]
    results = {}
    for label, threshold in (("exact", 10**9), ("hnsw", 50_000)):
        (home / "config.yaml").write_text(
            f"retrieval:\n  ann_threshold: {threshold}\n  cache_size: 0\n"
        )
        kb = KnowledgeBase.open(home)
        kb.search("warm up", mode="hybrid")  # model load + index load outside the timing
        kb.search("warm up two", mode="lexical")
        lat = timed(kb, queries, mode="hybrid")
        results[f"hybrid_{label}"] = {
            "p50_ms": round(median(lat), 2),
            "p95_ms": round(float(np.percentile(lat, 95)), 2),
        }
        if label == "hnsw":
            results["dense_status"] = dense_status(kb)
        lat = timed(kb, queries, mode="lexical")
        results[f"lexical_{label}_run"] = {
            "p50_ms": round(median(lat), 2),
            "p95_ms": round(float(np.percentile(lat, 95)), 2),
        }
        kb.close()
    emb_kb = KnowledgeBase.open(home)
    from clawkb.retrieve.pipeline import retriever_for

    emb = retriever_for(emb_kb).embedder
    lat = []
    for q in queries:
        t = time.perf_counter()
        emb.embed_query(q)
        lat.append((time.perf_counter() - t) * 1000)
    results["query_embedding"] = {"p50_ms": round(median(lat), 2)}
    emb_kb.close()
    results["docs"] = args.docs
    results["queries"] = len(queries)
    (ROOT / "results" / "dense-latency.json").write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
