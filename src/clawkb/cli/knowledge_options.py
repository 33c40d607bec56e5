"""The knowledge options of `clawkb search`: --min-trust, --domain, --route, --strict-trust,
--graph (see clawkb.knowledge.search)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from clawkb.knowledge import TIERS

_NAMES = ("min_trust", "domains", "route", "strict_trust", "graph", "aliases")


def knowledge_options(func: Callable[..., Any]) -> Callable[..., Any]:
    opts = [
        click.option(
            "--min-trust", type=click.Choice(TIERS), help="Only sources of this tier or above."
        ),
        click.option(
            "--domain", "domains", multiple=True, metavar="NAME", help="Only this domain."
        ),
        click.option(
            "--route/--no-route",
            default=None,
            help="Route to the best domain(s) (default: on"
            " when domains are configured and no --domain is given).",
        ),
        click.option(
            "--strict-trust/--no-strict-trust",
            default=None,
            help="A higher tier's hits always above a lower tier's.",
        ),
        click.option(
            "--graph/--no-graph", default=None, help="Add passages linked from the top hits."
        ),
        click.option(
            "--aliases",
            is_flag=True,
            default=None,
            help="Also search with the pins/aliases the datasheet tables give for the query.",
        ),
    ]
    for opt in reversed(opts):
        func = opt(func)
    return func


def knowledge_from(kwargs: dict[str, Any]) -> Any:
    """Pop the knowledge options out of ``kwargs``; None when none was given."""
    values = {n: kwargs.pop(n, None) for n in _NAMES}
    if not any(v for v in values.values() if v is not None and v != ()):
        return None
    from clawkb.knowledge.search import KnowledgeOptions

    return KnowledgeOptions(
        min_trust=values["min_trust"],
        domains=tuple(values["domains"] or ()),
        route=values["route"],
        strict=values["strict_trust"],
        graph=values["graph"],
        aliases=bool(values["aliases"]),
    )


def print_knowledge_explain(exp: dict[str, Any]) -> None:
    """The trust, graph and route parts of a hit's explanation, one line each."""
    from clawkb.cli.common import echo

    if "trust" in exp:
        echo(f"      trust {exp['trust']['tier']}: x{exp['trust']['weight']}")
    if "graph" in exp:
        echo(f"      graph: {exp['graph']['path']} ({exp['graph']['kind']})")
    if "route" in exp:
        r = exp["route"]
        scores = ", ".join(f"{d} {v:+.2f}" for d, v in r["scores"].items())
        echo(f"      route: {r['domains']} ({r['reason']}; {scores})")
