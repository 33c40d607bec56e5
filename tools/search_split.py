"""Where a default-mode search spends its CPU, stage by stage, and which thread.

    OMP_NUM_THREADS=1 nice -n 10 .venv/bin/python tools/search_split.py \
        --kb DIR [--set agentset-msmarco] [--queries 115] [--rounds 2] [--synth 100000]

``--synth N``: ``bench/default_latency.py``'s synthetic N-document KB (built once from
``--kb``'s vectors) and its synthetic queries.

The same queries as ``default_latency.py`` (every search embeds its query: the
query-vector cache is emptied first; result cache off, in a private copy of the
KB). Each stage function is wrapped to add up its thread CPU time
(``time.thread_time``) and wall time per search: the dense channel
(``LocalSource.dense``: the query embedding and the vector search) runs on a stage
worker, everything else on the calling thread, and ``_prepare`` is the calling
thread's work done while the worker runs. The critical path is modelled from the
two threads' CPU: run one after the other it is calling + worker; overlapped on
two free cores, calling + max(0, worker - prepare). On a shared machine the wall
times say little; the thread CPU times and the model are what to read.
Prints a table; writes nothing.
"""

from __future__ import annotations

import argparse
import functools
import os
import time
from collections import defaultdict
from pathlib import Path
from statistics import median

import numpy as np

os.environ.setdefault("OMP_NUM_THREADS", "1")
import bench_path
from default_latency import queries, synth_kb, synth_queries
from shared_data import add_datasets_flag, datasets_dir, private_copy

#: (module, attribute, label): the stage functions timed
STAGES = [
    ("clawkb.retrieve.pipeline", "rewrite", "rewrite"),
    ("clawkb.retrieve.pipeline", "balance", "glossary balance"),
    ("clawkb.retrieve.source:LocalSource", "restrict", "restrict"),
    ("clawkb.retrieve.source:LocalSource", "lexical", "lexical channel"),
    ("clawkb.retrieve.pipeline", "dense_translation", "dense translation"),
    ("clawkb.retrieve.source:LocalSource", "dense", "dense channel (worker)"),
    ("clawkb.embed.e5:E5Small", "embed_queries", "  of which query embedding"),
    ("clawkb.index.dense:DenseIndex", "search_many", "  of which vector search"),
    ("clawkb.retrieve.pipeline", "_prepare", "prepare (while the worker runs)"),
    ("clawkb.retrieve.adaptive", "prepare", "  of which adaptive signals"),
    ("clawkb.retrieve.notfound", "prepare", "  of which not-found question features"),
    ("clawkb.retrieve.stages:ExactStage", "prepare", "  of which exact anchors"),
    ("clawkb.retrieve.unembedded", "place", "unembedded placement"),
    ("clawkb.retrieve.titles", "add_channel", "title channel"),
    ("clawkb.retrieve.adaptive", "tune", "adaptive weights"),
    ("clawkb.retrieve.pipeline", "fuse", "RRF fusion"),
    ("clawkb.retrieve.exact", "keep_on_top", "exact stage"),
    ("clawkb.retrieve.headings", "lift", "headings stage"),
    ("clawkb.retrieve.source:LocalSource", "rows", "store rows"),
    ("clawkb.retrieve.pipeline", "merge_adjacent", "section merge"),
    ("clawkb.retrieve.pipeline", "hit", "hits"),
    ("clawkb.retrieve.pipeline", "confidence", "confidence"),
    ("clawkb.retrieve.notfound", "judge", "not-found decision"),
]


def wrap(acc: dict[str, list[float]]) -> None:
    import importlib

    for where, name, label in STAGES:
        mod_name, _, cls = where.partition(":")
        owner = importlib.import_module(mod_name)
        if cls:
            owner = getattr(owner, cls)
        f = getattr(owner, name, None)
        if f is None:  # an older tree without this stage
            continue
        raw = owner.__dict__.get(name)
        static = isinstance(raw, staticmethod)

        def timed(*a, _f=f, _label=label, **k):  # type: ignore[no-untyped-def]
            t, c = time.perf_counter(), time.thread_time()
            try:
                return _f(*a, **k)
            finally:
                e = acc[_label]
                e[0] += time.perf_counter() - t
                e[1] += time.thread_time() - c
                e[2] += 1

        functools.update_wrapper(timed, f)
        setattr(owner, name, staticmethod(timed) if static else timed)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kb", required=True, help="an embedded KB (e.g. agentset-msmarco's)")
    ap.add_argument("--set", default="agentset-msmarco")
    ap.add_argument("--queries", type=int, default=115)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--work", default=str(bench_path.BENCH / ".cache" / "search-split"))
    ap.add_argument("--synth", type=int, default=0, help="default_latency.py's synthetic KB")
    add_datasets_flag(ap)
    args = ap.parse_args()
    from clawkb.kb import KnowledgeBase
    from clawkb.retrieve.pipeline import retriever_for

    acc: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0])
    wrap(acc)
    src = Path(args.kb).resolve()
    if args.synth:
        src = synth_kb(args.synth, src)
    work = private_copy(src, Path(args.work).resolve())
    (work / "config.yaml").write_text("retrieval:\n  cache_size: 0\n")
    kb = KnowledgeBase.open(work)
    if args.synth:
        qs = synth_queries(args.synth, args.queries)
    else:
        qs = queries(datasets_dir(args.datasets), args.set, args.queries)
    r = retriever_for(kb)
    kb.search("warm up the model", limit=10)
    acc.clear()
    calling, worker, prep = [], [], []
    for _ in range(args.rounds):
        for q in qs:
            r.qvec_cache.clear()
            w0, p0 = (acc["dense channel (worker)"][1], acc["prepare (while the worker runs)"][1])
            c = time.thread_time()
            kb.search(q, limit=10, snippets=False)
            calling.append((time.thread_time() - c) * 1000)
            worker.append((acc["dense channel (worker)"][1] - w0) * 1000)
            prep.append((acc["prepare (while the worker runs)"][1] - p0) * 1000)
    kb.close()
    n = len(calling)
    print(f"{n} searches, load {os.getloadavg()[0]:.1f}; per search (mean over searches)")
    print(f"{'stage':42s} {'thread CPU ms':>13s} {'wall ms':>8s} {'calls':>6s}")
    for _, _, label in STAGES:
        if label in acc:
            w, c, k = acc[label]
            print(f"{label:42s} {c * 1000 / n:13.3f} {w * 1000 / n:8.3f} {k / n:6.2f}")
    a, w, p = np.array(calling), np.array(worker), np.array(prep)
    print(f"calling thread CPU p50 {median(a):.2f} | worker CPU p50 {median(w):.2f}"
          f" | prepare p50 {median(p):.2f}")  # fmt: skip
    serial, overlapped = a + w, a + np.maximum(0.0, w - p)
    print(f"critical path, serial: p50 {np.median(serial):.2f} p95 {np.percentile(serial, 95):.2f}")
    print(f"critical path, overlapped: p50 {np.median(overlapped):.2f}"
          f" p95 {np.percentile(overlapped, 95):.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
