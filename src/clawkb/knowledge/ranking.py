"""Trust tiers in ranking: a weight per tier, a trust band, a minimum tier, strict priority.

These work on any ranked hit list (the output of a search stage), so the
search pipeline applies them as one stage; ``--explain`` shows each hit's
tier and weight under ``explanation["trust"]``.

The tier weight multiplies a hit's score (a prior). The *band* then decides
the order between tiers: going down the list, the next hit is the most
trusted one whose score is at least ``band`` times the best score left, so a
lower-tier hit stays above a higher-tier one only when it scores more than
``1 / band`` times as much. ``band = 1`` is the weights alone (tiers break
exact ties only); ``band = 0`` is strict priority (every hit of a higher tier
first). With one tier in the list the order is the score order, unchanged.
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
    band: float = 1.0,
    explain: bool = False,
) -> list[Hit]:
    """Hits re-scored by tier weight (``score * weight``), filtered to ``min_trust`` and
    above, ordered by the trust band (``strict``: band 0, every higher tier first)."""
    out: list[Hit] = []
    for hit in hits:
        if min_trust and not at_least(hit.trust, min_trust):
            continue
        w = float(weights.get(hit.trust or "", 1.0))
        if explain:
            exp = {**(hit.explanation or {}), "trust": {"tier": hit.trust, "weight": w}}
            hit = dataclasses.replace(hit, score=hit.score * w, explanation=exp)
        elif w != 1.0:
            hit = dataclasses.replace(hit, score=hit.score * w)
        out.append(hit)
    out.sort(key=lambda h: -h.score)  # stable: equal scores keep the input order
    ordered = banded(out, 0.0 if strict else band)
    return [h if h.rank == i else dataclasses.replace(h, rank=i) for i, h in enumerate(ordered, 1)]


def banded(hits: list[Hit], band: float) -> list[Hit]:
    """``hits`` (sorted by score, best first) in trust-band order (see the module doc)."""
    if len({h.trust for h in hits}) < 2:
        return hits
    left = list(hits)
    out: list[Hit] = []
    while left:
        bar = band * left[0].score  # left stays sorted: left[0] is the best score left
        pick = min(
            (i for i, h in enumerate(left) if h.score >= bar or i == 0),
            key=lambda i: (tier_rank(left[i].trust), i),
        )
        out.append(left.pop(pick))
    return out
