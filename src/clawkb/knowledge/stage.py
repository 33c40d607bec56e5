"""The knowledge stages (trust tiers, domain routing, graph) as a ``clawkb.query_stages``
plugin: it wraps the pipeline for every search of a KB that wants them, and adds its
options (``--min-trust``, ``--domain``, ...) to the one search-options table
(:mod:`clawkb.retrieve.options`), so the CLI, HTTP API and MCP tool all offer them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from clawkb.knowledge import TIERS
from clawkb.retrieve.options import Option

if TYPE_CHECKING:
    from clawkb.kb import KnowledgeBase
    from clawkb.retrieve.query import Query
    from clawkb.retrieve.result import SearchResult


def _tiers() -> tuple[str, ...]:
    return TIERS


class KnowledgeStage:
    """Around the pipeline, innermost of the built-in stages."""

    order = 50
    options = (
        Option("min_trust", str, "Only sources of this trust tier or above (official is"
               " highest).", choices=_tiers),
        Option("domain", str, "Only this domain (repeatable; default: routed when domains"
               " are configured).", dest="domains", multiple=True, metavar="NAME"),
        Option("route", bool, "Route to the best domain(s) (default: on when domains are"
               " configured and no domain is given).", tristate=True),
        Option("strict_trust", bool, "A higher tier's hits always above a lower tier's"
               " (default: knowledge.strict_priority).", tristate=True),
        Option("graph", bool, "Add passages linked from the top hits (default: on when"
               " knowledge.graph_weight > 0).", tristate=True),
        Option("aliases", bool, "Also search with the pins/aliases the datasheet tables give"
               " for the query."),
    )  # fmt: skip

    @staticmethod
    def search_kwargs(params: dict[str, Any]) -> dict[str, Any]:
        """Pop this stage's options; ``{"knowledge": KnowledgeOptions}`` when one is given
        (else the KB's own rules apply: ``sources:``, ``domains:``)."""
        values = {o.key: params.pop(o.key, None) for o in KnowledgeStage.options}
        if not any(v for v in values.values() if v is not None and v != ()):
            return {}
        from clawkb.knowledge.search import KnowledgeOptions

        return {
            "knowledge": KnowledgeOptions(
                min_trust=values["min_trust"],
                domains=tuple(values["domains"] or ()),
                route=values["route"],
                strict=values["strict_trust"],
                graph=values["graph"],
                aliases=bool(values["aliases"]),
            )
        }

    @staticmethod
    def around(kb: KnowledgeBase, q: Query, run: Callable[[Query], SearchResult]) -> SearchResult:
        from clawkb.knowledge import search as knowledge

        if not knowledge.wanted(kb, q.knowledge):
            return run(q)
        return knowledge.run_query(kb, q, lambda _kb, sub: run(sub))
