"""The prompt block a code-generating agent pastes into its system prompt.

``hardware_context(kb, "turn on red led", ["nucleo-f401re"])`` returns the pin
aliases the query talks about and the best datasheet passages for those
boards (plus generic datasheets), each with its anchor; ``format_context``
renders it::

    [Pin aliases for query]
    nucleo-f401re: red_led = pin PA6 (arduino: D12)   <- nucleo-f401re.md:21 #3f0c...
    [Hardware documentation]
    --- nucleo-f401re · nucleo-f401re.md:30-41 · § User LEDs · #9a1b...
    ...passage text...
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from clawkb.hardware.aliases import find_conflicts, match_aliases
from clawkb.hardware.boards import check_boards
from clawkb.hardware.ranking import board_search
from clawkb.retrieve.hits import hit_dict
from clawkb.store.hardware_repo import boards_of_anchors, load_aliases
from clawkb.types import Hit

if TYPE_CHECKING:
    from clawkb.kb import KnowledgeBase


def hardware_context(
    kb: KnowledgeBase, query: str, boards: Sequence[str] = (), limit: int = 5
) -> dict[str, Any]:
    """Aliases and datasheet passages for ``query`` on ``boards`` (all boards if empty).

    The library entry point behind ``clawkb context`` and the MCP tool; plain
    data (JSON-ready). Passages come from datasheets only (of ``boards`` plus
    generic ones when boards are given), ranked by board-boosted BM25F.
    """
    remote = getattr(kb, "hardware_context", None)
    if remote is not None:  # a remote-only KB answers from Milvus (clawkb.backends.remote)
        found: dict[str, Any] = remote(query, boards, limit)
        return found
    t0 = time.perf_counter()
    names = check_boards(kb.conn, boards)
    aliases = load_aliases(kb.conn, names or None)
    matched = match_aliases(query, aliases)
    conflicts = find_conflicts(a for a, _ in matched)
    # board_search runs the one pipeline (which makes the index current first)
    # with snippets: a passage keeps every hit's matched terms (the snippet is dropped)
    res = board_search(kb, query, names, only=True, datasheets_only=True, limit=limit)
    board_of = boards_of_anchors(kb.conn, [h.anchor.id for h in res.hits])
    passages = passage_dicts(res.hits, board_of)
    return {
        "query": query,
        "boards": names,
        "aliases": [{**a.to_dict(), "matched_by": how} for a, how in matched],
        "conflicts": [c.describe() for c in conflicts],
        "passages": passages,
        "warnings": res.warnings,
        "took_ms": round((time.perf_counter() - t0) * 1000, 3),
    }


def format_context(ctx: dict[str, Any]) -> str:
    """The text block for a system prompt (empty sections are left out)."""
    out: list[str] = []
    if ctx["aliases"]:
        out.append("[Pin aliases for query]")
        for a in ctx["aliases"]:
            anchor = f" #{a['anchor']}" if a["anchor"] else ""
            out.append(f"{a['text']}   <- {a['path']}:{a['line']}{anchor}")
        out += [f"warning: {c}" for c in ctx["conflicts"]]
    if ctx["passages"]:
        if out:
            out.append("")
        out.append("[Hardware documentation]")
        for p in ctx["passages"]:
            loc = f"{p['path']}:{p['line_start']}-{p['line_end']}"
            if p["page"] is not None:
                loc += f" p.{p['page']}"
            head = " > ".join(p["heading_path"])
            board = p["board"] or "generic"
            out.append(
                f"--- {board} · {loc}" + (f" · § {head}" if head else "") + f" · #{p['anchor']}"
            )
            out.append(p["text"].strip())
    return "\n".join(out) + ("\n" if out else "")


def passage_dicts(hits: Sequence[Hit], board_of: Mapping[str, str | None]) -> list[dict[str, Any]]:
    """Datasheet passages of a prompt block: the hit JSON with its board, no snippet."""
    out = []
    for h in hits:
        d = hit_dict(h)
        d["board"] = board_of.get(h.anchor.id)
        for key in ("snippet", "highlights", "explanation"):
            d.pop(key, None)
        out.append(d)
    return out
