"""Trust tiers in ranking: a fusion weight per tier, a minimum tier, strict priority.

These work on any ranked hit list (the output of a search stage), so the
search pipeline applies them as one stage; ``--explain`` shows each hit's
tier and weight under ``explanation["trust"]``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from clawkb.knowledge import at_least, tier_rank
from clawkb.types import Hit


def apply_trust(
    hits: Sequence[Hit],
    weights: Mapping[str, float],
    *,
    min_trust: str | None = None,
    strict: bool = False,
    explain: bool = False,
) -> list[Hit]:
    """Hits re-scored by tier weight (``score * weight``), filtered to ``min_trust`` and
    above, re-ranked; with ``strict`` every hit of a higher tier comes first."""
    out: list[Hit] = []
    for hit in hits:
        if min_trust and not at_least(hit.trust, min_trust):
            continue
        w = float(weights.get(hit.trust or "", 1.0))
        exp = hit.explanation
        if explain:
            exp = {**(exp or {}), "trust": {"tier": hit.trust, "weight": w}}
        out.append(dataclasses.replace(hit, score=hit.score * w, explanation=exp))
    if strict:
        out.sort(key=lambda h: (tier_rank(h.trust), -h.score))
    else:
        out.sort(key=lambda h: -h.score)
    return [dataclasses.replace(h, rank=i) for i, h in enumerate(out, start=1)]
