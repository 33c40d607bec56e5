"""Knowledge stages on the four shared datasets (issue 12): no loss, and domain routing.

* no-op check: each dataset indexed into its own KB (lexical); nDCG@10 of the
  plain search vs the search with every knowledge stage forced on (trust band,
  tier weights, graph channel, routing). The datasets have one tier, no links
  and no domains, so the stages must change nothing: the script counts the
  queries whose top 10 differ at all, not only the mean.
* routing on real data: one KB with a slice of each dataset as a domain
  (``cmrc``, ``qbqtc``, ``cranfield``, ``msmarco``: two Chinese, two English);
  routing accuracy (the query's own dataset among the routed domains) and
  nDCG@10 with routing vs without.

    .venv/bin/python bench/knowledge_shared.py [--datasets DIR] [--queries 300]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from clawkb import KnowledgeBase
from clawkb.evaluate.beir import load_beir
from clawkb.evaluate.metrics import ndcg_at_k
from clawkb.evaluate.runner import rank_documents
from clawkb.kb import TextRecord
from clawkb.knowledge.router import DomainRouter, confirm
from clawkb.knowledge.search import OFF, KnowledgeOptions
from shared_data import add_datasets_flag, datasets_dir

NAMES = {
    "cmrc2018-dev": "cmrc",
    "qbqtc-dev": "qbqtc",
    "cranfield": "cranfield",
    "agentset-msmarco": "msmarco",
}
ALL_ON = KnowledgeOptions(route=True, graph=True)  # every stage asked for explicitly


def noop_check(folder: Path, tmp: Path, max_queries: int) -> dict[str, Any]:
    ds = load_beir(folder)
    queries = ds.queries[:max_queries]
    kb = KnowledgeBase.open(tmp / ds.name, create=True)
    kb.index_texts([TextRecord(path=d.id, text=d.text, title=d.title) for d in ds.docs])
    out: dict[str, Any] = {"dataset": ds.name, "docs": len(ds.docs), "queries": len(queries)}
    rankings = {}
    for label, opts in (("off", OFF), ("on", ALL_ON)):
        t0 = time.perf_counter()
        rankings[label] = [rank_documents(kb, q.text, 10, {"knowledge": opts}) for q in queries]
        out[f"ms_{label}"] = (time.perf_counter() - t0) * 1000 / len(queries)
        nd = [ndcg_at_k(r, q.qrels, 10) for r, q in zip(rankings[label], queries, strict=True)]
        out[f"ndcg_{label}"] = sum(nd) / len(nd)
    out["changed"] = sum(a != b for a, b in zip(rankings["off"], rankings["on"], strict=True))
    kb.close()
    return out


def domain_set(root: Path, tmp: Path, per_domain: int, docs_per_domain: int) -> dict[str, Any]:
    """A 4-domain KB from slices of the shared sets; routing accuracy and nDCG@10."""
    docs = tmp / "domains" / "docs"
    cases = []
    for folder, name in NAMES.items():
        ds = load_beir(root / folder)
        queries = [q for q in ds.queries if q.qrels][:per_domain]
        want = {d for q in queries for d in q.qrels}
        keep = [d for d in ds.docs if d.id in want]
        keep += [d for d in ds.docs if d.id not in want][: max(0, docs_per_domain - len(keep))]
        (docs / name).mkdir(parents=True, exist_ok=True)
        for d in keep:
            text = f"# {d.title}\n\n{d.text}\n" if d.title else f"{d.text}\n"
            (docs / name / f"{_safe(d.id)}.md").write_text(text, encoding="utf-8")
        for q in queries:
            qrels = {f"{name}/{_safe(d)}.md": g for d, g in q.qrels.items()}
            cases.append((q.text, name, qrels))
    home = tmp / "domains" / ".clawkb"
    home.mkdir(parents=True)
    (home / "config.yaml").write_text(
        "domains:\n" + "".join(f"  {n}: ['{n}/*']\n" for n in NAMES.values()), encoding="utf-8"
    )
    kb = KnowledgeBase.open(home, create=True)
    kb.index([docs])
    base = docs.as_posix() + "/"
    router = DomainRouter.from_store(kb.conn)
    right = alone = fallback = lost = 0
    nd_off = nd_on = 0.0
    for text, name, qrels in cases:
        route = router.route(text)
        alone += name in route.domains
        first = kb.search(text, limit=1, knowledge=OFF, snippets=False).hits
        route = confirm(route, first[0].domain if first else None)  # as the search does
        right += name in route.domains
        fallback += not route.domains
        off = [p.removeprefix(base) for p in rank_documents(kb, text, 10, {"knowledge": OFF})]
        on = [p.removeprefix(base) for p in rank_documents(kb, text, 10, {})]  # routed
        a, b = ndcg_at_k(off, qrels, 10), ndcg_at_k(on, qrels, 10)
        nd_off, nd_on, lost = nd_off + a, nd_on + b, lost + (b < a - 1e-9)
    kb.close()
    n = len(cases)
    return {
        "queries": n,
        "accuracy": right / n,
        "router_alone": alone / n,
        "fallback": fallback / n,
        "ndcg_plain": nd_off / n,
        "ndcg_routed": nd_on / n,
        "lost": lost,
    }


def _safe(doc_id: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in doc_id)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_datasets_flag(ap)
    ap.add_argument("--queries", type=int, default=300, help="queries per dataset (no-op)")
    ap.add_argument("--domain-queries", type=int, default=20, help="queries per domain")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "knowledge-shared.md"))
    args = ap.parse_args()
    root = datasets_dir(args.datasets)
    if not all((root / f).is_dir() for f in NAMES):
        sys.exit(f"shared datasets not found under {root} (use --datasets DIR)")
    with tempfile.TemporaryDirectory() as t:
        rows = [noop_check(root / f, Path(t), args.queries) for f in NAMES]
        dom = domain_set(root, Path(t), args.domain_queries, 250)
    lines = [
        "# Knowledge stages on the shared datasets (bench/knowledge_shared.py)",
        "",
        "Lexical search, nDCG@10, first queries of each set; `on` forces every knowledge"
        " stage (trust tiers and band, graph channel, routing). One tier, no links, no"
        " domains there: the stages must be a no-op (changed = queries whose top 10 differ).",
        "",
        "| dataset | docs | queries | nDCG@10 off | on | Δ | changed | ms/query off | on |",
        "|---|---|---|---|---|---|---|---|---|",
        *(
            f"| {r['dataset']} | {r['docs']} | {r['queries']} | {r['ndcg_off']:.4f} |"
            f" {r['ndcg_on']:.4f} | {r['ndcg_on'] - r['ndcg_off']:+.4f} | {r['changed']} |"
            f" {r['ms_off']:.1f} | {r['ms_on']:.1f} |"
            for r in rows
        ),
        "",
        f"Routing on real data: one KB, four domains (a slice of each set, ≤ 250 docs each),"
        f" {dom['queries']} queries (each set's first judged ones): routing accuracy"
        f" {dom['accuracy']:.1%} (target ≥ 90 %; the router alone, before the search"
        f" checks it against its best hit: {dom['router_alone']:.1%}), fallback to all"
        f" {dom['fallback']:.1%};"
        f" nDCG@10 routed {dom['ndcg_routed']:.4f} vs plain {dom['ndcg_plain']:.4f}"
        f" (target ≥), queries that lose by routing: {dom['lost']}.",
        "",
        "    .venv/bin/python bench/knowledge_shared.py",
        "",
    ]
    Path(args.out).write_text("\n".join(lines), encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
