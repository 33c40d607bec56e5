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
from clawkb.evaluate.golden import GoldenQuery, load_golden
from clawkb.knowledge.search import OFF
from clawkb.knowledge.stages import KnowledgeWeights, refine
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
    return {
        "queries": len(queries),
        "fit": {"default": _mrr(kb, fit, cands, default), "tuned": best_score},
        "held_out": {
            "default": _mrr(kb, held, cands, default),
            "tuned": _mrr(kb, held, cands, best),
        },
        "weights": {"graph_weight": best.graph, "trust_weights": dict(best.trust)},
    }


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
