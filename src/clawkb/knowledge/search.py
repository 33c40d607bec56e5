"""Search with the knowledge stages: domain routing or filter, trust tiers, graph channel.

:func:`knowledge_search` wraps one ranked search (the pipeline): it asks for
a deeper candidate list, routes the query to its domain(s) when domains are
configured and none was named, applies :func:`clawkb.knowledge.stages.refine`
and cuts to ``limit``. It runs when a query names a knowledge option or the
KB configures ``sources:`` or ``domains:``; other KBs search exactly as before.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from clawkb.errors import ConfigError
from clawkb.knowledge import TIERS
from clawkb.knowledge.stages import KnowledgeWeights, refine

if TYPE_CHECKING:
    from clawkb.kb import KnowledgeBase

DEPTH = 30


@dataclass(frozen=True)
class KnowledgeOptions:
    min_trust: str | None = None
    domains: tuple[str, ...] = ()
    route: bool | None = None  # None: route when domains are configured and none is named
    strict: bool | None = None  # None: knowledge.strict_priority
    graph: bool | None = None  # None: on when knowledge.graph_weight > 0
    off: bool = False  # the inner search of knowledge_search itself

    def __post_init__(self) -> None:
        if self.min_trust is not None and self.min_trust not in TIERS:
            raise ConfigError(
                f"unknown trust tier {self.min_trust!r} (expected one of {', '.join(TIERS)})"
            )

    @property
    def asked(self) -> bool:
        return bool(self.min_trust or self.domains or self.route or self.strict or self.graph)


OFF = KnowledgeOptions(off=True)


def wanted(kb: KnowledgeBase, opts: KnowledgeOptions | None) -> bool:
    if opts is not None and opts.off:
        return False
    return bool((opts and opts.asked) or kb.config.sources or kb.config.domains)


def knowledge_search(
    kb: KnowledgeBase,
    query: str,
    limit: int,
    opts: KnowledgeOptions | None,
    run: Callable[[int], Any],
    explain: bool = False,
) -> Any:
    """``run(depth)`` returns a search result; its hits are refined and cut to ``limit``."""
    opts = opts or KnowledgeOptions()
    weights = KnowledgeWeights.of(kb)
    if opts.strict is not None:
        weights = dataclasses.replace(weights, strict=opts.strict)
    if opts.graph is not None:
        weights = dataclasses.replace(weights, graph=weights.graph if opts.graph else 0.0)
    unknown = [d for d in opts.domains if kb.config.domains and d not in kb.config.domains]
    domains = tuple(opts.domains)
    route = None
    if not domains and (opts.route or (opts.route is None and kb.config.domains)):
        from clawkb.knowledge.router import route_kb

        route = route_kb(kb, query)
        domains = route.domains
    res = run(max(DEPTH, limit * 3))
    hits = refine(
        kb,
        query,
        res.hits,
        weights,
        domains=domains,
        min_trust=opts.min_trust,
        explain=explain,
        unassigned=route is not None,  # routing keeps notes of no domain; --domain does not
    )
    if route is not None and domains and not hits:  # the routed domains had nothing
        hits = refine(kb, query, res.hits, weights, min_trust=opts.min_trust, explain=explain)
        route = dataclasses.replace(route, domains=(), reason=route.reason + "; no hit: all")
    if explain and route is not None:
        info = route.to_dict()
        hits = [
            dataclasses.replace(h, explanation={**(h.explanation or {}), "route": info})
            for h in hits
        ]
    res = dataclasses.replace(res, hits=hits[:limit])
    if getattr(res, "matched", -1) >= 0:  # passages the graph added matched no term
        res.matched = max(res.matched, len(res.hits))
    if unknown:
        res.warnings.append(f"unknown domain(s) {', '.join(unknown)} (see domains: in config)")
    if hasattr(res, "stages") and (route is not None or domains):
        note = f"domains {', '.join(domains) or 'all'}" + (f" ({route.reason})" if route else "")
        res.stages.append({"stage": "knowledge", "ms": 0.0, "status": "ok", "note": note})
    return res
