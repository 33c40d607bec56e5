"""HNSW recall@10 vs exact search on the real e5-small vectors of the bench KBs.

    .venv/bin/python bench/ann_recall.py

Builds each KB's dense index with the ANN threshold forced below its size,
so the graph is built and its recall measured exactly as ``clawkb status``
reports it (200 of the KB's own vectors as queries). Also times one query
both ways. Needs bench/dense_build.py. Writes bench/results/ann-recall.json.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent
CACHE = ROOT / ".cache" / "dense"


def main() -> None:
    from clawkb.embed.vectors import stored_signature
    from clawkb.index.dense import DenseIndex
    from clawkb.kb import KnowledgeBase

    out = {}
    for home in sorted(CACHE.iterdir()):
        if not (home / "clawkb.sqlite").exists():
            continue
        kb = KnowledgeBase.open(home)
        sig = stored_signature(kb.conn)
        if sig is None:
            continue
        ann = DenseIndex(home / "index" / "dense-ann", kb.conn, sig, ann_threshold=1000)
        exact = DenseIndex(home / "index" / "dense", kb.conn, sig, ann_threshold=10**9)
        st = ann.status()
        exact.refresh()
        qs = np.asarray(exact.mat[:: max(1, len(exact.ids) // 200)][:200])
        timing = {}
        for label, index in (("hnsw", ann), ("exact", exact)):
            index.warm()
            t = time.perf_counter()
            for q in qs:
                index.search(q, 10)
            timing[label] = round((time.perf_counter() - t) / len(qs) * 1000, 3)
        out[home.name] = {"vectors": st["vectors"], "ann": st["ann"], "ms_per_query": timing}
        print(home.name, out[home.name], flush=True)
        kb.close()
    (ROOT / "results" / "ann-recall.json").write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
