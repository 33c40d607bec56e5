"""clawkb as an MCP server (``clawkb mcp``): knowledge-base and memory tools for agents.

Needs the ``mcp`` extra. :func:`serve` runs it over stdio; :func:`build_server`
returns the configured SDK server for embedding (the HTTP server mounts it at
``/mcp``, and :func:`clawkb.server.mcp_http.serve_mcp` serves it alone over
streamable HTTP: the MCP package does not import the HTTP server).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

    from clawkb.mcp.tools import KBTools

__all__ = ["build_server", "serve"]


def serve(home: str | os.PathLike[str]) -> None:
    """Open the KB at ``home`` and serve it over stdio until the client disconnects.

    The KB is opened before the SDK is imported, so a wrong ``--kb`` fails
    at once with the store's message rather than after a slow import.
    """
    from clawkb.kb import KnowledgeBase

    with KnowledgeBase.open(home) as kb:
        from clawkb.mcp.server import run_server

        run_server(kb)


def build_server(tools: KBTools) -> MCPServer:
    """See :func:`clawkb.mcp.server.build_server`."""
    from clawkb.mcp.server import build_server as _build

    return _build(tools)
