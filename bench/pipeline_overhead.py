"""What the one search pipeline costs over the raw BM25F top-k (issue 9, issue 14 item 4).

Times, on one knowledge base, per query:

* ``raw``: ``kb.lexical.search`` top-k ids (the kernel alone);
* ``raw_expanded``: the same kernel call with the query's glossary translations
  (rewritten and balanced as the pipeline does, outside the timing): what the
  lexical stage of ``search`` asks the kernel, so ``search − raw_expanded`` is
  the cost of everything around the kernel;
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
from shared_data import shown


def _percentiles(ms: list[float]) -> dict[str, float]:
    s = sorted(ms)
    return {
        "n": len(s),
        "p50_ms": round(statistics.median(s), 4),
        "p95_ms": round(s[int(0.95 * (len(s) - 1))], 4),
        "mean_ms": round(statistics.fmean(s), 4),
    }


#: The clock per-query times are read from: wall (``perf_counter``) or this
#: process's CPU time (``--clock cpu``: steadier on a machine shared with other work).
CLOCKS: dict[str, Callable[[], float]] = {"wall": time.perf_counter, "cpu": time.process_time}
_clock = time.perf_counter


def _time(fn: Callable[[str], Any], queries: list[str], rounds: int) -> list[float]:
    """Per-query best of ``rounds`` (round-robin over the queries, so caches are fair)."""
    best = [float("inf")] * len(queries)
    for _ in range(rounds):
        for i, q in enumerate(queries):
            t = _clock()
            fn(q)
            best[i] = min(best[i], (_clock() - t) * 1000)
    return best


def build(kb_dir: Path, docs: int) -> None:
    import synth
    from clawkb.kb import KnowledgeBase, TextRecord

    texts, _ = synth.generate(docs, n_queries=0, seed=13)
    t = time.perf_counter()
    with KnowledgeBase.open(kb_dir, create=True) as kb:
        kb.index_texts(TextRecord(path=f"d{i}", text=x) for i, x in enumerate(texts))
    print(f"built {docs:,} docs in {time.perf_counter() - t:.1f} s", file=sys.stderr)


MEASURES = (
    "raw", "raw_expanded", "search", "search_nosnippets", "deep_300", "deep_300_nosnippets"
)  # fmt: skip


def expanded_terms(kb: Any, query: str) -> tuple[list[str], list[float] | None]:
    """The tokens and weights the pipeline's lexical stage searches for ``query``."""
    from clawkb.retrieve.crossling import balance
    from clawkb.retrieve.pipeline import retriever_for
    from clawkb.retrieve.rewrite import rewrite
    from clawkb.text.glossary import bundled_glossary

    r = retriever_for(kb)
    s = r.settings
    rw = rewrite(query, r.synonyms(s), bundled_glossary() if s.glossary else None)
    rw = balance(kb.lexical, rw, s.glossary_share, None)
    return rw.tokens, (rw.weights if rw.expansions else None)


def worker(kb_dir: Path, docs: int, n_queries: int, k: int) -> None:
    """Answer ``<measure> <start> <end>`` lines on stdin with per-query ms (JSON) on stdout."""
    import synth
    from clawkb.kb import KnowledgeBase
    from clawkb.text import tokenize

    _, qs = synth.generate(docs, n_queries=n_queries, seed=13)
    queries = [q.text for q in qs]
    kb = KnowledgeBase.open(kb_dir)
    # a tree without the option takes it as a retrieval setting and still builds snippets
    probe = kb.search(queries[0], limit=k, snippets=False).hits
    has_snippets_option = bool(probe) and probe[0].snippet == ""
    terms = {q: expanded_terms(kb, q) for q in queries}
    fns: dict[str, Callable[[str], Any]] = {
        "raw": lambda q: kb.lexical.search(tokenize(q), k=k),
        "raw_expanded": lambda q: kb.lexical.search(terms[q][0], k=k, term_weights=terms[q][1]),
        "search": lambda q: kb.search(q, limit=k),
        "deep_300": lambda q: kb.search(q, limit=300),
    }
    if has_snippets_option:
        fns["search_nosnippets"] = lambda q: kb.search(q, limit=k, snippets=False)
        fns["deep_300_nosnippets"] = lambda q: kb.search(q, limit=300, snippets=False)
    for q in queries[:50]:
        kb.search(q, limit=k)
    print(
        json.dumps({"ready": True, "source": str(Path(kb.__class__.__module__).name)}), flush=True
    )
    for line in sys.stdin:
        what, a, b = line.split()
        fn = fns.get(what)
        out = _time(fn, queries[int(a) : int(b)], 1) if fn else None
        print(json.dumps(out), flush=True)


