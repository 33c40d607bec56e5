"""What building hits costs (issue 14 item 4), per query, in CPU time: two trees, one run.

For the hits a query gets, times (best of ``--rounds``):

* ``rows``: the store rows of its hits (``repo.chunks_by_ids``, one SELECT);
* ``hits``: ``make_hit`` for each (anchor, snippet, highlights, matched terms),
  ``cold`` with the prepared-text caches emptied first (a chunk seen for the
  first time) and ``warm`` (a long-running server meeting it again);
* ``hits_nosnip``: the same without snippets (what ``clawkb eval`` builds);
* ``search`` / ``raw``: the whole ``kb.search`` and the bare lexical top-k;
* ``eval_300``: ``kb.search(limit=300, snippets=False)``, what ``clawkb eval``
  runs per query, on each ``--eval-kb`` (a KB and a JSONL file of queries).

Each tree runs in its own process (``PYTHONPATH=<tree>/src``), alternating
batches so both see the same machine load::

    python bench/hit_building.py --kb /tmp/po100k --compare <main checkout>/src \\
        --eval-kb /tmp/ex-kb:queries.jsonl --out bench/results/hit-building.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def _clear_caches() -> None:
    """Forget every prepared chunk text (names differ between trees)."""
    from clawkb.retrieve import hits

    for name in ("_view", "_head"):
        fn = getattr(hits, name, None)
        if hasattr(fn, "cache_clear"):
            fn.cache_clear()  # type: ignore[union-attr]
    views = getattr(hits, "_VIEWS", None)
    if views is not None:
        views.clear()


def _queries(spec: str, n: int) -> list[str]:
    if spec == "synth":
        sys.path.insert(0, str(HERE))
        import synth

        _, qs = synth.generate(100_000, n_queries=n, seed=13)
        return [q.text for q in qs]
    with open(spec, encoding="utf-8") as f:
        return [json.loads(line)["text"] for line in f if line.strip()][:n]


def worker(args: argparse.Namespace) -> None:
    """Answer ``<measure> <kb index>`` lines on stdin with per-query ms lists (JSON)."""
    from clawkb.kb import KnowledgeBase
    from clawkb.retrieve.hits import make_hit
    from clawkb.text import tokenize

    main_kb = KnowledgeBase.open(args.kb)
    queries = _queries("synth", args.queries)
    got = [main_kb.search(q, limit=args.k) for q in queries]
    plan = [(r.chunk_ids, r.query_tokens, [h.score for h in r.hits]) for r in got]
    evals = []
    for spec in args.eval_kb:
        path, qfile = spec.split(":", 1)
        evals.append((KnowledgeBase.open(path), _queries(qfile, 10_000)))
    clock = time.process_time

    def per_query(fn: Any, items: list[Any], rounds: int, cold: bool = False) -> list[float]:
        best = [float("inf")] * len(items)
        for _ in range(rounds):
            if cold:
                _clear_caches()
            for i, item in enumerate(items):
                t = clock()
                fn(item)
                best[i] = min(best[i], (clock() - t) * 1000)
        return best

    def hits(item: Any, snippet: bool = True) -> None:
        ids, tokens, scores = item
        rows = main_kb.repo.chunks_by_ids(ids)
        for rank, (cid, score) in enumerate(zip(ids, scores, strict=True), 1):
            make_hit(rows[cid], rank, score, tokens, snippet=snippet)

    measures: dict[str, Any] = {
        "rows": lambda: per_query(lambda it: main_kb.repo.chunks_by_ids(it[0]), plan, args.rounds),
        "hits_cold": lambda: per_query(hits, plan, args.rounds, cold=True),
        "hits_warm": lambda: per_query(hits, plan, args.rounds),
        "hits_nosnip_cold": lambda: per_query(
            lambda it: hits(it, snippet=False), plan, args.rounds, cold=True
        ),
        "search": lambda: per_query(
            lambda q: main_kb.search(q, limit=args.k), queries, args.rounds
        ),
        "raw": lambda: per_query(
            lambda q: main_kb.lexical.search(tokenize(q), k=args.k), queries, args.rounds
        ),
    }
    for i, (kb, qs) in enumerate(evals):
        measures[f"eval_300_{i}"] = lambda kb=kb, qs=qs: per_query(
            lambda q: kb.search(q, limit=300, snippets=False), qs, 1
        )
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        print(json.dumps(measures[line.strip()]()), flush=True)


def _p50(ms: list[float]) -> float:
    return round(statistics.median(ms), 4)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kb", type=Path, required=True, help="synthetic KB (pipeline_overhead.py)")
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--eval-kb", action="append", default=[], help="KB_DIR:QUERIES.jsonl")
    ap.add_argument("--compare", required=True, help="the reference tree's src/ folder")
    ap.add_argument("--repeat", type=int, default=3, help="alternations of the two trees")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        worker(args)
        return 0
    trees = {"branch": str(HERE.parent / "src"), "reference": str(Path(args.compare).resolve())}
    procs = {}
    for name, src in trees.items():
        cmd = [sys.executable, __file__, "--worker", "--kb", str(args.kb), "--queries",
               str(args.queries), "--rounds", str(args.rounds), "--k", str(args.k),
               "--compare", src]  # fmt: skip
        for spec in args.eval_kb:
            cmd += ["--eval-kb", spec]
        procs[name] = subprocess.Popen(
            cmd, env={**os.environ, "PYTHONPATH": src}, stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert procs[name].stdout is not None
        procs[name].stdout.readline()
    names = ["rows", "hits_cold", "hits_warm", "hits_nosnip_cold", "search", "raw"]
    names += [f"eval_300_{i}" for i in range(len(args.eval_kb))]
    best: dict[str, dict[str, list[float]]] = {n: {} for n in trees}
    for _ in range(args.repeat):
        for what in names:
            for name, p in procs.items():
                assert p.stdin is not None and p.stdout is not None
                p.stdin.write(what + "\n")
                p.stdin.flush()
                ms = json.loads(p.stdout.readline())
                old = best[name].get(what)
                best[name][what] = (
                    ms if old is None else [min(a, b) for a, b in zip(old, ms, strict=True)]
                )
    for p in procs.values():
        assert p.stdin is not None
        p.stdin.close()
        p.wait()
    sys.path.insert(0, str(HERE))
    from shared_data import shown

    out: dict[str, Any] = {
        "trees": {n: shown(t) for n, t in trees.items()}, "clock": "cpu", "k": args.k,
        "queries": args.queries, "p50_ms": {},
        "eval_kb": [":".join(shown(p) for p in spec.split(":", 1)) for spec in args.eval_kb],
    }  # fmt: skip
    for name in trees:
        p50 = {w: _p50(v) for w, v in best[name].items()}
        over = [s - r for s, r in zip(best[name]["search"], best[name]["raw"], strict=True)]
        p50["search_minus_raw"] = _p50(over)
        out["p50_ms"][name] = p50
    out["ratio_branch_over_reference"] = {
        w: round(out["p50_ms"]["branch"][w] / out["p50_ms"]["reference"][w], 3)
        for w in out["p50_ms"]["branch"]
        if out["p50_ms"]["reference"].get(w)
    }
    text = json.dumps(out, indent=2)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
