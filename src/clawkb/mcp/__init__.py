"""clawkb as an MCP server (``clawkb mcp``): knowledge-base and memory tools for agents.

Needs the ``mcp`` extra. :func:`serve` runs it over stdio or streamable HTTP;
:func:`build_server` returns the configured SDK server for embedding.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

    from clawkb.mcp.tools import KBTools

__all__ = ["build_server", "serve"]


def serve(
    home: str | os.PathLike[str],
    *,
    http: bool = False,
    host: str = "127.0.0.1",
    port: int = 8765,
    token: str | None = None,
    announce: Callable[[str], None] = print,
) -> None:
    """Open the KB at ``home`` and serve it until the client disconnects (stdio) or Ctrl-C.

    Over HTTP a non-loopback ``host`` needs ``token`` (bearer), as ``clawkb serve`` does.

    The KB is opened before the SDK is imported, so a wrong ``--kb`` fails
    at once with the store's message rather than after a slow import.
    """
    from clawkb.kb import KnowledgeBase

    with KnowledgeBase.open(home) as kb:
        from clawkb.mcp.server import run_server

        run_server(kb, http=http, host=host, port=port, token=token, announce=announce)


def build_server(tools: KBTools) -> MCPServer:
    """See :func:`clawkb.mcp.server.build_server`."""
    from clawkb.mcp.server import build_server as _build

    return _build(tools)
