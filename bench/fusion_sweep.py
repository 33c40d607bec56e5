"""Sweep fusion settings on the shared datasets; pick the defaults; calibrate early return.

    OMP_NUM_THREADS=1 .venv/bin/python bench/fusion_sweep.py [--queries N] [NAME ...]

Needs the KBs built by ``bench/dense_build.py``. Per query the lexical and
dense candidate lists (top 100 chunks each) are computed once; every fusion
setting is then a pure function of them (:mod:`clawkb.retrieve.fusion`),
scored at document level (a document ranks at its best chunk) with nDCG@10.
Writes ``bench/results/fusion-sweep.json`` and ``fusion-sweep.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import time
from pathlib import Path
from statistics import mean, median
from typing import Any

import numpy as np

from shared_data import add_datasets_flag, datasets_dir

os.environ.setdefault("OMP_NUM_THREADS", "1")
ROOT = Path(__file__).resolve().parent
DATA = datasets_dir()
CACHE = ROOT / ".cache" / "dense"
NAMES = ("cranfield", "agentset-msmarco", "cmrc2018-dev", "qbqtc-dev")
DEPTH = 100


def configs() -> list[tuple[str, dict[str, Any]]]:
    out: list[tuple[str, dict[str, Any]]] = [("lexical", {}), ("dense", {})]
    for k in (20, 60):
        for wd in (0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 3.0):
            out.append((f"rrf k={k} w_dense={wd}", {"fusion": "rrf", "rrf_k": k, "w_dense": wd}))
    for norm in ("minmax", "zscore"):
        for wd in (0.5, 1.0, 1.5, 2.0, 3.0, 4.0):
            out.append(
                (f"linear {norm} β/α={wd}", {"fusion": "linear", "norm": norm, "w_dense": wd})
            )
    return out


def fuse(name: str, cfg: dict[str, Any], lex: Any, dense: Any) -> list[int]:
    from clawkb.retrieve import fusion

    if name == "lexical":
        return lex.ids.tolist()
    if name == "dense":
        return dense.ids.tolist()
    chans = {"lexical": lex, "dense": dense}
    weights = {"lexical": 1.0, "dense": cfg["w_dense"]}
    if cfg["fusion"] == "rrf":
        fused = fusion.rrf(chans, weights, cfg["rrf_k"])
    else:
        fused = fusion.linear(chans, weights, cfg["norm"])
    return [f.chunk_id for f in fused]


def doc_ranking(chunk_ids: list[int], paths: dict[int, str], depth: int = 10) -> list[str]:
    return list(dict.fromkeys(paths[c] for c in chunk_ids if c in paths))[:depth]


def sweep(name: str, n_queries: int | None) -> dict[str, Any]:
    from clawkb.embed.e5 import E5Small
    from clawkb.evaluate.beir import load_beir
    from clawkb.evaluate.metrics import score_query
    from clawkb.kb import KnowledgeBase
    from clawkb.retrieve.fusion import Channel
    from clawkb.retrieve.pipeline import retriever_for
    from clawkb.text import tokenize

    ds = load_beir(DATA / name)
    queries = ds.queries[:n_queries] if n_queries else ds.queries
    kb = KnowledgeBase.open(CACHE / name)
    kb.search("warm up", mode="lexical")  # lets the lexical index catch up with the store
    emb = E5Small()
    r = retriever_for(kb)
    r.set_embedder(emb)
    index = r.dense_index()
    paths = dict(
        kb.conn.execute("SELECT c.id, d.path FROM chunks c JOIN documents d ON d.id = c.doc_id")
    )
    chans = []
    embed_ms = []
    cache = CACHE / name / f"channels-{len(queries)}.pkl"
    if cache.exists():  # the candidate lists depend only on the KB and the queries
        chans, embed_ms = pickle.loads(cache.read_bytes())
    for q in queries[len(chans) :]:
        ids, scores, _ = kb.lexical.search(tokenize(q.text), k=DEPTH)
        t = time.perf_counter()
        qv = emb.embed_query(q.text)
        embed_ms.append((time.perf_counter() - t) * 1000)
        dids, dscores = index.search(qv, DEPTH)
        chans.append((Channel(ids, scores), Channel(dids, dscores)))
    cache.write_bytes(pickle.dumps((chans, embed_ms)))
    table: dict[str, float] = {}
    for label, cfg in configs():
        vals = [
            score_query(doc_ranking(fuse(label, cfg, lex, dense), paths), q.qrels, (10,))["ndcg@10"]
            for q, (lex, dense) in zip(queries, chans, strict=True)
        ]
        table[label] = round(mean(vals), 4)
    early = early_return_curve(queries, chans, paths)
    cos = cosine_calibration(queries, chans, paths)
    kb.close()
    return {
        "dataset": name,
        "queries": len(queries),
        "ndcg@10": table,
        "query_embed_ms_p50": round(median(embed_ms), 2),
        "early_return": early,
        "top1_cosine": cos,
    }


def early_return_curve(queries: Any, chans: Any, paths: dict[int, str]) -> list[dict[str, float]]:
    """Default fusion with early return at margin t: nDCG@10 and share of queries returned early."""
    from clawkb.evaluate.metrics import score_query

    out = []
    for t in (0.0, 0.2, 0.3, 0.4, 0.5, 0.6, 0.8):
        vals, early = [], 0
        for q, (lex, dense) in zip(queries, chans, strict=True):
            s = lex.scores
            decisive = (
                t > 0
                and len(s) > 0
                and s[0] > 0
                and (s[0] - (s[1] if len(s) > 1 else 0)) / s[0] >= t
            )
            ids = lex.ids.tolist() if decisive else fuse("d", DEFAULT, lex, dense)
            early += decisive
            vals.append(score_query(doc_ranking(ids, paths), q.qrels, (10,))["ndcg@10"])
        out.append(
            {
                "margin": t,
                "ndcg@10": round(mean(vals), 4),
                "early_share": round(early / len(vals), 3),
            }
        )
    return out


def cosine_calibration(queries: Any, chans: Any, paths: dict[int, str]) -> dict[str, float]:
    """Top-1 dense cosine when the top document is relevant vs when it is not."""
    rel, irr = [], []
    for q, (_, dense) in zip(queries, chans, strict=True):
        if not len(dense.ids):
            continue
        top = paths.get(int(dense.ids[0]))
        (rel if q.qrels.get(top, 0) > 0 else irr).append(float(dense.scores[0]))
    pct = lambda v, p: round(float(np.percentile(v, p)), 4) if v else None  # noqa: E731
    return {
        "relevant_p10": pct(rel, 10),
        "relevant_p50": pct(rel, 50),
        "irrelevant_p50": pct(irr, 50),
        "irrelevant_p90": pct(irr, 90),
    }


DEFAULT = {"fusion": "rrf", "rrf_k": 20, "w_dense": 1.0}  # the shipped default (settings.py)


def render(results: list[dict[str, Any]]) -> str:
    labels = list(results[0]["ndcg@10"])
    head = "| setting | " + " | ".join(r["dataset"] for r in results) + " | mean |"
    lines = [
        "# Fusion sweep (nDCG@10, e5-small + BM25F)",
        "",
        head,
        "|---|" + "---|" * (len(results) + 1),
    ]
    for label in labels:
        vals = [r["ndcg@10"][label] for r in results]
        lines.append(
            f"| {label} | " + " | ".join(f"{v:.4f}" for v in vals) + f" | {mean(vals):.4f} |"
        )
    lines += [
        "",
        "Queries per set: " + ", ".join(f"{r['dataset']} {r['queries']}" for r in results),
    ]
    lines += ["", "## Early return (default fusion)", ""]
    for r in results:
        pts = ", ".join(
            f"t={e['margin']}: {e['ndcg@10']:.4f} ({e['early_share']:.0%} early)"
            for e in r["early_return"]
        )
        lines.append(f"- {r['dataset']}: {pts}")
    lines += ["", "## Top-1 cosine (abstain calibration)", ""]
    lines += [f"- {r['dataset']}: {r['top1_cosine']}" for r in results]
    lines += [
        "",
        "Query embedding p50 (ms): "
        + ", ".join(f"{r['dataset']} {r['query_embed_ms_p50']}" for r in results),
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("names", nargs="*", default=list(NAMES))
    ap.add_argument("--queries", type=int, default=500, help="First N judged queries per set.")
    add_datasets_flag(ap)
    args = ap.parse_args()
    global DATA
    DATA = datasets_dir(args.datasets)
    results = [sweep(n, args.queries) for n in args.names if (CACHE / n / "clawkb.sqlite").exists()]
    (ROOT / "results" / "fusion-sweep.json").write_text(
        json.dumps(results, indent=2, ensure_ascii=False) + "\n"
    )
    (ROOT / "results" / "fusion-sweep.md").write_text(render(results))
    print(render(results))


if __name__ == "__main__":
    main()
