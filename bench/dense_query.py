"""Warm query embedding latency, this tree against an older one, same run.

    .venv/bin/python bench/dense_query.py [--queries 200] [--rounds 3] [--old-src DIR]

The hybrid path at 100k chunks (bench/dense_latency.py) is lexical search +
query embedding + vector search + fusion; this branch changes only the query
embedding (tokenizer, session loading) and small exact searches. This times
``E5Small().embed_query`` in a warm process (after 20 warm-up queries) over
the cli-latency queries and their variants, alternating a child process per
tree and round so the machine's load falls on both. Reported: p50 / p95
milliseconds (wall) per tree, best round. Writes
``bench/results/dense-query.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = """
import json, statistics, sys, time
from clawkb.embed.e5 import E5Small
base = ["DDR 走线阻抗", "0x4002_3800", "串口没有输出怎么办", "CONFIG_SMP", "user LED pin",
        "how to configure the UART baud rate", "SPI 时钟频率最高多少"]
n = int(sys.argv[1])
qs = [f"{base[i % len(base)]} {i}" for i in range(n)]
e = E5Small()
for q in qs[:20]:
    e.embed_query("warm " + q)
ts = []
for q in qs:
    t = time.perf_counter()
    e.embed_query(q)
    ts.append((time.perf_counter() - t) * 1000)
ts.sort()
print(json.dumps({"p50": statistics.median(ts), "p95": ts[int(0.95 * (len(ts) - 1))]}))
"""


def child(src: Path, n: int) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=str(src), OMP_NUM_THREADS="1")
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(n)], env=env, capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--old-src", type=Path)
    args = ap.parse_args()
    trees = {"this tree": ROOT / "src"} | ({"old tree": args.old_src} if args.old_src else {})
    runs: dict[str, list[dict[str, float]]] = {t: [] for t in trees}
    for _ in range(args.rounds):
        for name, src in trees.items():
            runs[name].append(child(src, args.queries))
            print(name, json.dumps(runs[name][-1]), flush=True)
    out = {
        "queries": args.queries,
        "rounds": args.rounds,
        "loadavg_1m": os.getloadavg()[0],
        "best_round_ms": {
            t: {
                "p50": round(min(r["p50"] for r in rs), 2),
                "p95": round(min(r["p95"] for r in rs), 2),
            }
            for t, rs in runs.items()
        },
    }
    print(json.dumps(out, indent=2))
    (ROOT / "bench" / "results" / "dense-query.json").write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
