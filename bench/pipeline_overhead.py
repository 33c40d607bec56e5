"""What the one search pipeline costs over the raw BM25F top-k (issue 9, issue 14 item 4).

Times, on one knowledge base, per query:

* ``raw``: ``kb.lexical.search`` top-k ids (the kernel alone);
* ``search``: ``kb.search(q, limit=k)`` — lexical pipeline, store rows, hits
  with anchors, snippets and highlights;
* ``search_nosnip``: the same without snippets (what evaluation needs), when
  the code under test supports it;
* ``deep``: ``kb.search(q, limit=300)``, the depth ``clawkb eval`` searches at.

Compare two versions of the code in the same run by running this script twice
on the same KB, once per source tree (``PYTHONPATH=<tree>/src``); ``--kb``
keeps the KB between runs and builds it (synthetic corpus, bench/synth.py) the
first time. Example::

    python bench/pipeline_overhead.py --kb /tmp/po-kb --docs 100000 --label branch \\
        --out bench/results/pipeline-overhead-branch.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))


def _percentiles(ms: list[float]) -> dict[str, float]:
    s = sorted(ms)
    return {
        "n": len(s),
        "p50_ms": round(statistics.median(s), 4),
        "p95_ms": round(s[int(0.95 * (len(s) - 1))], 4),
        "mean_ms": round(statistics.fmean(s), 4),
    }


def _time(fn: Callable[[str], Any], queries: list[str], rounds: int) -> list[float]:
    """Per-query best of ``rounds`` (round-robin over the queries, so caches are fair)."""
    best = [float("inf")] * len(queries)
    for _ in range(rounds):
        for i, q in enumerate(queries):
            t = time.perf_counter()
            fn(q)
            best[i] = min(best[i], (time.perf_counter() - t) * 1000)
    return best


def build(kb_dir: Path, docs: int) -> None:
    import synth
    from clawkb.kb import KnowledgeBase, TextRecord

    texts, _ = synth.generate(docs, n_queries=0, seed=13)
    t = time.perf_counter()
    with KnowledgeBase.open(kb_dir, create=True) as kb:
        kb.index_texts(TextRecord(path=f"d{i}", text=x) for i, x in enumerate(texts))
    print(f"built {docs:,} docs in {time.perf_counter() - t:.1f} s", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kb", type=Path, required=True, help="KB folder (built when missing)")
    ap.add_argument("--docs", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=500)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--label", default="")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)

    import clawkb
    import synth
    from clawkb.kb import KnowledgeBase
    from clawkb.text import tokenize

    if not (args.kb / "clawkb.sqlite").exists():
        build(args.kb, args.docs)
    _, qs = synth.generate(args.docs, n_queries=args.queries, seed=13)
    queries = [q.text for q in qs]
    with KnowledgeBase.open(args.kb) as kb:
        chunks = kb.status()["chunks"]
        for q in queries[:50]:  # warm the page cache and the lazily loaded parts
            kb.search(q, limit=args.k)
        raw = _time(lambda q: kb.lexical.search(tokenize(q), k=args.k), queries, args.rounds)
        full = _time(lambda q: kb.search(q, limit=args.k), queries, args.rounds)
        try:
            kb.search(queries[0], limit=args.k, snippets=False)
            nosnip = _time(lambda q: kb.search(q, limit=args.k, snippets=False), queries, 1)
        except TypeError:  # a version without the option
            nosnip = None
        few = queries[: max(20, len(queries) // 10)]
        deep = _time(lambda q: kb.search(q, limit=300), few, 1)
        try:
            deep_nosnip = _time(lambda q: kb.search(q, limit=300, snippets=False), few, 1)
        except TypeError:
            deep_nosnip = None
    over = [f - r for f, r in zip(full, raw, strict=True)]
    result = {
        "label": args.label,
        "clawkb_source": str(Path(clawkb.__file__).parent),
        "chunks": chunks,
        "k": args.k,
        "raw_topk": _percentiles(raw),
        "search": _percentiles(full),
        "search_minus_raw": _percentiles(over),
        "search_nosnippets": _percentiles(nosnip) if nosnip else None,
        "deep_300": _percentiles(deep),
        "deep_300_nosnippets": _percentiles(deep_nosnip) if deep_nosnip else None,
    }
    text = json.dumps(result, indent=2)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
