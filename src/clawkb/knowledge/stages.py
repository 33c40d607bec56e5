"""The knowledge stages applied to a ranked hit list: domain filter, trust tiers, graph.

One function so the search pipeline, ``clawkb tune`` and the benchmarks run
exactly the same steps in the same order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from clawkb.knowledge.graph import expand
from clawkb.knowledge.ranking import apply_trust
from clawkb.types import Hit

if TYPE_CHECKING:
    from clawkb.kb import KnowledgeBase


@dataclass(frozen=True)
class KnowledgeWeights:
    trust: Mapping[str, float] = field(default_factory=dict)
    graph: float = 0.0
    strict: bool = False
    band: float = 1.0  # trust band (clawkb.knowledge.ranking): 1 = weights alone

    @classmethod
    def of(cls, kb: KnowledgeBase) -> KnowledgeWeights:
        k = kb.config.knowledge
        trust = {str(t): w for t, w in k.trust_weights.items()}
        return cls(trust, k.graph_weight, k.strict_priority, k.trust_band)


def refine(
    kb: KnowledgeBase,
    query: str,
    hits: Sequence[Hit],
    weights: KnowledgeWeights,
    *,
    domains: Sequence[str] = (),
    min_trust: str | None = None,
    limit: int | None = None,
    explain: bool = False,
    unassigned: bool = False,
) -> list[Hit]:
    """``hits`` kept to ``domains`` (when given; ``unassigned`` keeps hits of no domain
    too, as routing does), re-weighted by tier, then the graph channel."""

    def inside(h: Hit) -> bool:
        return not domains or h.domain in domains or (unassigned and h.domain is None)

    kept = [h for h in hits if inside(h)]
    strict, band = weights.strict, weights.band
    ranked = apply_trust(
        kept, weights.trust, min_trust=min_trust, strict=strict, band=band, explain=explain
    )
    if weights.graph > 0:
        ranked = expand(kb, query, ranked, weight=weights.graph, explain=explain)
        if min_trust or domains:  # passages the graph reached obey the same filters
            ranked = [h for h in ranked if inside(h)]
        ranked = apply_trust(ranked, {}, min_trust=min_trust, strict=strict, band=band)
    return ranked[:limit] if limit else ranked
