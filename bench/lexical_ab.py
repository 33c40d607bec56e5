"""In-process A/B of the lexical index: CPU time per query of each search path.

    .venv/bin/python bench/lexical_ab.py --kb /tmp/kb100k --corpus bench/.cache/synth-...-100000-...

Builds a knowledge base from ``docs.txt`` of ``--corpus`` into ``--kb`` when
it has none (or its index was written by another engine version), tokenizes
the queries once, then times ``LexicalIndex.search`` (k=10) per
configuration with ``time.process_time``: passes alternate between
configurations and the best pass counts, so load from other processes hurts
every configuration alike. Every configuration must return the same top-k
lists as the first one (exactness check); a difference is reported and makes
the exit status 1. Also prints the index's size on disk.

With ``--old-src OTHER/src`` (another checkout with its native modules built
in place, reading the same index format) each round times the old tree and
this one in fresh child processes, one after the other, on the same
knowledge base; the best round of each counts, and their top-k lists must be
identical::

    .venv/bin/python bench/lexical_ab.py --kb /tmp/kb100k --corpus ... --old-src ../base/src
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from peers import dir_size  # noqa: E402

#: name -> keyword arguments of LexicalIndex.search; the keys starting with "_" are
#: not: ``_impacts`` sets ``clawkb.index.lexical.IMPACTS`` (the kernel's per-posting
#: impact cache) and ``_cold`` drops the index's caches (factors, block bounds,
#: impacts) before every pass, as a write does: one pass of distinct queries
#: then pays for filling them.
CONFIGS: dict[str, dict[str, Any]] = {
    "default": {},
    "exhaustive": {"prune": False},
    "no-impacts": {"_impacts": False},
    "cold": {"_cold": True},
    "no-impacts-cold": {"_impacts": False, "_cold": True},
}
DEFAULT_CONFIGS = "default,exhaustive"


def open_kb(kb_dir: Path, corpus: Path) -> Any:
    from clawkb.kb import KnowledgeBase, TextRecord

    create = not (kb_dir / "clawkb.sqlite").exists()
    kb = KnowledgeBase.open(kb_dir, create=create)
    if create:
        with open(corpus / "docs.txt", encoding="utf-8") as fh:
            texts = [line.rstrip("\n") for line in fh]
        t0, c0 = time.perf_counter(), time.process_time()
        kb.index_texts(TextRecord(path=f"d{i}", text=t) for i, t in enumerate(texts) if t)
        print(
            f"built {len(texts):,} docs: {time.perf_counter() - t0:.1f} s wall, "
            f"{time.process_time() - c0:.1f} s CPU (this process)",
            file=sys.stderr,
        )
    return kb


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kb", type=Path, required=True, help="knowledge base folder (reused)")
    ap.add_argument("--corpus", type=Path, required=True, help="folder with docs.txt, queries")
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--configs", default=DEFAULT_CONFIGS, help=f"of {', '.join(CONFIGS)}")
    ap.add_argument("--out", type=Path, help="also write the figures as JSON here")
    ap.add_argument("--old-src", type=Path, help="compare with the tree whose src/ is here")
    ap.add_argument("--rounds", type=int, default=3, help="old/new rounds with --old-src")
    args = ap.parse_args(argv)
    if args.old_src:
        return compare_trees(args)

    from clawkb.index import lexical
    from clawkb.text.tokenize import tokenize

    kb = open_kb(args.kb, args.corpus)
    lex = kb.lexical
    with open(args.corpus / "queries.jsonl", encoding="utf-8") as fh:
        queries = [tokenize(json.loads(line)["text"]) for line in fh if line.strip()]
    names = args.configs.split(",")
    for q in queries[:50]:  # warm the maps and caches
        lex.search(q, k=10)
    best = {n: float("inf") for n in names}
    results: dict[str, list[list[int]]] = {}
    for _ in range(args.passes):
        for n in names:
            kw = {k: v for k, v in CONFIGS[n].items() if not k.startswith("_")}
            impacts = CONFIGS[n].get("_impacts", True)
            if hasattr(lexical, "IMPACTS") and (
                impacts != lexical.IMPACTS or CONFIGS[n].get("_cold")
            ):
                lexical.IMPACTS = impacts
                lex._invalidate()
            out = []
            c0 = time.process_time()
            for q in queries:
                out.append(lex.search(q, k=10, **kw)[0])
            cpu = time.process_time() - c0
            best[n] = min(best[n], cpu * 1000 / len(queries))
            results[n] = [[int(i) for i in ids] for ids in out]
    ref = results[names[0]]
    same = {n: results[n] == ref for n in names}
    index_mb = dir_size(args.kb / "index" / "lexical") / 1e6
    digest = hashlib.sha256(json.dumps(ref).encode()).hexdigest()[:16]
    report = {
        "queries": len(queries),
        "topk_digest": digest,
        "segments": [s.n_docs for s in lex.segments],
        "cpu_ms_per_query": best,
        "identical_topk": same,
        "index_mb": round(index_mb, 1),
        "kb_mb": round(dir_size(args.kb) / 1e6, 1),
    }
    print(json.dumps(report, indent=2))
    if args.out:
        args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    kb.close()
    return 0 if all(same.values()) else 1


def compare_trees(args: argparse.Namespace) -> int:
    """Old tree vs this one, each round in fresh processes on the same KB."""
    open_kb(args.kb, args.corpus).close()  # build once, with this tree
    base = [sys.executable, __file__, "--kb", str(args.kb), "--corpus", str(args.corpus)]
    base += ["--passes", str(args.passes), "--configs", "default"]
    here_src = str(HERE.parent / "src")
    best: dict[str, float] = {"old": float("inf"), "new": float("inf")}
    digests: dict[str, set[str]] = {"old": set(), "new": set()}
    for _ in range(args.rounds):
        for name, src in (("old", str(args.old_src.resolve())), ("new", here_src)):
            env = {**os.environ, "PYTHONPATH": src}
            out = subprocess.run(base, env=env, capture_output=True, text=True, check=True)
            rep = json.loads(out.stdout)
            best[name] = min(best[name], rep["cpu_ms_per_query"]["default"])
            digests[name].add(rep["topk_digest"])
    same = len(digests["old"] | digests["new"]) == 1
    report = {
        "old_src": str(args.old_src),
        "cpu_ms_per_query": best,
        "new_over_old": best["new"] / best["old"],
        "identical_topk": same,
    }
    print(json.dumps(report, indent=2))
    if args.out:
        args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
