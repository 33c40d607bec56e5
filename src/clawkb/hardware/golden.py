"""Golden hardware queries: ranking with ``--board`` and the alias block, checked together.

Like ``clawkb check`` (see :mod:`clawkb.retrieve.golden`), plus a ``board``
per query and, for alias questions, the exact alias lines expected::

    k: 3
    threshold: 0.9
    queries:
      - query: "turn on the red LED"
        board: nucleo-f401re                 # or a list of boards
        expect_path: "nucleo-f401re.md"
        expect_heading: "Pin Aliases"         # optional
        expect_aliases: ["nucleo-f401re: red_led = pin PA6"]   # optional, exact set

A query passes ranking when an expected hit is in the top k of a board-boosted
search; its alias block is correct when the aliases ``hardware_context`` picks
are exactly the expected ones (board, alias and pin; extras ignored).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from clawkb.errors import ConfigError
from clawkb.hardware.context import hardware_context
from clawkb.retrieve.golden import GoldenQuery, read_golden_mapping

if TYPE_CHECKING:
    from clawkb.kb import KnowledgeBase

_KEYS = {"query", "board", "expect_path", "expect_heading", "expect_aliases"}


def load_hardware_golden(path: str | Path) -> dict[str, Any]:
    file, data = read_golden_mapping(path)
    if not isinstance(data.get("queries"), list):
        raise ConfigError(f"{file}: expected a mapping with a 'queries' list")
    for n, e in enumerate(data["queries"], start=1):
        where = f"{file}: queries entry {n}"
        if not isinstance(e, dict) or set(map(str, e)) - _KEYS:
            raise ConfigError(f"{where}: expected keys among {', '.join(sorted(_KEYS))}")
        if not isinstance(e.get("query"), str) or not isinstance(e.get("expect_path"), str):
            raise ConfigError(f"{where}: 'query' and 'expect_path' are required strings")
        boards = e.get("board", [])
        e["board"] = [boards] if isinstance(boards, str) else list(boards)
    return data


def check_hardware_golden(kb: KnowledgeBase, path: str | Path) -> dict[str, Any]:
    """Per-query outcome plus ``hit_at_k`` and ``alias_accuracy`` over the file."""
    data = load_hardware_golden(path)
    k = int(data.get("k", 3))
    results = []
    for e in data["queries"]:
        gq = GoldenQuery(e["query"], e["expect_path"], e.get("expect_heading"))
        hits = kb.search(e["query"], limit=20, boards=e["board"]).hits
        rank = next((i for i, h in enumerate(hits, start=1) if gq.matches(h)), None)
        row: dict[str, Any] = {
            "query": e["query"],
            "board": e["board"],
            "rank": rank,
            "passed": rank is not None and rank <= k,
            "top": [f"{h.anchor.location} § {' > '.join(h.anchor.heading_path)}" for h in hits[:k]],
        }
        if "expect_aliases" in e:
            ctx = hardware_context(kb, e["query"], e["board"], limit=1)
            got = sorted(f"{a['board']}: {a['alias']} = pin {a['pin']}" for a in ctx["aliases"])
            row["aliases"] = got
            row["aliases_ok"] = got == sorted(e["expect_aliases"] or [])
        results.append(row)
    alias_rows = [r for r in results if "aliases_ok" in r]
    return {
        "k": k,
        "threshold": float(data.get("threshold", 0.9)),
        "total": len(results),
        "hit_at_k": sum(r["passed"] for r in results) / len(results) if results else 0.0,
        "alias_queries": len(alias_rows),
        "alias_accuracy": (
            sum(r["aliases_ok"] for r in alias_rows) / len(alias_rows) if alias_rows else 1.0
        ),
        "results": results,
    }
