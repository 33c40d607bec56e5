"""``clawkb tune``: fit the knowledge weights (tier weights, graph weight) to a golden file.

The golden queries are split in two halves (alternating entries); a grid
search picks the weights with the best MRR@10 on the first half, and the
report compares them with the defaults on the held-out second half, so a fit
that only memorises its queries shows. ``write`` stores the winner under
``knowledge:`` in ``config.yaml`` (other settings kept).
"""

from __future__ import annotations

import itertools
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from clawkb.config import Config
from clawkb.knowledge.search import OFF
from clawkb.knowledge.stages import KnowledgeWeights, refine
from clawkb.retrieve.golden import GoldenQuery, load_golden
from clawkb.store import knowledge_repo
from clawkb.types import Hit

if TYPE_CHECKING:
    from clawkb.kb import KnowledgeBase

DEPTH = 30
GRID = {
    "graph": (0.0, 0.5, 0.7, 0.9),
    "community": (0.3, 0.6, 1.0),
    "learned": (0.5, 0.75, 1.0),
}


def _mrr(
    kb: KnowledgeBase, queries: list[GoldenQuery], cands: dict[str, list[Hit]], w: KnowledgeWeights
) -> float:
    total = 0.0
    for q in queries:
        ranked = refine(kb, q.query, cands[q.query], w, limit=10)
        rank = next((i for i, h in enumerate(ranked, start=1) if q.matches(h)), None)
        total += 1 / rank if rank else 0.0
    return total / len(queries) if queries else 0.0


def tune(kb: KnowledgeBase, golden: str | Path) -> dict[str, Any]:
    queries = list(load_golden(golden).queries)
    fit, held = queries[0::2], queries[1::2]
    cands = {q.query: kb.search(q.query, limit=DEPTH, knowledge=OFF).hits for q in queries}
    default = KnowledgeWeights.of(kb)
    best, best_score = default, _mrr(kb, fit, cands, default)
    for graph, community, learned in itertools.product(*GRID.values()):
        trust = {**default.trust, "community": community, "learned": learned}
        w = replace(default, trust=trust, graph=graph)
        score = _mrr(kb, fit, cands, w)
        if score > best_score + 1e-9:
            best, best_score = w, score
    domain_weights, per_domain = _tune_domains(kb, queries, best)
    return {
        "domains": per_domain,
        "queries": len(queries),
        "fit": {"default": _mrr(kb, fit, cands, default), "tuned": best_score},
        "held_out": {
            "default": _mrr(kb, held, cands, default),
            "tuned": _mrr(kb, held, cands, best),
        },
        "weights": {
            "graph_weight": best.graph,
            "trust_weights": dict(best.trust),
            **({"domain_weights": domain_weights} if domain_weights else {}),
        },
    }


FUSION_GRID = (0.5, 1.0, 2.0)
GRAPH_GRID = (0.0, 0.5, 0.9)
MIN_DOMAIN_QUERIES = 4


def _domain_of(kb: KnowledgeBase, q: GoldenQuery) -> str | None:
    want = q.expect_path.replace("\\", "/").lstrip("/")
    return knowledge_repo.domain_of_path(kb.conn, want)


def _tune_domains(
    kb: KnowledgeBase, queries: list[GoldenQuery], base: KnowledgeWeights
) -> tuple[dict[str, dict[str, float]], dict[str, dict[str, float]]]:
    """Per domain with enough golden queries: lexical/dense fusion weights (when the KB
    has vectors) and graph weight, fitted on half its queries, checked on the other."""
    from clawkb.embed import vectors

    by_domain: dict[str, list[GoldenQuery]] = {}
    for q in queries:
        d = _domain_of(kb, q)
        if d:
            by_domain.setdefault(d, []).append(q)
    dense = vectors.stored_signature(kb.conn) is not None
    pairs = [(a, b) for a in FUSION_GRID for b in FUSION_GRID] if dense else [(1.0, 1.0)]
    fitted: dict[str, dict[str, float]] = {}
    report: dict[str, dict[str, float]] = {}
    for domain, qs in sorted(by_domain.items()):
        if len(qs) < MIN_DOMAIN_QUERIES:
            continue
        fit, held = qs[0::2], qs[1::2]
        scored = []
        for wl, wd in pairs:
            opts: dict[str, Any] = {"w_lexical": wl, "w_dense": wd} if dense else {}
            cands = {
                q.query: kb.search(q.query, limit=DEPTH, knowledge=OFF, **opts).hits for q in qs
            }
            for g in GRAPH_GRID:
                w = replace(base, graph=g)
                scored.append((_mrr(kb, fit, cands, w), -abs(wl - wd), wl, wd, g, cands))
        default = next(x for x in scored if x[2] == 1.0 and x[3] == 1.0 and x[4] == GRAPH_GRID[0])
        top = max(scored, key=lambda x: (x[0], x[1]))
        _, _, wl, wd, g, cands = top
        report[domain] = {
            "queries": len(qs),
            "held_default": _mrr(kb, held, default[5], replace(base, graph=base.graph)),
            "held_tuned": _mrr(kb, held, cands, replace(base, graph=g)),
        }
        fitted[domain] = {"w_lexical": wl, "w_dense": wd, "graph_weight": g}
    return fitted, report


def write_weights(kb: KnowledgeBase, weights: dict[str, Any]) -> Path:
    """Merge ``weights`` into ``knowledge:`` of ``config.yaml`` (validated before writing)."""
    path = kb.home / "config.yaml"
    data = yaml.safe_load(path.read_text(encoding="utf-8")) if path.exists() else {}
    data = data if isinstance(data, dict) else {}
    section = dict(data.get("knowledge") or {})
    section.update(weights)
    data["knowledge"] = section
    Config.from_dict(data, str(path))  # never write a file the next run would refuse
    tmp = path.with_suffix(".yaml.tmp")
    tmp.write_text(yaml.safe_dump(data, allow_unicode=True, sort_keys=False), encoding="utf-8")
    tmp.replace(path)
    return path
