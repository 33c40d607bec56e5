"""e5-small document embedding on two cores: which way of using the second core is faster.

    .venv/bin/python bench/dense_cores.py [--chunks 240] [--rounds 2] [--precision int8]

The chunks are ``bench/dense_ingest.py``'s (~300-character Chinese and English
paragraphs, alternating). Configurations, all in this one process and run in
turn round by round (A B C A B C...) so the machine's load drifts evenly over
them:

- ``1 thread``: one intra-op thread, one batch at a time (the old default);
- ``intra-op 2``: one batch at a time, onnxruntime splits each node over 2 threads;
- ``2 callers``: two batches at a time on one session, one intra-op thread each.

``--tokens`` lists padded-token budgets per batch to try (length-bucketed
batches). Reported per configuration: wall chunks/s (the target, >= 55 on 2
cores), process CPU seconds and chunks per CPU-second (what the rest of the
machine lost), best and median over rounds. Writes
``bench/results/dense-cores.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

from dense_ingest import chunks
from shared_data import add_datasets_flag, datasets_dir

ROOT = Path(__file__).resolve().parent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chunks", type=int, default=240)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--precision", default="int8")
    ap.add_argument("--tokens", default="256,1024")
    add_datasets_flag(ap)
    args = ap.parse_args()
    import dense_ingest

    dense_ingest.DATA = datasets_dir(args.datasets)
    from clawkb.embed.e5 import E5Small

    texts = chunks(args.chunks)
    configs = {}
    for tpb in (int(t) for t in args.tokens.split(",")):
        configs[f"1 thread, {tpb} tok/batch"] = dict(threads=1, workers=1, tokens_per_batch=tpb)
        configs[f"intra-op 2, {tpb} tok/batch"] = dict(threads=2, workers=1, tokens_per_batch=tpb)
        configs[f"2 callers, {tpb} tok/batch"] = dict(threads=1, workers=2, tokens_per_batch=tpb)
    embedders = {}
    for name, kw in configs.items():
        e = E5Small(precision=args.precision, **kw)
        e.embed_documents(texts[:8])  # graph, session, tokenizer, pool: outside the timing
        embedders[name] = e
    runs: dict[str, list[tuple[float, float]]] = {n: [] for n in configs}
    for _ in range(args.rounds):
        for name, e in embedders.items():
            t0, c0 = time.perf_counter(), time.process_time()
            e.embed_documents(texts)
            runs[name].append((time.perf_counter() - t0, time.process_time() - c0))
            wall, cpu = runs[name][-1]
            print(f"{name}: {len(texts) / wall:.1f} chunks/s wall, {cpu:.2f} CPU-s", flush=True)
    out = {
        "chunks": len(texts),
        "precision": args.precision,
        "cpus": os.cpu_count(),
        "loadavg_1m": os.getloadavg()[0],
        "configs": {},
    }
    for name, rs in runs.items():
        walls = [w for w, _ in rs]
        cpus = [c for _, c in rs]
        out["configs"][name] = {
            "chunks_per_s_wall_best": round(len(texts) / min(walls), 1),
            "chunks_per_s_wall_median": round(len(texts) / statistics.median(walls), 1),
            "cpu_s_median": round(statistics.median(cpus), 2),
            "chunks_per_cpu_s": round(len(texts) / statistics.median(cpus), 1),
        }
    print(json.dumps(out, indent=2))
    (ROOT / "results" / "dense-cores.json").write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