def compare(args: argparse.Namespace) -> dict[str, Any]:
    """Two workers (this tree and ``--compare``), given the same batches in turn.

    Alternating small batches puts both under the same machine load, so the
    ratio holds even on a busy machine; each query's time is the best of the
    rounds (``first_run``: the first time each query ran, caches cold).
    """
    import os
    import subprocess

    here = str(Path(__file__).resolve().parents[1] / "src")
    trees = {"branch": here, "reference": str(Path(args.compare).resolve())}
    # a reference tree with an older store schema or index format gets its own KB
    # (same synthetic corpus, built by its own code)
    kbs = {"branch": args.kb, "reference": args.compare_kb or args.kb}
    if not (kbs["reference"] / "clawkb.sqlite").exists():  # built by the reference's own code
        code = (
            "import sys; from pathlib import Path; sys.path.insert(0, sys.argv[1]);"
            " import pipeline_overhead as po; po.build(Path(sys.argv[2]), int(sys.argv[3]))"
        )
        here_bench = str(Path(__file__).resolve().parent)
        subprocess.run(
            [sys.executable, "-c", code, here_bench, str(kbs["reference"]), str(args.docs)],
            env={**os.environ, "PYTHONPATH": trees["reference"]},
            check=True,
        )
    procs = {}
    for name, src in trees.items():
        env = {**os.environ, "PYTHONPATH": src}
        cmd = [sys.executable, __file__, "--worker", "--kb", str(kbs[name]), "--docs",
               str(args.docs), "--queries", str(args.queries), "--k", str(args.k),
               "--clock", args.clock]  # fmt: skip
        procs[name] = subprocess.Popen(
            cmd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        assert procs[name].stdout is not None
        procs[name].stdout.readline()
    best: dict[str, dict[str, list[float]]] = {n: {} for n in trees}
    first: dict[str, dict[str, list[float]]] = {n: {} for n in trees}
    batch = 25
    for what in MEASURES:
        deep = what.startswith("deep")
        total = min(args.queries, max(50, args.queries // 5)) if deep else args.queries
        rounds = 1 if deep else args.rounds
        for rnd in range(rounds):
            for a in range(0, total, batch):
                for name, p in procs.items():
                    assert p.stdin is not None and p.stdout is not None
                    p.stdin.write(f"{what} {a} {min(a + batch, total)}\n")
                    p.stdin.flush()
                    got = json.loads(p.stdout.readline())
                    if got is None:
                        continue
                    cur = best[name].setdefault(what, [float("inf")] * total)
                    for i, ms in enumerate(got):
                        cur[a + i] = min(cur[a + i], ms)
                    if rnd == 0:  # the first time each query runs (hit caches cold)
                        first[name].setdefault(what, []).extend(got)
    for p in procs.values():
        assert p.stdin is not None
        p.stdin.close()
        p.wait()
    out: dict[str, Any] = {
        "trees": {n: shown(t) for n, t in trees.items()}, "queries": args.queries, "rounds": args.rounds, "clock": args.clock,
    }  # fmt: skip
    for name in trees:
        out[name] = {w: _percentiles(v) for w, v in best[name].items()}
        out[name]["first_run"] = {w: _percentiles(v) for w, v in first[name].items()}
        for raw in ("raw", "raw_expanded"):
            if raw in best[name] and "search" in best[name]:
                over = [s - r for s, r in zip(best[name]["search"], best[name][raw], strict=True)]
                out[name][f"search_minus_{raw}"] = _percentiles(over)
    ratios = {}
    for w in MEASURES:
        if w in out["branch"] and w in out["reference"]:
            ratios[w] = round(out["branch"][w]["p50_ms"] / out["reference"][w]["p50_ms"], 3)
            ratios[w + "_first_run"] = round(
                out["branch"]["first_run"][w]["p50_ms"]
                / out["reference"]["first_run"][w]["p50_ms"],
                3,
            )
    for over in ("search_minus_raw", "search_minus_raw_expanded"):
        if over in out["branch"] and over in out["reference"]:
            ratios[over] = round(
                out["branch"][over]["p50_ms"] / out["reference"][over]["p50_ms"], 3
            )
    out["p50_ratio_branch_over_reference"] = ratios
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kb", type=Path, required=True, help="KB folder (built when missing)")
    ap.add_argument("--docs", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=500)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--label", default="")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--compare", help="another tree's src/ folder: A/B against it in one run")
    ap.add_argument(
        "--compare-kb", type=Path, help="KB folder for the --compare tree (default: --kb)"
    )
    ap.add_argument("--clock", choices=sorted(CLOCKS), default="wall")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    global _clock
    _clock = CLOCKS[args.clock]
    if args.worker:
        worker(args.kb, args.docs, args.queries, args.k)
        return 0
    if args.compare:
        if not (args.kb / "clawkb.sqlite").exists():
            build(args.kb, args.docs)
        result = compare(args)
        text = json.dumps(result, indent=2)
        if args.out:
            args.out.write_text(text + "\n", encoding="utf-8")
        print(text)
        return 0

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
        probe = kb.search(queries[0], limit=args.k, snippets=False).hits
        light = bool(probe) and probe[0].snippet == ""  # False: a tree without the option
        few = queries[: max(20, len(queries) // 10)]
        nosnip = deep_nosnip = None
        if light:
            nosnip = _time(lambda q: kb.search(q, limit=args.k, snippets=False), queries, 1)
            deep_nosnip = _time(lambda q: kb.search(q, limit=300, snippets=False), few, 1)
        deep = _time(lambda q: kb.search(q, limit=300), few, 1)
    over = [f - r for f, r in zip(full, raw, strict=True)]
    result = {
        "label": args.label,
        "clock": args.clock,
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
