"""How long a model load stalls the other threads of the process that loads it.

    .venv/bin/python bench/model_load_stall.py [--model static] [--runs 3]

A "request" thread ticks (sleeps 1 ms, notes the time) while the embedding model
loads and embeds one query, two ways, each in a fresh process:

* ``in-process``: the load on another thread of the same process (what
  ``clawkb serve`` did when vectors first appeared mid-run);
* ``worker``: :class:`clawkb.embed.worker.WorkerEmbedder`, the load in a child
  process (what it does now).

Reports the ticking thread's longest gap during the load (the stall every
request in flight would see), the load's wall time, and the process's RSS
growth. Writes bench/results/model-load-stall.md (+ .json).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from shared_data import write_results

HERE = Path(__file__).resolve().parent


def _rss_mb() -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def one(model: str, way: str) -> dict[str, Any]:
    """Runs in a fresh process: load ``model`` the ``way`` given while a thread ticks."""
    from clawkb.embed.base import get_embedder
    from clawkb.embed.worker import worker_embedder

    local = get_embedder(model)  # imports done before the clock starts
    rss0 = _rss_mb()
    gaps: list[float] = []
    done = threading.Event()

    def tick() -> None:
        last = time.perf_counter()
        while not done.is_set():
            time.sleep(0.001)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    ticker = threading.Thread(target=tick)
    ticker.start()
    time.sleep(0.2)
    t0 = time.perf_counter()
    if way == "in-process":
        local.warm()
        local.embed_queries(["warm"])
        closer = None
    else:
        embedder = worker_embedder(model, {})
        assert embedder.wait_ready(300)  # type: ignore[attr-defined]
        embedder.embed_queries(["warm"])
        closer = embedder
    load_s = time.perf_counter() - t0
    time.sleep(0.2)
    done.set()
    ticker.join()
    rss1 = _rss_mb()
    if closer is not None:
        closer.close()  # type: ignore[attr-defined]
    return {
        "way": way,
        "load_wall_ms": round(load_s * 1000, 1),
        "longest_tick_gap_ms": round(max(gaps) * 1000, 1),
        "rss_growth_mb": round(rss1 - rss0, 1),
    }


def render(doc: dict[str, Any]) -> str:
    med = doc["median"]
    gap_ratio = med["in-process"]["longest_tick_gap_ms"] / max(
        med["worker"]["longest_tick_gap_ms"], 0.1
    )
    lines = [
        f"# Model load stall: `{doc['model']}` loaded in the server's process vs in a worker",
        "",
        f"`bench/model_load_stall.py --model {doc['model']} --runs {doc['runs']}`, medians of"
        f" {doc['runs']} fresh processes per way (alternated); {doc['cores']} cores, load"
        f" average at the end {' / '.join(f'{x:.1f}' for x in doc['loadavg_end'])}. A thread"
        " ticking every 1 ms stands for a request in flight; its longest gap is how long"
        " the load held it up.",
        "",
        "| measure | in-process (before) | worker process (after) |",
        "|---|---|---|",
        *(
            f"| {label} | {med['in-process'][k]} | {med['worker'][k]} |"
            for label, k in (
                ("longest gap of the ticking thread (ms)", "longest_tick_gap_ms"),
                ("load + first query, wall (ms)", "load_wall_ms"),
                ("RSS growth of the process (MB)", "rss_growth_mb"),
            )
        ),
        "",
        f"The in-process load held the other thread up {gap_ratio:.0f}x longer.",
    ]
    return "\n".join(lines)


def main() -> int:
    if len(sys.argv) > 2 and sys.argv[1] == "--one":
        print(json.dumps(one(sys.argv[2], sys.argv[3])))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="static")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out-dir", type=Path, default=HERE / "results")
    args = ap.parse_args()
    rows: dict[str, list[dict[str, Any]]] = {"in-process": [], "worker": []}
    for _ in range(args.runs):
        for way in rows:  # alternated, so machine load drifts hit both alike
            out = subprocess.run(
                [sys.executable, __file__, "--one", args.model, way],
                capture_output=True, text=True, check=True,
            )  # fmt: skip
            rows[way].append(json.loads(out.stdout.strip().splitlines()[-1]))
    med = {
        way: {k: statistics.median(r[k] for r in runs) for k in runs[0] if k != "way"}
        for way, runs in rows.items()
    }
    doc = {
        "model": args.model,
        "runs": args.runs,
        "cores": os.cpu_count(),
        "loadavg_end": [round(x, 2) for x in os.getloadavg()],
        "median": med,
        "each": rows,
    }
    write_results(args.out_dir, "model-load-stall.json", "model-load-stall.md", doc, render)
    return 0


if __name__ == "__main__":
    sys.exit(main())
