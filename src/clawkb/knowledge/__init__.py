"""Knowledge that governs itself: trust tiers, domains, agent write-back, the note link
graph, and the content health check.

* :mod:`.classify` — which tier and domain a document gets (config rules, front
  matter, the datasheet flag).
* :mod:`.links` — links between notes: extraction at ingest, resolution, lookups.
* :mod:`.hook` — the ingest hook that stores tier, domain and links per document.
* :mod:`.writeback` — ``learn``: agents write what they learned as Markdown notes.
* :mod:`.health` — ``clawkb doctor --content``: broken links, orphans, duplicates, conflicts.
* :mod:`.records` — table rows of hits as header → value records.
"""

from __future__ import annotations

#: Trust tiers, most trusted first.
TIERS = ("official", "team", "community", "learned", "memory")


def tier_rank(tier: str | None) -> int:
    """0 for ``official`` … 4 for ``memory``; an unknown or missing tier ranks last."""
    return TIERS.index(tier) if tier in TIERS else len(TIERS)


def at_least(tier: str | None, minimum: str) -> bool:
    """Whether ``tier`` is as trusted as ``minimum`` or more."""
    return tier_rank(tier) <= tier_rank(minimum)
