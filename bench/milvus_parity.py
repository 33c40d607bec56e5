"""Parity of the Milvus backend with the local backend on the shared datasets.

For each dataset: one throw-away local KB and one KB searched on Milvus Lite,
same corpus, same tokens (surrogate words), same embedder; nDCG@10 and
recall@100 per mode side by side, and the difference (target: |Δ nDCG@10|
<= 0.01). Writes bench/results/milvus-parity.json and, with the scale bench,
bench/results/milvus-latest.md.

    python bench/milvus_parity.py [--datasets DIR] [--limit-queries N] [--embedder static]

``--datasets`` defaults to ``../shared/datasets`` relative to the repository
root. The embedder defaults to ``static`` (parity needs the same vectors on
both sides, not the best ones; e5-small takes minutes per set on 2 cores).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from clawkb.backends.evaluate import compare_on_milvus  # noqa: E402
from clawkb.embed.base import get_embedder  # noqa: E402
from clawkb.evaluate.compare import MODES, compare_modes  # noqa: E402

SETS = ("cranfield", "cmrc2018-dev", "agentset-msmarco", "qbqtc-dev")
RESULTS = ROOT / "bench" / "results"


def run(folder: Path, limit: int, embedder: str) -> dict[str, object]:
    t0 = time.perf_counter()
    local = compare_modes(folder, modes=MODES, embedder=get_embedder(embedder), limit_queries=limit)
    t1 = time.perf_counter()
    milvus = compare_on_milvus(folder, modes=MODES, embedder=embedder, limit_queries=limit)
    t2 = time.perf_counter()
    out: dict[str, object] = {"dataset": folder.name, "queries": limit, "embedder": embedder}
    for mode in MODES:
        lo, mi = local.reports[mode], milvus.reports[mode]
        out[mode] = {
            "local_ndcg10": round(lo.metrics["ndcg@10"], 4),
            "milvus_ndcg10": round(mi.metrics["ndcg@10"], 4),
            "delta_ndcg10": round(mi.metrics["ndcg@10"] - lo.metrics["ndcg@10"], 4),
            "local_recall100": round(lo.metrics["recall@100"], 4),
            "milvus_recall100": round(mi.metrics["recall@100"], 4),
            "local_p50_ms": round(lo.latency_p50_ms, 1),
            "milvus_p50_ms": round(mi.latency_p50_ms, 1),
        }
    out["chunks"] = local.reports["lexical"].chunk_count
    out["local_seconds"] = round(t1 - t0, 1)
    out["milvus_seconds"] = round(t2 - t1, 1)
    return out


def markdown(rows: list[dict[str, object]]) -> str:
    lines = [
        "| dataset | chunks | mode | nDCG@10 local | nDCG@10 Milvus | Δ | recall@100 local |"
        " recall@100 Milvus | p50 ms local | p50 ms Milvus |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        for mode in MODES:
            m = r[mode]
            assert isinstance(m, dict)
            lines.append(
                f"| {r['dataset']} | {r['chunks']} | {mode} | {m['local_ndcg10']:.4f} |"
                f" {m['milvus_ndcg10']:.4f} | {m['delta_ndcg10']:+.4f} |"
                f" {m['local_recall100']:.4f} | {m['milvus_recall100']:.4f} |"
                f" {m['local_p50_ms']} | {m['milvus_p50_ms']} |"
            )
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", type=Path, default=ROOT.parent / "shared" / "datasets")
    ap.add_argument("--sets", default=",".join(SETS))
    ap.add_argument("--limit-queries", type=int, default=200)
    ap.add_argument("--embedder", default="static")
    args = ap.parse_args()
    rows = []
    for name in args.sets.split(","):
        folder = args.datasets / name
        if not folder.is_dir():
            print(f"skip {name}: {folder} not found", file=sys.stderr)
            continue
        rows.append(run(folder, args.limit_queries, args.embedder))
        print(json.dumps(rows[-1]), flush=True)
        RESULTS.mkdir(parents=True, exist_ok=True)
        (RESULTS / "milvus-parity.json").write_text(json.dumps(rows, indent=2) + "\n")
        (RESULTS / "milvus-parity.md").write_text(markdown(rows))
    print(markdown(rows))


if __name__ == "__main__":
    main()
