"""End-to-end lexical / dense / hybrid nDCG@10 on the shared sets, with shipped defaults.

    OMP_NUM_THREADS=1 .venv/bin/python bench/dense_eval.py [--queries 500] [NAME ...]

Runs :func:`clawkb.evaluate.compare.compare_modes` (what ``clawkb eval
--modes all`` does) on the KBs built by ``bench/dense_build.py``, so nothing is
re-embedded. Writes ``bench/results/dense-eval.json`` and ``dense-eval.md``.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from shared_data import add_datasets_flag, datasets_dir

os.environ.setdefault("OMP_NUM_THREADS", "1")
ROOT = Path(__file__).resolve().parent
DATA = datasets_dir()
CACHE = ROOT / ".cache" / "dense"
NAMES = ("cranfield", "agentset-msmarco", "cmrc2018-dev", "qbqtc-dev")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("names", nargs="*", default=list(NAMES))
    ap.add_argument("--queries", type=int, default=500)
    add_datasets_flag(ap)
    args = ap.parse_args()
    global DATA
    DATA = datasets_dir(args.datasets)
    from clawkb.embed.e5 import E5Small
    from clawkb.evaluate.compare import compare_modes

    emb = E5Small()
    rows, full = [], {}
    for name in args.names:
        c = compare_modes(
            DATA / name, embedder=emb, limit_queries=args.queries, kb_home=CACHE / name
        )
        full[name] = {
            m: {
                "metrics": r.metrics,
                "p50_ms": r.latency_p50_ms,
                "p95_ms": r.latency_p95_ms,
                "queries": len(r.queries),
            }
            for m, r in c.reports.items()
        }
        ndcg = {m: r.metrics["ndcg@10"] for m, r in c.reports.items()}
        best = max(ndcg["lexical"], ndcg["dense"])
        rows.append(
            f"| {name} | {len(c.reports['hybrid'].queries)} | {ndcg['lexical']:.4f} | {ndcg['dense']:.4f}"
            f" | {ndcg['hybrid']:.4f} | {'yes' if ndcg['hybrid'] >= best else 'no'}"
            f" | {c.reports['lexical'].latency_p50_ms:.1f} / {c.reports['dense'].latency_p50_ms:.1f}"
            f" / {c.reports['hybrid'].latency_p50_ms:.1f} |"
        )
        print(rows[-1], flush=True)
    md = [
        "# lexical / dense / hybrid (shipped defaults, e5-small)",
        "",
        "| dataset | queries | lexical | dense | hybrid | hybrid ≥ best | p50 ms lex / dense / hybrid |",
        "|---|---|---|---|---|---|---|",
        *rows,
    ]
    (ROOT / "results" / "dense-eval.md").write_text("\n".join(md) + "\n")
    (ROOT / "results" / "dense-eval.json").write_text(json.dumps(full, indent=2) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
