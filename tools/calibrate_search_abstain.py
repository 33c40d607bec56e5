"""Calibrate `clawkb search`'s abstain threshold (hybrid mode, e5-small).

    OMP_NUM_THREADS=1 .venv/bin/python tools/calibrate_search_abstain.py [--queries 150]

Answerable: a dataset's own judged queries on its KB. Unanswerable: another
dataset's queries in the same language on that KB (cranfield <-> msmarco,
cmrc2018 <-> qbqtc), which have no relevant passage there. For every query
the pipeline's confidence is recorded; the report gives, per threshold, the
share of answerable queries answered and of unanswerable ones abstained, and
the threshold with the best balanced accuracy. Needs bench/dense_build.py.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import numpy as np

import bench_path  # noqa: F401  (bench/ helpers below)
from shared_data import add_datasets_flag, datasets_dir

os.environ.setdefault("OMP_NUM_THREADS", "1")
ROOT = Path(__file__).resolve().parents[1] / "bench"
DATA = datasets_dir()
CACHE = ROOT / ".cache" / "dense"
PAIRS = {
    "cranfield": "agentset-msmarco",
    "agentset-msmarco": "cranfield",
    "cmrc2018-dev": "qbqtc-dev",
    "qbqtc-dev": "cmrc2018-dev",
}


def confidences(kb, queries: list[str]) -> list[float]:
    return [kb.search(q, mode="hybrid", limit=10, early_return=0).confidence for q in queries]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--queries", type=int, default=150)
    add_datasets_flag(ap)
    args = ap.parse_args()
    global DATA
    DATA = datasets_dir(args.datasets)
    from clawkb.embed.e5 import E5Small
    from clawkb.evaluate.beir import load_beir
    from clawkb.kb import KnowledgeBase
    from clawkb.retrieve.pipeline import retriever_for

    emb = E5Small()
    ans, una = [], []
    for name, other in PAIRS.items():
        kb = KnowledgeBase.open(CACHE / name)
        retriever_for(kb).set_embedder(emb)
        own = [q.text for q in load_beir(DATA / name).queries[: args.queries]]
        foreign = [q.text for q in load_beir(DATA / other).queries[: args.queries]]
        ans += confidences(kb, own)
        una += confidences(kb, foreign)
        kb.close()
    a, u = np.array(ans), np.array(una)
    rows = []
    for t in np.round(np.arange(0.05, 1.0, 0.05), 2):
        rows.append(
            {
                "threshold": float(t),
                "answered": float((a >= t).mean()),
                "abstained_unanswerable": float((u < t).mean()),
                "balanced": float(((a >= t).mean() + (u < t).mean()) / 2),
            }
        )
    best = max(rows, key=lambda r: r["balanced"])
    out = {"answerable": len(a), "unanswerable": len(u), "best": best, "curve": rows}
    (ROOT / "results" / "search-abstain.json").write_text(json.dumps(out, indent=2) + "\n")
    print(
        json.dumps(
            {
                "best": best,
                "answerable_p10": float(np.percentile(a, 10)),
                "unanswerable_p50": float(np.percentile(u, 50)),
            },
            indent=2,
        )
    )
    for r in rows:
        print(r)


if __name__ == "__main__":
    main()
