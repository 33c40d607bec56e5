"""Query-adaptive fusion: collect channels, compare fusion rules, validate end to end.

    OMP_NUM_THREADS=1 .venv/bin/python bench/adaptive_fusion.py [--queries 500] [--e2e] [NAME ...]

1. For every set, run each query's lexical and dense channels once (the KBs
   and vectors of ``bench/dense_build.py`` under ``bench/.cache/dense/<name>``,
   the cross-lingual set's under ``bench/.cache/dense/crossling``) and cache
   the ranked chunk ids and scores with the features
   :mod:`clawkb.retrieve.adaptive` reads (``bench/.cache/adaptive/``).
2. Score, at document level (nDCG@10 and hit@3, a document at the rank of its
   best chunk), lexical alone, dense alone, RRF with fixed weights and the
   adaptive weights, from the cached channels: cheap, so rules can be compared.
3. ``--e2e``: the real ``clawkb eval --modes all`` path (compare_modes) with
   adaptive fusion off and on, written to bench/results/adaptive-fusion.json;
   bench/results/adaptive-fusion.md is the report written from it.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import sys
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("OMP_NUM_THREADS", "1")
ROOT = Path(__file__).resolve().parent
DATA = Path(os.environ.get("CLAWKB_DATASETS") or ROOT.parents[1] / "shared" / "datasets")
CACHE = ROOT / ".cache"
NAMES = ("cranfield", "agentset-msmarco", "cmrc2018-dev", "qbqtc-dev", "crossling")


def dataset_dir(name: str) -> Path:
    return ROOT / "data" / "crossling" if name == "crossling" else DATA / name


def collect(name: str, n_queries: int) -> dict:
    """Per query: both channels (chunk ids, scores), the rewrite, chunk → document, qrels."""
    out_path = CACHE / "adaptive" / f"{name}-{n_queries}.pkl"
    if out_path.exists():
        return pickle.loads(out_path.read_bytes())
    from clawkb.embed.e5 import E5Small
    from clawkb.evaluate.beir import load_beir
    from clawkb.kb import KnowledgeBase
    from clawkb.retrieve.crossling import balance
    from clawkb.retrieve.pipeline import retriever_for
    from clawkb.retrieve.rewrite import rewrite
    from clawkb.retrieve.source import LocalSource, Scope
    from clawkb.text.glossary import bundled_glossary

    ds = load_beir(dataset_dir(name))
    queries = ds.queries[:n_queries]
    kb = KnowledgeBase.open(CACHE / "dense" / name)
    r = retriever_for(kb)
    r.set_embedder(E5Small())
    from dataclasses import replace

    s = replace(r.settings, budget_dense_ms=120_000.0)  # a busy machine must not drop queries
    rows = []
    for q in queries:
        rw = balance(kb.lexical, rewrite(q.text, [], bundled_glossary()), s.glossary_share)
        ids, scores, _ = kb.lexical.search(rw.tokens, k=s.candidates, term_weights=rw.weights)
        (dense,) = LocalSource(kb).dense([q.text], s.candidates, Scope())
        rows.append(
            {
                "id": q.id,
                "qrels": dict(q.qrels),
                "tokens": rw.tokens,
                "weights": rw.weights,
                "n_glossary": rw.n_glossary,
                "lex": (ids, scores),
                "dense": (dense.ids, dense.scores),
            }
        )
    chunk_ids = {int(i) for row in rows for ch in ("lex", "dense") for i in row[ch][0]}
    paths = dict(zip(sorted(chunk_ids), kb.chunk_paths(sorted(chunk_ids)), strict=True))
    from clawkb.retrieve.adaptive import features

    for row in rows:
        from clawkb.retrieve import fusion

        chans = {
            "lexical": fusion.Channel(*row["lex"]),
            "dense": fusion.Channel(*row["dense"]),
        }
        row["features"] = features(
            kb.lexical, row["tokens"], row["weights"], row["n_glossary"], chans
        )
    kb.close()
    data = {"name": name, "rows": rows, "paths": paths}
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_bytes(pickle.dumps(data))
    return data


def _docs(chunk_ids: list[int], paths: dict[int, str], depth: int = 10) -> list[str]:
    return list(dict.fromkeys(paths[c] for c in chunk_ids))[:depth]


def _rrf(lex: np.ndarray, dense: np.ndarray, w_lex: float, w_dense: float, k: int) -> list[int]:
    score: dict[int, float] = {}
    for w, ids in ((w_lex, lex), (w_dense, dense)):
        for rank, c in enumerate(ids.tolist(), 1):
            score[c] = score.get(c, 0.0) + w / (k + rank)
    return sorted(score, key=lambda c: (-score[c], c))


def _decisive(scores: np.ndarray, margin: float) -> bool:
    if margin <= 0 or len(scores) == 0 or scores[0] <= 0:
        return False
    second = float(scores[1]) if len(scores) > 1 else 0.0
    return (float(scores[0]) - second) / float(scores[0]) >= margin


def simulate(data: dict, rule, k: int = 20, early: float = 0.5) -> dict[str, float]:
    """Mean nDCG@10 / hit@3 of lexical, dense, fixed RRF and ``rule`` (features → weights)."""
    from clawkb.evaluate.metrics import score_query

    paths = data["paths"]
    acc: dict[str, list[dict[str, float]]] = {
        m: [] for m in ("lexical", "dense", "rrf", "adaptive")
    }
    for row in data["rows"]:
        lex, dense = row["lex"][0], row["dense"][0]
        qrels = row["qrels"]
        skip = _decisive(row["lex"][1], early)
        runs = {
            "lexical": lex.tolist(),
            "dense": dense.tolist(),
            "rrf": lex.tolist() if skip else _rrf(lex, dense, 1.0, 1.0, k),
            "adaptive": lex.tolist() if skip else _rrf(lex, dense, *rule(row["features"]), k),
        }
        for m, ids in runs.items():
            acc[m].append(score_query(_docs(ids, paths), qrels, (3, 10)))
    return {
        f"{m}.{metric}": round(float(np.mean([x[metric] for x in v])), 4)
        for m, v in acc.items()
        for metric in ("ndcg@10", "hit@3")
    }


def e2e(name: str, n_queries: int) -> dict[str, dict[str, float]]:
    """``clawkb eval --modes all`` with adaptive fusion off, then on (default)."""
    from clawkb.embed.e5 import E5Small
    from clawkb.evaluate.compare import compare_modes

    emb = E5Small()
    out: dict[str, dict[str, float]] = {}
    for label, opts in (("fixed", {"adaptive": False}), ("adaptive", {})):
        modes = ("lexical", "dense", "hybrid") if label == "fixed" else ("hybrid",)
        c = compare_modes(
            dataset_dir(name),
            modes=modes,
            embedder=emb,
            k_values=(3, 10),
            limit_queries=n_queries,
            kb_home=CACHE / "dense" / name,
            options={"hybrid": opts},
        )
        for m, r in c.reports.items():
            key = m if m != "hybrid" else f"hybrid-{label}"
            out[key] = {
                "ndcg@10": round(r.metrics["ndcg@10"], 4),
                "hit@3": round(r.metrics["hit@3"], 4),
                "p50_ms": round(r.latency_p50_ms, 1),
                "queries": len(r.queries),
            }
    return out


def main() -> None:
    from clawkb.retrieve.adaptive import channel_weights

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", default=list(NAMES))
    ap.add_argument("--queries", type=int, default=500)
    ap.add_argument("--e2e", action="store_true", help="also run the real eval path")
    args = ap.parse_args()
    report: dict[str, dict] = {}
    for name in args.names:
        t = time.perf_counter()
        data = collect(name, args.queries)
        sim = simulate(data, channel_weights)
        report[name] = {"simulated": sim}
        print(name, f"{time.perf_counter() - t:.0f}s", sim, file=sys.stderr, flush=True)
        if args.e2e:
            report[name]["e2e"] = e2e(name, args.queries)
            print(name, report[name]["e2e"], file=sys.stderr, flush=True)
    print(json.dumps(report, indent=2))
    if args.e2e:
        (ROOT / "results" / "adaptive-fusion.json").write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
