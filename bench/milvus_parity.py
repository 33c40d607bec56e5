"""Parity of the Milvus backend with the local backend on the shared datasets.

For each dataset: one throw-away local KB and one KB searched on Milvus Lite,
same corpus, same tokens (surrogate words), same embedder; nDCG@10 and
recall@100 per mode side by side, and the difference (target: |Δ nDCG@10|
<= 0.01). Writes bench/results/milvus-parity.json and bench/results/milvus-latest.md (with the
scale results of bench/milvus_scale.py when present).

    python bench/milvus_parity.py [--datasets DIR] [--limit-queries N] [--embedder static]

``--datasets`` defaults to ``$CLAWKB_DATASETS``, else ``../shared/datasets`` relative
to the repository root (bench/shared_data.py). The embedder defaults to ``static`` (parity needs the same vectors on
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

from clawkb.embed.base import get_embedder  # noqa: E402
from clawkb.evaluate.compare import MODES, compare_modes  # noqa: E402
from clawkb.evaluate.milvus import compare_on_milvus  # noqa: E402
from shared_data import RESULTS, add_datasets_flag, datasets_dir  # noqa: E402

SETS = ("cranfield", "cmrc2018-dev", "agentset-msmarco", "qbqtc-dev")


def run(
    folder: Path,
    limit: int,
    embedder: str,
    modes: tuple[str, ...] = MODES,
    early_return: float | None = None,
) -> dict[str, object]:
    opts = {m: {"early_return": early_return} for m in modes} if early_return is not None else None
    t0 = time.perf_counter()
    local = compare_modes(
        folder, modes=modes, embedder=get_embedder(embedder), limit_queries=limit, options=opts
    )
    t1 = time.perf_counter()
    milvus = compare_on_milvus(
        folder, modes=modes, embedder=embedder, limit_queries=limit, options=opts
    )
    t2 = time.perf_counter()
    out: dict[str, object] = {"dataset": folder.name, "queries": limit, "embedder": embedder}
    if early_return is not None:
        out["early_return"] = early_return
    for mode in modes:
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
    out["chunks"] = local.reports[modes[0]].chunk_count
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
        for mode in (m for m in MODES if m in r):
            m = r[mode]
            assert isinstance(m, dict)
            lines.append(
                f"| {r['dataset']} | {r['chunks']} | {mode} | {m['local_ndcg10']:.4f} |"
                f" {m['milvus_ndcg10']:.4f} | {m['delta_ndcg10']:+.4f} |"
                f" {m['local_recall100']:.4f} | {m['milvus_recall100']:.4f} |"
                f" {m['local_p50_ms']} | {m['milvus_p50_ms']} |"
            )
    return "\n".join(lines) + "\n"


def _mode_p50(r: dict[str, object], mode: str) -> str:
    m = (r.get("modes") or {}).get(mode)  # type: ignore[attr-defined]
    return f" {m['local_p50_ms']} / {m['milvus_p50_ms']} |" if m else " — |"


def scale_markdown(rows: list[dict[str, object]]) -> str:
    lines = [
        "| chunks | vectors | local ingest chunks/s | Milvus Lite sync chunks/s |"
        " local p50 / p95 ms | Milvus Lite p50 / p95 ms | found@10 local / Milvus |"
        " Lite disk MB | store + BM25F MB | dense p50 local / Milvus ms |"
        " hybrid p50 local / Milvus ms | peak RSS sync / query GB | machine |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        local_mb = (int(r["store_bytes"]) + int(r["lexical_index_bytes"])) / 1e6  # type: ignore[call-overload]
        lines.append(
            f"| {r['chunks']} | {'static' if r['dense'] else 'none'} |"
            f" {r['local_chunks_per_s']} | {r['milvus_sync_chunks_per_s']} |"
            f" {r['local_p50_ms']} / {r['local_p95_ms']} | {r['milvus_p50_ms']} / {r['milvus_p95_ms']} |"
            f" {r['local_found_at10']} / {r['milvus_found_at10']} |"
            f" {int(r['lite_disk_bytes']) / 1e6:.1f} | {local_mb:.1f} |"  # type: ignore[call-overload]
            + "".join(_mode_p50(r, m) for m in ("dense", "hybrid"))
            + f" {_peaks(r)} | {r.get('machine', '')} |"
        )
    return "\n".join(lines) + "\n"


def _peaks(r: dict[str, object]) -> str:
    if "query_peak_rss_bytes" not in r:
        return "—"
    sync, query = int(r["sync_peak_rss_bytes"]), int(r["query_peak_rss_bytes"])  # type: ignore[call-overload]
    return f"{sync / 1e9:.1f} / {query / 1e9:.1f}"


def attempts_markdown(rows: list[dict[str, object]]) -> str:
    """Runs that did not finish (recorded by hand from the kernel log), so the ladder's
    top is read with what stopped it."""
    lines = [
        "## Larger runs that did not finish\n",
        "| chunks | outcome | process anon RSS at the kill GB | Lite folder GB | machine |",
        "|---:|---|---:|---:|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['docs']} | {r['outcome']} | {r['anon_rss_gb']} | {r['lite_disk_gb']} |"
            f" {r['machine']} |"
        )
    return "\n".join(lines) + "\n"


def _fit(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """y = a·x^b fitted in log-log space (least squares): (a, b)."""
    import math

    lx, ly = [math.log(x) for x in xs], [math.log(max(y, 1e-9)) for y in ys]
    mx, my = sum(lx) / len(lx), sum(ly) / len(ly)
    var = sum((x - mx) ** 2 for x in lx)
    b = sum((x - mx) * (y - my) for x, y in zip(lx, ly, strict=True)) / var if var else 0.0
    return math.exp(my - b * mx), b


def growth_markdown(rows: list[dict[str, object]], targets: tuple[int, ...] = (10**6,)) -> str:
    """Extrapolation from the measured ladder (runs with vectors, 3+ sizes): a power law
    per quantity, labelled as such."""
    dense = [r for r in rows if r["dense"]]
    # Fit only runs measured alike: the largest group sharing one machine condition.
    groups: dict[str, list[dict[str, object]]] = {}
    for r in dense:
        groups.setdefault(str(r.get("machine", "")), []).append(r)
    same = max(groups.values(), key=len) if groups else []
    ladder = sorted(same, key=lambda r: int(r["chunks"]))  # type: ignore[call-overload]
    if len(ladder) < 3:
        return ""
    n = [float(r["chunks"]) for r in ladder]  # type: ignore[arg-type]
    series: dict[str, list[float]] = {
        "local ingest s": [float(r["local_ingest_s"]) for r in ladder],  # type: ignore[arg-type]
        "Milvus Lite sync s": [float(r["milvus_sync_s"]) for r in ladder],  # type: ignore[arg-type]
        "Lite disk MB": [int(r["lite_disk_bytes"]) / 1e6 for r in ladder],  # type: ignore[call-overload]
        "sync RSS growth MB": [
            max(1.0, int(r["rss_growth_during_sync_bytes"]) / 1e6)  # type: ignore[call-overload]
            for r in ladder
        ],
    }
    for mode in ("lexical", "dense", "hybrid"):
        for side in ("local", "milvus"):
            series[f"{mode} p50 ms {side}"] = [
                float(r["modes"][mode][f"{side}_p50_ms"])  # type: ignore[index]
                for r in ladder
            ]
    head = "| quantity | fitted growth | " + " | ".join(f"{t:,} (extrapolated)" for t in targets)
    lines = [
        "## Fitted growth (extrapolation, not a measurement)\n",
        f"Power law y = a·N^b fitted to the {len(ladder)} measured sizes above"
        f" ({', '.join(f'{int(x):,}' for x in n)} chunks, with vectors, all measured on a"
        f" machine '{ladder[0].get('machine', '')}'; other rows are not mixed in).\n",
        head + " |",
        "|---|---:|" + "---:|" * len(targets),
    ]
    for name, ys in series.items():
        a, b = _fit(n, ys)
        vals = " | ".join(f"{a * t**b:,.1f}" for t in targets)
        lines.append(f"| {name} | N^{b:.2f} | {vals} |")
    return "\n".join(lines) + "\n"


def write_latest() -> None:
    """bench/results/milvus-latest.md from the parity and scale JSON files."""
    parts = ["# Milvus backend: parity and scale (latest run)\n"]
    parity = RESULTS / "milvus-parity.json"
    if parity.exists():
        rows = json.loads(parity.read_text())
        n = rows[0]["queries"] if rows else 0
        parts.append(
            f"## Parity (`python bench/milvus_parity.py`; first {n} judged queries per set,"
            " embedder `static` on both sides)\n\n" + markdown(rows)
        )
    ner = RESULTS / "milvus-parity-no-early-return.json"
    if ner.exists():
        parts.append(
            "## Hybrid without the early-return heuristic (`--early-return 0` on both sides)\n\n"
            "The local pipeline skips the dense channel when the lexical top-1 beats the"
            " runner-up by a relative margin (`retrieval.early_return`, 0.5); it reads BM25F"
            " scores locally and Milvus BM25 scores remotely. With it off, both fuse every"
            " query (this checks whether the heuristic explains a hybrid gap).\n\n"
            + markdown(json.loads(ner.read_text()))
        )
    scale = RESULTS / "milvus-scale.json"
    if scale.exists():
        parts.append(
            "## Ingest and query (`python bench/milvus_scale.py --docs N`; synthetic"
            " bilingual corpus, lexical top-10)\n\n" + scale_markdown(json.loads(scale.read_text()))
        )
        attempts = RESULTS / "milvus-scale-attempts.json"
        if attempts.exists():
            parts.append(attempts_markdown(json.loads(attempts.read_text())))
        fit = growth_markdown(json.loads(scale.read_text()))
        if fit:
            parts.append(fit)
    (RESULTS / "milvus-latest.md").write_text("\n".join(parts))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_datasets_flag(ap)
    ap.add_argument("--sets", default=",".join(SETS))
    ap.add_argument("--limit-queries", type=int, default=200)
    ap.add_argument("--embedder", default="static")
    ap.add_argument("--report-only", action="store_true", help="Only rewrite milvus-latest.md.")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument(
        "--early-return", type=float, help="Override retrieval.early_return on both sides."
    )
    ap.add_argument("--out", default="milvus-parity.json", help="Result file under bench/results.")
    args = ap.parse_args()
    if args.report_only:
        write_latest()
        return
    rows = []
    for name in args.sets.split(","):
        folder = datasets_dir(args.datasets) / name
        if not folder.is_dir():
            print(f"skip {name}: {folder} not found", file=sys.stderr)
            continue
        modes = tuple(m.strip() for m in args.modes.split(","))
        rows.append(run(folder, args.limit_queries, args.embedder, modes, args.early_return))
        print(json.dumps(rows[-1]), flush=True)
        RESULTS.mkdir(parents=True, exist_ok=True)
        (RESULTS / args.out).write_text(json.dumps(rows, indent=2) + "\n")
        write_latest()
    print(markdown(rows))


if __name__ == "__main__":
    main()
