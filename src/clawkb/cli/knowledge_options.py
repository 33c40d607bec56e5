"""How `clawkb search --explain` shows the knowledge stages' part of a hit (the
knowledge options themselves come from the search-options table, added by the
knowledge stage: :mod:`clawkb.knowledge.stage`)."""

from __future__ import annotations

from typing import Any


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
