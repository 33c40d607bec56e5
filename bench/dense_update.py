"""What bringing the dense search copy up to date costs after a small write.

    .venv/bin/python bench/dense_update.py [--vectors 40000] [--dim 384] [--added 20]

A real store (``KnowledgeBase.open``) filled with ``--vectors`` synthetic chunks
and vectors (below the ANN threshold, so the exact copy), then three updates of
the copy measured in CPU seconds of this process, each against a full rebuild
from the store in the same run:

* a write that adds ``--added`` chunks with vectors and deletes as many;
* a write that changes no vector (only the store's change sequence moves).

Writes bench/results/dense-update.md (+ .json).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from clawkb.embed import vectors
from clawkb.index.dense import DenseIndex
from clawkb.kb import KnowledgeBase
from clawkb.store import db
from shared_data import write_results

HERE = Path(__file__).resolve().parent


def _add(conn: Any, first: int, n: int, dim: int, rng: np.random.Generator) -> None:
    """``n`` documents of one chunk each, with a vector, and their change rows."""
    mkey = f"bench|{dim}|none|norm"
    now = time.time()
    with db.transaction(conn):
        for i in range(first, first + n):
            doc = conn.execute(
                "INSERT INTO documents (path, content_hash, indexed_at) VALUES (?,?,?)",
                (f"/bench/d{i}.md", f"h{i}", now),
            ).lastrowid
            cid = conn.execute(
                "INSERT INTO chunks (doc_id, anchor, ordinal, text, content_hash, line_start,"
                " line_end) VALUES (?,?,?,?,?,1,1)",
                (doc, f"a{i}", 0, f"text {i}", f"c{i}"),
            ).lastrowid
            conn.execute("INSERT INTO changes (op, chunk_id) VALUES ('add', ?)", (cid,))
            vec = rng.standard_normal(dim).astype("<f4")
            vec /= np.linalg.norm(vec)
            conn.execute(
                "INSERT INTO vectors (model, key, vec) VALUES (?,?,?)",
                (mkey, f"k{i}", vec.tobytes()),
            )
            conn.execute(
                "INSERT INTO chunk_vectors (model, chunk_id, key) VALUES (?,?,?)",
                (mkey, cid, f"k{i}"),
            )
        vectors.bump_version(conn)


def _delete(conn: Any, n: int) -> None:
    with db.transaction(conn):
        ids = [r[0] for r in conn.execute("SELECT id FROM chunks ORDER BY random() LIMIT ?", (n,))]
        for cid in ids:
            conn.execute("INSERT INTO changes (op, chunk_id) VALUES ('del', ?)", (cid,))
            conn.execute("DELETE FROM chunks WHERE id = ?", (cid,))
        vectors.bump_version(conn)


def _cpu(fn: Any) -> float:
    t0 = time.process_time()
    fn()
    return time.process_time() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--vectors", type=int, default=40_000)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--added", type=int, default=20)
    ap.add_argument("--out-dir", type=Path, default=HERE / "results")
    args = ap.parse_args()
    rng = np.random.default_rng(1)
    sig = {"model": "bench", "dim": args.dim, "prefix": "none", "normalized": True}
    out: dict[str, Any] = {"vectors": args.vectors, "dim": args.dim, "added": args.added}
    with (
        tempfile.TemporaryDirectory(prefix="clawkb-dense-update-") as tmp,
        KnowledgeBase.open(Path(tmp) / "kb", create=True) as kb,
    ):
        conn = kb.conn
        _add(conn, 0, args.vectors, args.dim, rng)
        folder = kb.home / "index" / "dense"

        def fresh() -> DenseIndex:
            return DenseIndex(folder, conn, sig)

        out["first_build_cpu_s"] = round(_cpu(fresh().refresh), 3)
        runs = []
        for r in range(3):
            _add(conn, args.vectors + r * args.added, args.added, args.dim, rng)
            _delete(conn, args.added)
            d = fresh()
            incr = _cpu(d.refresh)
            assert d.meta["built"] == "incremental", d.meta
            full = _cpu(lambda: fresh()._rebuild(fresh().stamp()))
            with db.transaction(conn):  # a change row, no vector change: the seq moves
                conn.execute("INSERT INTO changes (op, chunk_id) VALUES ('del', -1)")
            d = fresh()
            meta_only = _cpu(d.refresh)
            runs.append({"incremental": incr, "full": full, "meta_only": meta_only})
    for key in ("incremental", "full", "meta_only"):
        out[f"{key}_cpu_s"] = round(float(np.median([r[key] for r in runs])), 4)
    out["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    write_results(args.out_dir, "dense-update.json", "dense-update.md", out, render)
    return 0


def render(r: dict[str, Any]) -> str:
    full = r["full_cpu_s"]
    return "\n".join(
        [
            "# Dense search copy: row-by-row update vs full rebuild after a small write",
            "",
            f"`bench/dense_update.py --vectors {r['vectors']} --dim {r['dim']} --added"
            f" {r['added']}`: a real store with {r['vectors']} chunk vectors ({r['dim']}-d,"
            " exact search copy); medians of 3 rounds, CPU seconds of the process (load"
            f" average at the end {' / '.join(f'{x:.1f}' for x in r['loadavg_end'])}).",
            "",
            "| update after | CPU (s) | vs full rebuild |",
            "|---|---|---|",
            f"| first build (full, from the store) | {r['first_build_cpu_s']} | |",
            f"| a write adding {r['added']} vectors and deleting {r['added']} chunks,"
            f" row by row | {r['incremental_cpu_s']} |"
            f" {full / max(r['incremental_cpu_s'], 1e-4):.1f}x less |",
            f"| the same write, full rebuild (before) | {full} | 1x |",
            f"| a write that changes no vector (meta.json only) | {r['meta_only_cpu_s']} |"
            f" {full / max(r['meta_only_cpu_s'], 1e-4):.0f}x less |",
        ]
    )


if __name__ == "__main__":
    sys.exit(main())
