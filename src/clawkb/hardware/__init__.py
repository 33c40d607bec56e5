"""Hardware mode: datasheets per board, pin aliases, board-aware ranking, prompt context.

Public entry points (what the CLI, HTTP and MCP layers call):

* :func:`index_datasheets` — index datasheet folders (boards inferred per file);
* :func:`hardware_context` / :func:`format_context` — the agent prompt block;
* :func:`board_search` — BM25F with the boards in use boosted or filtered;
* :func:`list_pins` / :func:`set_pin` — read and edit pin aliases.

Names are imported on first use: ``clawkb context`` is a short-lived process
an agent pays for on every call, and it should not load the ingest pipeline.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from clawkb.hardware.aliases import PinAlias, extract_aliases, match_aliases, normalize_alias
    from clawkb.hardware.boards import infer_board, normalize_board
    from clawkb.hardware.context import format_context, hardware_context
    from clawkb.hardware.pins import PinEdit, list_pins, set_pin
    from clawkb.hardware.ranking import board_search
    from clawkb.hardware.sources import index_datasheets

_WHERE = {
    "PinAlias": "aliases",
    "extract_aliases": "aliases",
    "match_aliases": "aliases",
    "normalize_alias": "aliases",
    "infer_board": "boards",
    "normalize_board": "boards",
    "format_context": "context",
    "hardware_context": "context",
    "PinEdit": "pins",
    "list_pins": "pins",
    "set_pin": "pins",
    "board_search": "ranking",
    "index_datasheets": "sources",
}

__all__ = [
    "PinAlias",
    "PinEdit",
    "board_search",
    "extract_aliases",
    "format_context",
    "hardware_context",
    "index_datasheets",
    "infer_board",
    "list_pins",
    "match_aliases",
    "normalize_alias",
    "normalize_board",
    "set_pin",
]


def __getattr__(name: str) -> object:
    if name not in _WHERE:
        raise AttributeError(f"module 'clawkb.hardware' has no attribute {name!r}")
    return getattr(import_module(f"clawkb.hardware.{_WHERE[name]}"), name)
